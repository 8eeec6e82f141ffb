//! Ids -> text for a SentencePiece model, as `SentencePieceProcessor::Decode`
//! does it.
//!
//! - Control pieces (`<s>`, `</s>`) write nothing; `<unk>` writes the model's
//!   unknown surface (" ⁇ " by default).
//! - A run of byte pieces `<0xNN>` is decoded as UTF-8, one character at a time;
//!   each byte that starts no valid character becomes one U+FFFD (so a truncated
//!   3-byte character gives two U+FFFD, where Python's decoder gives one).
//! - Every `▁` becomes a space. The first piece loses its leading `▁` (the dummy
//!   prefix) when the model adds one or removes extra whitespace; with
//!   remove_extra_whitespaces every piece loses it until some text is written.
//! - Finally the denormalizer, if the model has one, rewrites the text.
//!
//! [`SpmModel::decode_bytes`] is the same with byte pieces kept as raw bytes (what
//! `Tokenizer.decode_bytes` returns; a model with a denormalizer gives the UTF-8 of
//! `decode`, since its rules rewrite text).
//!
//! A model read from a `tokenizer.json` decodes as `tokenizers` does instead, by the
//! file's decoder (`hf_decode.rs`); there `decode_bytes` is the UTF-8 of `decode`.
//!
//! ```text
//! ["▁Hello", "▁world", "<0xE2>", "<0x9C>", "<0x93>"] -> "Hello world✓"
//! ```

use super::model::{byte_of_piece, SpmModel};
use super::normalizer::{utf8_char_len, SPACE_SYMBOL};
use super::proto::PieceType;
use super::SpmError;

impl SpmModel {
    /// Decodes ids to text; an id outside the vocabulary is an error.
    pub fn decode(&self, ids: &[u32]) -> Result<String, SpmError> {
        if let Some(decoder) = &self.hf_decoder {
            self.check_ids(ids)?;
            return Ok(self.hf_decode(decoder, ids).0);
        }
        let text = self.decode_with(ids, push_chars, None)?;
        let text = String::from_utf8(text).expect("push_chars writes UTF-8");
        Ok(match &self.denormalizer {
            Some(d) => d.normalize(&text),
            None => text,
        })
    }

    /// Decodes ids to bytes, byte pieces as they are (see the module header).
    pub fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>, SpmError> {
        if self.denormalizer.is_some() || self.hf_decoder.is_some() {
            return self.decode(ids).map(String::into_bytes);
        }
        self.decode_with(ids, |text, bytes| text.append(bytes), None)
    }

    /// What each id adds to [`decode_bytes`](Self::decode_bytes)`(ids)`, so that the
    /// surfaces joined are exactly those bytes: a control piece adds nothing, the first
    /// piece no dummy-prefix space. None for a model with a denormalizer, whose rules
    /// rewrite the joined text as a whole. Under a `tokenizer.json`'s decoder, the
    /// bytes of the text each id owns (`hf_decode.rs`).
    ///
    /// ```text
    /// ["<s>", "▁Hello", "▁world"] -> ["", "Hello", " world"]
    /// ```
    pub fn surfaces(&self, ids: &[u32]) -> Result<Option<Vec<Vec<u8>>>, SpmError> {
        if let Some(decoder) = &self.hf_decoder {
            self.check_ids(ids)?;
            let (text, owners) = self.hf_decode(decoder, ids);
            let mut surfaces = vec![Vec::new(); ids.len()];
            for (&byte, &owner) in text.as_bytes().iter().zip(&owners) {
                surfaces[owner as usize].push(byte);
            }
            return Ok(Some(surfaces));
        }
        if self.denormalizer.is_some() {
            return Ok(None);
        }
        let mut ends = Vec::with_capacity(ids.len());
        let text = self.decode_with(ids, |text, bytes| text.append(bytes), Some(&mut ends))?;
        let mut start = 0;
        Ok(Some(
            ends.into_iter()
                .map(|end| {
                    let surface = text[start..end].to_vec();
                    start = end;
                    surface
                })
                .collect(),
        ))
    }

    /// An error naming the first id outside the vocabulary.
    pub(super) fn check_ids(&self, ids: &[u32]) -> Result<(), SpmError> {
        match ids.iter().find(|&&id| id as usize >= self.entries.len()) {
            Some(id) => Err(SpmError::OutOfRange(format!(
                "id {id} is not in the vocabulary of {}",
                self.len()
            ))),
            None => Ok(()),
        }
    }

    /// The pieces' surfaces joined; runs of byte pieces go through `push_bytes`.
    /// With `ends`, pending bytes are pushed after every id and the text's length
    /// after each id is noted there (for appending `push_bytes` only: sooner pushes
    /// give the same text).
    fn decode_with(
        &self,
        ids: &[u32],
        push_bytes: impl Fn(&mut Vec<u8>, &mut Vec<u8>),
        mut ends: Option<&mut Vec<usize>>,
    ) -> Result<Vec<u8>, SpmError> {
        let mut text = Vec::new();
        let mut bytes = Vec::new();
        let mut strip_dummy = true; // sentencepiece's `is_bos_ws`
        let mut dummy_seen = false;
        for &id in ids {
            let entry = self.entries.get(id as usize).ok_or_else(|| {
                SpmError::OutOfRange(format!(
                    "id {id} is not in the vocabulary of {}",
                    self.len()
                ))
            })?;
            // sentencepiece decodes the piece's string back to an id first.
            let id = self.piece_to_id(&entry.piece);
            if self.kind(id) == PieceType::Byte {
                bytes.push(byte_of_piece(&entry.piece).expect("byte pieces are checked at load"));
            } else {
                push_bytes(&mut text, &mut bytes);
                if dummy_seen || !text.is_empty() {
                    strip_dummy = false;
                }
                dummy_seen = self.decode_piece(&entry.piece, id, strip_dummy, &mut text);
            }
            if let Some(ends) = ends.as_deref_mut() {
                push_bytes(&mut text, &mut bytes);
                ends.push(text.len());
            }
        }
        push_bytes(&mut text, &mut bytes);
        Ok(text)
    }

    /// Appends the surface of one non-byte piece; returns whether it consumed
    /// the dummy-prefix space.
    fn decode_piece(&self, piece: &str, id: u32, strip_dummy: bool, text: &mut Vec<u8>) -> bool {
        match self.kind(id) {
            PieceType::Control => return false,
            PieceType::Unknown => {
                if self.entries[id as usize].piece == piece {
                    text.extend_from_slice(self.unk_surface.as_bytes());
                } else {
                    text.extend_from_slice(piece.as_bytes());
                }
                return false;
            }
            _ => {}
        }
        let mut piece = piece;
        let mut consumed = false;
        if strip_dummy && (self.add_dummy_prefix || self.remove_extra_whitespaces) {
            if let Some(rest) = piece.strip_prefix(SPACE_SYMBOL) {
                piece = rest;
                // Removing extra whitespace strips every leading ▁, piece after piece.
                consumed = !self.remove_extra_whitespaces;
            }
        }
        text.extend_from_slice(piece.replace(SPACE_SYMBOL, " ").as_bytes());
        consumed
    }
}

/// Decodes the pending byte pieces into `text` as sentencepiece does (see the
/// module header) and empties `bytes`.
fn push_chars(text: &mut Vec<u8>, bytes: &mut Vec<u8>) {
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        match utf8_char_len(rest) {
            Some(n) => {
                text.extend_from_slice(&rest[..n]);
                rest = &rest[n..];
            }
            None => {
                text.extend_from_slice("\u{FFFD}".as_bytes());
                rest = &rest[1..];
            }
        }
    }
    bytes.clear();
}
