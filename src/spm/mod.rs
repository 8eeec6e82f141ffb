//! SentencePiece-family models (Llama 2, Mistral): code-point BPE with byte
//! fallback, loaded from a `tokenizer.model` and encoded/decoded exactly as the
//! `sentencepiece` library does, in plain Rust (no sentencepiece, no protobuf
//! runtime).
//!
//! Unlike the byte-level BPE of GPT-2/tiktoken (merge ranks over bytes after a
//! regex pre-tokenizer), SentencePiece BPE merges Unicode characters by piece
//! *score*, over the whole normalized text, and falls back to `<0xNN>` byte
//! pieces for characters that have no piece.
//!
//! - [`wire`]: the protobuf wire format, by hand;
//! - [`proto`]: `ModelProto` (pieces, trainer and normalizer specs), read and written;
//! - [`charsmap`]: the precompiled normalization rules (a double-array trie);
//! - [`normalizer`]: sentencepiece's normalization (dummy prefix, `▁`, whitespace);
//! - [`model`]: the checked vocabulary; [`chars`]: what it says about each character;
//! - [`encode`]: the merge loop, with a word cache where it is provably exact;
//! - [`decode`]: ids back to text; [`hf_decode`]: as `tokenizers` decodes a
//!   `tokenizer.json` of the family;
//! - [`train`], [`train_merge`]: training, compatibly with sentencepiece's BPE trainer
//!   ([`train_lists`]: the merge loop's occurrence lists, in one pool);
//! - [`seam`]: the model seam ([`crate::model::Model`]): special tokens, `<s>`/`</s>`
//!   options, batches, streaming and files.

pub mod chars;
pub mod charsmap;
pub mod decode;
pub mod encode;
pub mod hf_decode;
pub mod model;
pub mod normalizer;
pub mod proto;
pub mod seam;
pub mod train;
pub mod train_lists;
pub mod train_merge;
pub mod wire;

#[cfg(test)]
mod tests;

pub use hf_decode::{DecodeStep, HfDecoder};
pub use model::{Prefix, SpmModel};
pub use proto::{ModelProto, Piece, PieceType};

use std::fmt;

/// Why a model could not be loaded, or an input not encoded/decoded.
#[derive(Debug, Clone, PartialEq)]
pub enum SpmError {
    /// The bytes are not a well-formed protobuf message: `offset` is the byte
    /// of the file where the broken item starts.
    Corrupt { offset: usize, reason: String },
    /// A well-formed model of a kind bytepair does not encode (Unigram, …).
    Unsupported(String),
    /// A well-formed model that sentencepiece would refuse too.
    Invalid(String),
    /// An id outside the vocabulary.
    OutOfRange(String),
}

impl fmt::Display for SpmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpmError::Corrupt { offset, reason } => {
                write!(f, "corrupt SentencePiece model at byte {offset}: {reason}")
            }
            SpmError::Unsupported(why) | SpmError::Invalid(why) | SpmError::OutOfRange(why) => {
                f.write_str(why)
            }
        }
    }
}

impl std::error::Error for SpmError {}
