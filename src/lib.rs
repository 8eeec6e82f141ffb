//! bytepair's compiled core: the hot loops of byte-pair encoding in plain Rust.
//!
//! - [`pretokenize`]: special tokens and the pre-tokenizer regex;
//! - [`builtin`]: hand-written, exact splitters for the GPT-2/cl100k/o200k patterns;
//! - [`chunking`]: where text may be cut and still pre-tokenize identically;
//! - [`blocks`]: reading files in blocks cut at those points;
//! - [`count`]: counting pre-tokens in files and documents, in parallel (training's map);
//! - [`train`]: the incremental merge loop (training's reduce);
//! - [`encode`]: text → ids and ids → bytes;
//! - [`packed`]: short byte strings as integer hash keys (counting, the piece cache);
//! - [`ranks`]: recovering merges from rank-only (tiktoken) vocabularies;
//! - [`shards`]: encoding whole files to uint16/uint32 id files on all threads;
//! - [`tiktoken`]: parsing `.tiktoken` rank files.
//!
//! The Python bindings live apart, in `py.rs`, behind the `python` feature.

pub mod blocks;
pub mod builtin;
pub mod chunking;
pub mod count;
pub mod encode;
pub mod packed;
pub mod pretokenize;
pub mod ranks;
pub mod shards;
pub mod spm;
pub mod tiktoken;
pub mod train;

#[cfg(feature = "python")]
mod py;
#[cfg(feature = "python")]
mod py_spm;
