//! The SentencePiece model behind the model seam ([`Model`]), so that batches,
//! streaming and file encoding work for it as for byte-level BPE.
//!
//! What the seam adds to sentencepiece's own `Encode`:
//! - special tokens: the CONTROL pieces (`<s>`, `</s>`, `[INST]`, …) are the model's
//!   special tokens. sentencepiece never matches them in text; here the caller's
//!   allowed ones are matched (leftmost-longest) and become their ids, as Hugging
//!   Face does. Which texts between them get the dummy prefix is the model's
//!   [`Prefix`]: for a `.model`, the one at the start (`"<s>[INST] Hi"` ->
//!   `<s> [INST] Hi`, `"Hi<s>"` -> `▁Hi <s>`); for a `tokenizer.json`, where
//!   Hugging Face's Metaspace or `Prepend` normalizer puts it.
//!   USER_DEFINED pieces are not special tokens: they are always matched, as in
//!   sentencepiece.
//!
//! `<s>` before and `</s>` after each text (sentencepiece's `add_bos`/`add_eos`) are
//! the seam's [`crate::model::Frame`] ([`SpmModel::frame`]), as for every kind.
//!
//! Where text may be cut: at word cuts and the edges of special tokens, for the
//! models where that is exact ([`SpmModel::cuts_words`]: Llama 2's and Mistral's
//! `.model`), elsewhere nowhere. A part after the first is encoded as the rest of its
//! text: without the dummy prefix ([`Model::encode_part_cached`]), so `"a b"` cut
//! before the space is `▁a` + `▁b`, as whole (encoding `" b"` as a text of its own
//! would give `▁▁b`). A file, a long text of a batch and a shard folder's documents
//! are then encoded in parts on all cores, a block at a time; for the other models
//! (`remove_extra_whitespaces` drops spaces at both ends; pieces that join a word to
//! the mark after it; UNUSED pieces, resolved per text) a text is encoded whole.
//! Streaming goes as far as the last cut a margin before the end of the text known
//! so far, or, for the other models, holds the text until its end.

use super::chars::NO_ID;
use super::encode::WordCache;
use super::model::{Prefix, SpmModel};
use crate::io::chunking::{last_cut, TextCuts};
use crate::model::{EncodeError, Model, SafeCuts};
use crate::pretok::SpecialMatcher;

impl SpmModel {
    /// Whether text may be cut at word cuts ([`TextCuts::Words`]) and the edges of
    /// special tokens: the parts, a later one encoded without the dummy prefix, give
    /// the ids of the whole when
    /// - the normalizer maps each character alone (no rules), turns spaces into `▁`
    ///   and keeps every one (no `remove_extra_whitespaces`), the mark before words
    ///   (not `treat_whitespace_as_suffix`);
    /// - no merge can join a character to the `▁` after it (no piece holds one, or
    ///   Metaspace `split`), no user-defined symbol holds a space or `▁`, and `▁` has
    ///   a piece or bytes fall back (two unknown characters would make one `<unk>`);
    /// - no UNUSED pieces (their splits are resolved per text) and no tokens matched
    ///   after normalization;
    /// - only the text's first segment gets the dummy prefix ([`Prefix::Spm`],
    ///   [`Prefix::First`]), or none does: a part that starts after a special token
    ///   and one cut inside a segment then both go without it, as in the whole.
    pub fn cuts_words(&self) -> bool {
        let mark = self.space;
        let plain = !self.has_charsmap
            && !self.remove_extra_whitespaces
            && !self.normalizer.treat_whitespace_as_suffix();
        let joins = !(self.split || self.chars.mark_after_marks_only);
        let mark_known = self.chars.get(mark).id != NO_ID || self.byte_ids.is_some();
        let prefix_first =
            !self.add_dummy_prefix || matches!(self.prefix, Prefix::Spm | Prefix::First);
        mark == '\u{2581}'
            && plain
            && !joins
            && !self.user_defined_spaces
            && mark_known
            && !self.has_unused
            && self.normalized_tokens.is_empty()
            && prefix_first
    }

