//! bytepair's compiled core: the hot loops of byte-pair encoding in plain Rust.
//!
//! - [`pretokenize`]: special tokens and the pre-tokenizer regex;
//! - [`builtin`]: hand-written, exact splitters for the GPT-2/cl100k/o200k patterns;
//! - [`chunking`]: where text may be cut and still pre-tokenize identically;
//! - [`count`]: counting pre-tokens in files and documents, in parallel (training's map);
//! - [`train`]: the incremental merge loop (training's reduce);
//! - [`encode`]: text → ids and ids → bytes;
//! - [`ranks`]: recovering merges from rank-only (tiktoken) vocabularies.
//!
//! The Python bindings live apart, in `py.rs`, behind the `python` feature.

pub mod builtin;
pub mod chunking;
pub mod count;
pub mod encode;
pub mod pretokenize;
pub mod ranks;
pub mod train;

#[cfg(feature = "python")]
mod py;
