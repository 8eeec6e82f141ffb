//! bytepair's compiled core: the hot loops of byte-pair encoding in plain Rust.
//!
//! - [`pretok`]: pre-tokenization — the built-in patterns, their hand-written
//!   splitters, the regex engine, and special-token matching;
//! - [`bpe`]: byte-level BPE — the model as data, the merge loops, the piece cache,
//!   the encoder, training's merge loop, and merges recovered from ranks;
//! - [`cache_pool`]: warm caches kept between calls, one pool for every model kind;
//! - [`code_points`]: Python's strings (code points one, two or four bytes wide) to
//!   UTF-8, for a batch's strings, on its threads;
//! - [`model`]: the seam between a model kind and the code that runs it
//!   (batches, streams, files);
//! - [`io`]: files in blocks cut at safe points, a text file's documents, counting
//!   pre-tokens, batches, streaming, encoding files to shards, and `.tiktoken` files;
//! - [`packed`]: short byte strings as integer hash keys (counting, the piece cache);
//! - [`bytes_map`]: a table keyed by longer byte strings (the piece cache's long pieces);
//! - [`pages`]: huge pages for large buffers and tables;
//! - [`spm`]: the SentencePiece model kind — code-point BPE merged by score, with
//!   byte fallback — read from and written to `.model` files.
//!
//! The Python bindings live apart, in `py/`, behind the `python` feature; `testing`
//! holds what the core's tests share.

pub mod bpe;
pub mod bytes_map;
pub mod cache_pool;
pub mod code_points;
pub mod io;
pub mod model;
pub mod packed;
pub mod pages;
pub mod pretok;
pub mod spm;
#[cfg(test)]
mod testing;

#[cfg(feature = "python")]
mod py;