    /// Appends the ids of `text`, the `specials` found in it as special tokens
    /// (see the module header); `starts`: `text` starts its text (else it is a later
    /// part of one, and its first segment gets no dummy prefix).
    fn encode_text(
        &self,
        text: &str,
        starts: bool,
        specials: &SpecialMatcher,
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) {
        // Tokens Hugging Face matches only after its normalizer ran (see
        // `normalized_tokens`): those the call allows, found per segment.
        let after: Vec<&str> = if self.normalized_tokens.is_empty() {
            Vec::new()
        } else {
            let allowed = specials.tokens();
            let tokens = self.normalized_tokens.iter();
            tokens
                .filter(|t| allowed.contains(t))
                .map(String::as_str)
                .collect()
        };
        let mut at = 0;
        for (start, end, index) in specials.find_all(text.as_bytes()) {
            let token = &specials.tokens()[index];
            if !after.is_empty() && self.normalized_tokens.contains(token) {
                continue; // text here; matched (or not) in its segment
            }
            if start > at {
                self.encode_between(&text[at..start], starts && at == 0, &after, cache, out);
            }
            out.push(self.piece_to_id(token));
            at = end;
        }
        if at < text.len() {
            self.encode_between(&text[at..], starts && at == 0, &after, cache, out);
        }
    }
}

impl SpmModel {
    /// Appends the ids of `segment`, text between two special tokens (at the start
    /// of the text when `first`), with the dummy prefix where [`Prefix`] puts it.
    ///
    /// `after`: tokens matched as Hugging Face matches a `normalized` added token
    /// under the legacy `Prepend("▁")` + `Replace(" ", "▁")` normalizer
    /// ([`Prefix::Each`]): in the normalized segment, spelled as normalized — "▁"
    /// and the token — so only at the segment's start (taking its "▁") or after a
    /// space or "▁" (taking it): `"a <s>b"` is `▁a <s> b`, `"a<s>"` is text.
    fn encode_between(
        &self,
        segment: &str,
        first: bool,
        after: &[&str],
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) {
        if after.is_empty() {
            let dummy = self.prefix.applies(segment, first);
            return self.encode_segment(segment, dummy, cache, out);
        }
        let mut from = 0; // the text not encoded yet starts here
        let mut at = 0; // where a token may start: 0, or after a space or "▁"
        while at <= segment.len() {
            let rest = &segment[at..];
            let found = after
                .iter()
                .filter(|t| rest.starts_with(**t))
                .max_by_key(|t| t.len());
            if let Some(token) = found {
                // The "▁" the token takes: the prefix (at 0) or the space before it.
                let taken = if at == 0 {
                    0
                } else {
                    at - char_before(segment, at).len_utf8()
                };
                if from == 0 && at > 0 {
                    // The prefixed text before; "▁" alone when there is none.
                    match &segment[..taken] {
                        "" => self.encode_segment(" ", false, cache, out),
                        text => self.encode_segment(text, true, cache, out),
                    }
                } else if taken > from {
                    self.encode_segment(&segment[from..taken], false, cache, out);
                }
                out.push(self.piece_to_id(token));
                from = at + token.len();
                at = from;
                if from == segment.len() {
                    return;
                }
            }
            // On to the next place after a space or "▁" (tokens hold neither).
            match segment[at..].find([' ', '\u{2581}']) {
                Some(i) => {
                    let c = segment[at + i..].chars().next().expect("found");
                    at += i + c.len_utf8();
                }
                None => break,
            }
        }
        match from {
            0 => self.encode_segment(segment, true, cache, out),
            _ => self.encode_segment(&segment[from..], false, cache, out),
        }
    }
}

/// The character of `text` that ends at byte `at`.
fn char_before(text: &str, at: usize) -> char {
    text[..at].chars().next_back().expect("not at the start")
}

impl Model for SpmModel {
    type Cache = WordCache;
    type Lessons = ();

    fn take_cache(&self) -> WordCache {
        self.caches.take()
    }

    fn give_back_cache(&self, cache: WordCache) {
        self.caches.give_back(cache)
    }

    /// At most an id per byte of the normalized text ("▁" is one id for one space). Without normalization rules that is one per byte of
    /// `text` and one for the dummy prefix; rules can lengthen text ("½" -> "1⁄2"),
    /// so then the text is normalized to count.
    fn most_ids(&self, text: &str) -> usize {
        let body = if self.has_charsmap {
            self.normalizer.normalize(text).len()
        } else {
            text.len() + 1
        };
        // A prefix on every segment: one more id per special token (of a byte or more).
        let per_segment = matches!(self.prefix, Prefix::Always | Prefix::Each);
        body * (1 + per_segment as usize)
    }

