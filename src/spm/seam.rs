//! The SentencePiece model behind the model seam ([`Model`]), so that batches,
//! streaming and file encoding work for it as for byte-level BPE.
//!
//! What the seam adds to sentencepiece's own `Encode`:
//! - special tokens: the CONTROL pieces (`<s>`, `</s>`, `[INST]`, …) are the model's
//!   special tokens. sentencepiece never matches them in text; here the caller's
//!   allowed ones are matched (leftmost-longest) and become their ids, as Hugging
//!   Face does. Only the text before the first of them gets the dummy prefix
//!   (HF's `prepend_scheme: "first"`): `"<s>[INST] Hi"` -> `<s> [INST] ▁Hi`.
//!   USER_DEFINED pieces are not special tokens: they are always matched, as in
//!   sentencepiece.
//! - `<s>` before and `</s>` after each text, when the model says so
//!   ([`SpmModel::with_options`]).
//!
//! Where text may be cut: nowhere. The dummy prefix goes at the start of a text, and
//! `remove_extra_whitespaces` drops spaces at both ends, so a text cut in two encodes
//! differently from the whole (`"a b"` is `▁a ▁b`; `"a"` + `" b"` is `▁a ▁▁b`). So a
//! file is encoded as one text, and streaming holds the text until its end.

use super::encode::WordCache;
use super::model::SpmModel;
use crate::model::{EncodeError, Model, SafeCuts};
use crate::pretok::SpecialMatcher;

impl SpmModel {
    /// Appends the ids of `text`, the `specials` found in it as special tokens
    /// (see the module header).
    fn encode_text(
        &self,
        text: &str,
        specials: &SpecialMatcher,
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) {
        if let (true, Some(bos)) = (self.add_bos, self.bos_id) {
            out.push(bos);
        }
        let mut at = 0;
        for (start, end, index) in specials.find_all(text.as_bytes()) {
            if start > at {
                self.encode_segment(&text[at..start], at == 0, cache, out);
            }
            out.push(self.piece_to_id(&specials.tokens()[index]));
            at = end;
        }
        if at < text.len() {
            self.encode_segment(&text[at..], at == 0, cache, out);
        }
        if let (true, Some(eos)) = (self.add_eos, self.eos_id) {
            out.push(eos);
        }
    }
}

impl Model for SpmModel {
    type Cache = WordCache;

    fn take_cache(&self) -> WordCache {
        self.caches.take()
    }

    fn give_back_cache(&self, cache: WordCache) {
        self.caches.give_back(cache)
    }

    /// At most an id per byte of the normalized text ("▁" is one id for one space),
    /// plus `<s>` and `</s>`. Without normalization rules that is one per byte of
    /// `text` and one for the dummy prefix; rules can lengthen text ("½" -> "1⁄2"),
    /// so then the text is normalized to count.
    fn most_ids(&self, text: &str) -> usize {
        let body = if self.has_charsmap {
            self.normalizer.normalize(text).len()
        } else {
            text.len() + 1
        };
        body + 2
    }

    fn safe_cuts(&self) -> SafeCuts {
        SafeCuts::Nowhere
    }

    fn encode_cached(
        &self,
        text: &str,
        specials: &SpecialMatcher,
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) -> Result<(), EncodeError> {
        self.encode_text(text, specials, cache, out);
        Ok(())
    }

    /// Nothing is final before the text ends (see the module header).
    fn encode_until(
        &self,
        _text: &str,
        _specials: &SpecialMatcher,
        _limit: usize,
        _cache: &mut WordCache,
        _out: &mut Vec<u32>,
    ) -> Result<usize, EncodeError> {
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spm::tests::model;
    use crate::spm::PieceType::Normal;

    fn small() -> SpmModel {
        let pieces = [
            ("\u{2581}", 0.0, Normal),
            ("a", -1.0, Normal),
            ("b", -2.0, Normal),
        ];
        model(&pieces, true)
    }

    fn matcher(tokens: &[&str]) -> SpecialMatcher {
        let tokens: Vec<String> = tokens.iter().map(|t| t.to_string()).collect();
        SpecialMatcher::new(&tokens).unwrap()
    }

    fn encode(m: &SpmModel, text: &str, specials: &SpecialMatcher) -> Vec<u32> {
        let mut out = Vec::new();
        m.with_cache(|c| m.encode_cached(text, specials, c, &mut out))
            .unwrap();
        out
    }

    #[test]
    fn without_specials_the_seam_encodes_as_sentencepiece() {
        let m = small();
        for text in ["", "a b", "  a  b ", "<s>a"] {
            assert_eq!(
                encode(&m, text, &matcher(&[])),
                m.encode(text, false, false).unwrap()
            );
        }
    }

    #[test]
    fn an_allowed_control_piece_is_its_id_and_only_the_first_segment_gets_the_dummy_prefix() {
        let m = small();
        let bos = m.bos_id.unwrap();
        let got = encode(&m, "a<s>b", &matcher(&["<s>"]));
        let mut want = m.encode("a", false, false).unwrap();
        want.push(bos);
        let after = m.normalizer.normalize_with("b", false);
        assert!(!after.starts_with('\u{2581}'));
        let mut cache = WordCache::default();
        m.encode_segment("b", false, &mut cache, &mut want);
        assert_eq!(got, want);
        assert_eq!(encode(&m, "<s>", &matcher(&["<s>"])), vec![bos]);
    }

    #[test]
    fn options_put_bos_and_eos_around_each_text() {
        let m = small();
        let plain = m.encode("a b", true, true).unwrap();
        let m = m.with_options(true, true).unwrap();
        assert_eq!(encode(&m, "a b", &matcher(&[])), plain);
    }
}