    fn safe_cuts(&self) -> SafeCuts {
        if self.cuts_words() {
            SafeCuts::AtSpecials {
                text: TextCuts::Words,
            }
        } else {
            SafeCuts::Nowhere
        }
    }

    fn encode_cached(
        &self,
        text: &str,
        specials: &SpecialMatcher,
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) -> Result<(), EncodeError> {
        self.encode_text(text, true, specials, cache, out);
        Ok(())
    }

    fn encode_part_cached(
        &self,
        text: &str,
        starts_text: bool,
        specials: &SpecialMatcher,
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) -> Result<(), EncodeError> {
        self.encode_text(text, starts_text, specials, cache, out);
        Ok(())
    }

    /// Up to the last safe cut before `limit` (see the module header); nothing is
    /// final before the text ends for a model that does not cut words.
    fn encode_until(
        &self,
        text: &str,
        starts_text: bool,
        specials: &SpecialMatcher,
        limit: usize,
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) -> Result<usize, EncodeError> {
        let SafeCuts::AtSpecials { text: cuts } = self.safe_cuts() else {
            return Ok(0);
        };
        let Some(cut) = last_cut(text.as_bytes(), limit, cuts, specials) else {
            return Ok(0);
        };
        self.encode_text(&text[..cut], starts_text, specials, cache, out);
        Ok(cut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Frame;
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
    fn each_prefix_scheme_puts_the_dummy_prefix_where_tokenizers_does() {
        let [space, a, b] = [0, 1, 2].map(|i| small().piece_to_id(["\u{2581}", "a", "b"][i]));
        let bos = small().bos_id.unwrap();
        let specials = matcher(&["<s>"]);
        let cases: [(Prefix, [Vec<u32>; 3]); 4] = [
            // " a", "a<s>b", "<s> b"
            (
                Prefix::Spm,
                [
                    vec![space, space, a],
                    vec![space, a, bos, b],
                    vec![bos, space, b],
                ],
            ),
            (
                Prefix::First,
                [vec![space, a], vec![space, a, bos, b], vec![bos, space, b]],
            ),
            (
                Prefix::Always,
                [
                    vec![space, a],
                    vec![space, a, bos, space, b],
                    vec![bos, space, b],
                ],
            ),
            (
                Prefix::Each,
                [
                    vec![space, space, a],
                    vec![space, a, bos, space, b],
                    vec![bos, space, space, b],
                ],
            ),
        ];
        for (prefix, want) in cases {
            let m = small().with_metaspace(prefix, false).unwrap();
            let got = [" a", "a<s>b", "<s> b"].map(|t| encode(&m, t, &specials));
            assert_eq!(got, want, "{prefix:?}");
        }
    }

    #[test]
    fn split_starts_a_word_at_every_mark_so_no_merge_crosses_it() {
        let pieces = [
            ("\u{2581}", 0.0, Normal),
            ("a", -1.0, Normal),
            ("\u{2581}\u{2581}", 5.0, Normal),
        ];
        let m = model(&pieces, true);
        let (space, a, two) = (
            m.piece_to_id("\u{2581}"),
            m.piece_to_id("a"),
            m.piece_to_id("\u{2581}\u{2581}"),
        );
        assert_eq!(encode(&m, " a", &matcher(&[])), vec![two, a]);
        let m = m.with_metaspace(Prefix::Spm, true).unwrap();
        assert_eq!(encode(&m, " a", &matcher(&[])), vec![space, space, a]);
    }

    #[test]
    fn a_normalized_token_is_matched_only_where_it_takes_a_prefix_or_a_space() {
        let m = small().with_metaspace(Prefix::Each, false).unwrap();
        let m = m.with_normalized_tokens(vec!["<s>".into()]).unwrap();
        let [space, a, bos] = ["\u{2581}", "a", "<s>"].map(|p| m.piece_to_id(p));
        let specials = matcher(&["<s>"]);
        assert_eq!(encode(&m, "<s>a", &specials), vec![bos, a]);
        assert_eq!(encode(&m, " <s>", &specials), vec![space, bos]);
        assert_eq!(encode(&m, "a <s>a", &specials), vec![space, a, bos, a]);
        // Not after a space: text, "<" ">" as bytes and "s" unknown.
        assert!(!encode(&m, "a<s>", &specials).contains(&bos));
        let refused = small().with_normalized_tokens(vec!["<s>".into()]);
        assert!(refused.is_err(), "only with the Prepend normalizer");
    }

    #[test]
    fn the_frame_of_add_bos_and_add_eos_is_what_sentencepiece_puts_around_a_text() {
        let m = small();
        let plain = m.encode("a b", false, false).unwrap();
        let framed = m.encode("a b", true, true).unwrap();
        let frame = m.frame(true, true).unwrap();
        assert_eq!(
            framed,
            [&frame.before[..], &plain, &frame.after[..]].concat()
        );
        assert_eq!(m.frame(false, false).unwrap(), Frame::default());
    }

    #[test]
    fn a_text_cut_at_word_cuts_encodes_as_the_whole() {
        let pieces = [
            ("\u{2581}", 0.0, Normal),
            ("a", -1.0, Normal),
            ("b", -2.0, Normal),
            ("\u{2581}\u{2581}", -3.0, Normal),
            ("\u{2581}a", -4.0, Normal),
            ("ab", -5.0, Normal),
        ];
        let m = model(&pieces, true);
        assert!(m.cuts_words());
        assert_eq!(
            m.safe_cuts(),
            SafeCuts::AtSpecials {
                text: TextCuts::Words
            }
        );
        let specials = matcher(&["<s>"]);
        for text in ["ab a  b\u{2581} ab<s> a", " a b", "a\tb a", "ba<s> ab  ab"] {
            let whole = encode(&m, text, &specials);
            let buf = text.as_bytes();
            let cuts = (0..buf.len()).filter(|&c| TextCuts::Words.at(buf, c));
            for c in cuts.chain(text.find("<s>").map(|s| s + 3)) {
                let mut parts = Vec::new();
                m.with_cache(|cache| {
                    m.encode_part_cached(&text[..c], true, &specials, cache, &mut parts)?;
                    m.encode_part_cached(&text[c..], false, &specials, cache, &mut parts)
                })
                .unwrap();
                assert_eq!(parts, whole, "{text:?} cut at {c}");
            }
        }
    }

    #[test]
    fn a_piece_joining_a_word_to_the_mark_after_it_keeps_texts_whole() {
        let joining = [
            ("a", -1.0, Normal),
            ("a\u{2581}", -2.0, Normal),
            ("\u{2581}", 0.0, Normal),
        ];
        let m = model(&joining, true);
        assert!(!m.cuts_words());
        assert_eq!(m.safe_cuts(), SafeCuts::Nowhere);
        // The legacy Prepend normalizer puts the prefix on every segment: whole too.
        let each = small().with_metaspace(Prefix::Each, false).unwrap();
        assert!(!each.cuts_words());
        assert!(small()
            .with_metaspace(Prefix::First, false)
            .unwrap()
            .cuts_words());
    }

    #[test]
    fn a_stream_of_a_model_that_cuts_words_is_encoded_as_it_comes() {
        let m = small();
        let none = matcher(&[]);
        let text = "ab ba  a b ".repeat(20);
        let whole = encode(&m, &text, &none);
        let mut ids = Vec::new();
        let used = m
            .with_cache(|c| m.encode_until(&text, true, &none, text.len() - 8, c, &mut ids))
            .unwrap();
        assert!(used > text.len() / 2 && used <= text.len() - 8);
        m.with_cache(|c| m.encode_part_cached(&text[used..], false, &none, c, &mut ids))
            .unwrap();
        assert_eq!(ids, whole);
        // A model that does not cut words holds its text until the end.
        let joining = model(&[("a", -1.0, Normal), ("a\u{2581}", -2.0, Normal)], true);
        let held = joining.with_cache(|c| {
            joining.encode_until(&text, true, &none, text.len() - 8, c, &mut Vec::new())
        });
        assert_eq!(held, Ok(0));
    }
}
