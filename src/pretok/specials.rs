//! Special tokens: finding them in text, and cutting text into units around them.
//!
//! Special tokens are hard boundaries: the text is cut around them ([`SpecialMatcher`],
//! leftmost-longest, so `<|a|><|a|>` registered as one special beats `<|a|>` followed
//! by `<|a|>`), and each ordinary segment between them is split by the pre-tokenizer
//! ([`for_each_unit`]).
//!
//! A Hugging Face file's added tokens may also be matched with [`TokenFlags`] (as
//! `tokenizers`' `AddedVocabulary::find_matches` does, over the same leftmost-longest
//! matches of all the tokens): a `single_word` match with a word character (`\w`)
//! right before or after it is dropped (and the text it covers stays text: no other
//! token is looked for inside it); `lstrip` takes the whitespace (Unicode White_Space)
//! before the token, back to the end of the last match kept; `rstrip` the whitespace
//! after it. The whitespace taken is part of the token's span, so it is not encoded.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use rustc_hash::FxHashMap;

use super::PreTokenizer;

/// How an added token is matched besides its text (a `tokenizer.json` added token's
/// `lstrip`, `rstrip` and `single_word`; see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct TokenFlags {
    pub lstrip: bool,
    pub rstrip: bool,
    pub single_word: bool,
}

impl TokenFlags {
    /// The flags named (`"lstrip"`, `"rstrip"`, `"single_word"`), as Python gives them.
    pub fn from_names(names: &[String]) -> Result<Self, String> {
        let mut flags = TokenFlags::default();
        for name in names {
            match name.as_str() {
                "lstrip" => flags.lstrip = true,
                "rstrip" => flags.rstrip = true,
                "single_word" => flags.single_word = true,
                other => {
                    return Err(format!(
                        "unknown token flag {other:?} (expected lstrip, rstrip or single_word)"
                    ))
                }
            }
        }
        Ok(flags)
    }

    pub fn any(&self) -> bool {
        self.lstrip || self.rstrip || self.single_word
    }
}

/// Finds special tokens in text, leftmost-longest.
#[derive(Debug, Clone)]
pub struct SpecialMatcher {
    ac: Option<AhoCorasick>,
    tokens: Vec<String>,
    max_len: usize,
    /// Each token's flags, by index; empty when no token has one (the common case,
    /// which then costs nothing more).
    flags: Vec<TokenFlags>,
    /// The flags any token has.
    any: TokenFlags,
}

impl SpecialMatcher {
    pub fn new(tokens: &[String]) -> Result<Self, String> {
        Self::with_flags(tokens, &FxHashMap::default())
    }

    /// A matcher of `tokens`, those in `flags` matched with their flags.
    ///
    /// Refused: an `rstrip` token together with a token starting with whitespace,
    /// which the first may take: `tokenizers` then gives both tokens and encodes the
    /// whitespace after the second again (its spans overlap).
    pub fn with_flags(
        tokens: &[String],
        flags: &FxHashMap<String, TokenFlags>,
    ) -> Result<Self, String> {
        let tokens: Vec<String> = tokens.iter().filter(|t| !t.is_empty()).cloned().collect();
        let max_len = tokens.iter().map(String::len).max().unwrap_or(0);
        let ac = if tokens.is_empty() {
            None
        } else {
            Some(
                AhoCorasickBuilder::new()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(&tokens)
                    .map_err(|e| format!("cannot build the special-token matcher: {e}"))?,
            )
        };
        let mut of: Vec<TokenFlags> = tokens
            .iter()
            .map(|t| flags.get(t).copied().unwrap_or_default())
            .collect();
        let any = TokenFlags {
            lstrip: of.iter().any(|f| f.lstrip),
            rstrip: of.iter().any(|f| f.rstrip),
            single_word: of.iter().any(|f| f.single_word),
        };
        if !any.any() {
            of = Vec::new();
        }
        if any.rstrip {
            let starts_spaced = tokens.iter().find(|t| t.starts_with(char::is_whitespace));
            if let Some(spaced) = starts_spaced {
                let rstrip = &tokens[of.iter().position(|f| f.rstrip).expect("one has it")];
                return Err(format!(
                    "added token {spaced:?} starts with whitespace, which the rstrip token \
                     {rstrip:?} takes when it follows it: not supported"
                ));
            }
        }
        Ok(Self {
            ac,
            tokens,
            max_len,
            flags: of,
            any,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.ac.is_none()
    }

    /// Longest special token, in bytes (0 when there are none).
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// The flags any of the tokens has.
    pub fn flags(&self) -> TokenFlags {
        self.any
    }

    /// `(start, end, index into tokens())` of the leftmost(-longest) special token, as
    /// written: flags do not apply (what a call refuses is text that looks like a
    /// special token, wherever it is).
    pub fn find_first(&self, text: &[u8]) -> Option<(usize, usize, usize)> {
        let m = self.ac.as_ref()?.find(text)?;
        Some((m.start(), m.end(), m.pattern().as_usize()))
    }

    /// `(start, end, index into tokens())` of every special token, leftmost-longest,
    /// sorted and not overlapping; with flags, the matches kept and their spans with
    /// the whitespace they take (see the module docs).
    pub fn find_all(&self, text: &[u8]) -> Vec<(usize, usize, usize)> {
        let Some(ac) = &self.ac else {
            return Vec::new();
        };
        let found = ac
            .find_iter(text)
            .map(|m| (m.start(), m.end(), m.pattern().as_usize()));
        if self.flags.is_empty() {
            return found.collect();
        }
        let mut out = Vec::new();
        let mut kept_end = 0; // where the last match kept ends (tokenizers' start_offset)
        for (mut start, mut end, index) in found {
            let flags = self.flags[index];
            if flags.single_word && (word_before(text, start) || word_after(text, end)) {
                continue;
            }
            if flags.lstrip {
                start = whitespace_before(text, start, kept_end);
            }
            if flags.rstrip {
                end = whitespace_after(text, end);
            }
            out.push((start, end, index));
            kept_end = end;
        }
        out
    }

    /// Does cutting `buf` at `c` keep the single_word tokens' matches as the whole
    /// text has them? Not when one of them would straddle the cut, or touch it with a
    /// word character on the other side (a cut hides that character). Always, for a
    /// matcher without single_word tokens. Needs the tokens' length of `buf` each side.
    /// (A cut inside the whitespace a token takes is inside its span from
    /// [`SpecialMatcher::find_all`]: callers do not cut there.)
    pub fn cut_is_safe(&self, buf: &[u8], c: usize) -> bool {
        if !self.any.single_word {
            return true;
        }
        for (token, flags) in self.tokens.iter().zip(&self.flags) {
            if !flags.single_word {
                continue;
            }
            let t = token.as_bytes();
            let lo = c.saturating_sub(t.len());
            let hi = (c + t.len()).min(buf.len());
            if hi - lo < t.len() {
                continue;
            }
            for (i, w) in buf[lo..hi].windows(t.len()).enumerate() {
                if w != t {
                    continue;
                }
                let (p, e) = (lo + i, lo + i + t.len());
                if (p < c && c < e)
                    || (e == c && word_after(buf, c))
                    || (p == c && word_before(buf, c))
                {
                    return false;
                }
            }
        }
        true
    }

    /// Where the whitespace that an lstrip token still to come (after `text`, or
    /// completed by more text) may take starts at the earliest: the start of the
    /// whitespace before any offset in the last token's length of `text`. The end of
    /// `text` when no token has lstrip. Streaming holds back from there.
    pub fn strippable_from(&self, text: &[u8]) -> usize {
        if !self.any.lstrip {
            return text.len();
        }
        let tail = text.len().saturating_sub(self.max_len);
        (tail..=text.len())
            .map(|at| whitespace_before(text, at, 0))
            .min()
            .unwrap_or(text.len())
    }
}

/// The character of `text` ending at byte `at`, if it is a whole UTF-8 character.
fn char_before(text: &[u8], at: usize) -> Option<char> {
    let from = at.saturating_sub(4);
    (from..at)
        .rev()
        .find(|&i| text[i] & 0xC0 != 0x80)
        .and_then(|i| std::str::from_utf8(&text[i..at]).ok())
        .and_then(|s| s.chars().next())
}

/// The character of `text` starting at byte `at`, if it is a whole UTF-8 character.
fn char_after(text: &[u8], at: usize) -> Option<char> {
    let len = match *text.get(at)? {
        b if b < 0x80 => 1,
        b if b >= 0xF0 => 4,
        b if b >= 0xE0 => 3,
        _ => 2,
    };
    let s = std::str::from_utf8(text.get(at..at + len)?).ok()?;
    s.chars().next()
}

/// Is the character before `at` a word character (regex `\w`, as tokenizers checks)?
fn word_before(text: &[u8], at: usize) -> bool {
    char_before(text, at).is_some_and(regex_syntax::is_word_character)
}

/// Is the character at `at` a word character?
fn word_after(text: &[u8], at: usize) -> bool {
    char_after(text, at).is_some_and(regex_syntax::is_word_character)
}

/// Where the whitespace (regex `\s`: Unicode White_Space) that ends at `at` starts,
/// going back no further than `floor`.
fn whitespace_before(text: &[u8], mut at: usize, floor: usize) -> usize {
    while at > floor {
        match char_before(text, at) {
            Some(c) if c.is_whitespace() => at -= c.len_utf8(),
            _ => break,
        }
    }
    at.max(floor)
}

/// Where the whitespace that starts at `at` ends.
fn whitespace_after(text: &[u8], mut at: usize) -> usize {
    while let Some(c) = char_after(text, at).filter(|c| c.is_whitespace()) {
        at += c.len_utf8();
    }
    at
}

/// One unit of pre-tokenized text: an ordinary piece or a special token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Piece {
        start: usize,
        end: usize,
    },
    Special {
        start: usize,
        end: usize,
        index: usize,
    },
}

impl Unit {
    pub fn end(&self) -> usize {
        match *self {
            Unit::Piece { end, .. } | Unit::Special { end, .. } => end,
        }
    }
}

/// Splits `text` on `specials`, then each segment by `pre`, calling `f` for every
/// unit in order.
pub fn for_each_unit(
    text: &str,
    specials: &SpecialMatcher,
    pre: &PreTokenizer,
    mut f: impl FnMut(Unit),
) -> Result<(), String> {
    let mut pos = 0;
    for (start, end, index) in specials.find_all(text.as_bytes()) {
        pre.for_each_piece(&text[pos..start], |s, e| {
            f(Unit::Piece {
                start: pos + s,
                end: pos + e,
            })
        })?;
        f(Unit::Special { start, end, index });
        pos = end;
    }
    pre.for_each_piece(&text[pos..], |s, e| {
        f(Unit::Piece {
            start: pos + s,
            end: pos + e,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pretok::GPT2_PATTERN;
    #[test]
    fn specials_are_matched_longest_first() {
        let m = SpecialMatcher::new(&["<|a|>".into(), "<|a|><|a|>".into()]).unwrap();
        assert_eq!(
            m.find_all(b"x<|a|><|a|><|a|>"),
            vec![(1, 11, 1), (11, 16, 0)]
        );
    }

    fn flagged(tokens: &[(&str, &[&str])]) -> SpecialMatcher {
        let list: Vec<String> = tokens.iter().map(|(t, _)| t.to_string()).collect();
        let flags = tokens
            .iter()
            .map(|(t, names)| {
                let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
                (t.to_string(), TokenFlags::from_names(&names).unwrap())
            })
            .collect();
        SpecialMatcher::with_flags(&list, &flags).unwrap()
    }

    #[test]
    fn lstrip_and_rstrip_spans_take_the_whitespace_around_the_token() {
        let m = flagged(&[("<l>", &["lstrip"]), ("<r>", &["rstrip"])]);
        // "a \t<l>": the span starts at the tab's space; "<r>\u{3000}\n b".
        assert_eq!(m.find_all(b"a \t<l>b"), vec![(1, 6, 0)]);
        assert_eq!(m.find_all("<r>\u{3000}\nb".as_bytes()), vec![(0, 7, 1)]);
        // lstrip goes back no further than the last match kept.
        assert_eq!(m.find_all(b"<r>  <l>"), vec![(0, 5, 1), (5, 8, 0)]);
        assert_eq!(m.find_all(b"<l>  <l>"), vec![(0, 3, 0), (3, 8, 0)]);
    }

    #[test]
    fn single_word_drops_a_match_touching_a_word_character() {
        let m = flagged(&[("ab", &["single_word"]), ("b", &[])]);
        assert_eq!(m.find_all(b"ab ab_ (ab)"), vec![(0, 2, 0), (8, 10, 0)]);
        // The dropped "ab" stays text: "b" inside it is not looked for.
        assert_eq!(m.find_all(b"xab"), vec![]);
        assert_eq!(m.find_all("éab ab1".as_bytes()), vec![]);
    }

    #[test]
    fn flags_do_not_apply_to_refusals() {
        let m = flagged(&[("ab", &["single_word"])]);
        assert_eq!(m.find_first(b"xab"), Some((1, 3, 0)));
    }

    #[test]
    fn a_cut_touching_a_single_word_token_beside_a_word_character_is_unsafe() {
        let m = flagged(&[("ab", &["single_word"])]);
        assert!(!m.cut_is_safe(b"xab y", 1)); // "x" would be hidden from "ab"
        assert!(!m.cut_is_safe(b"x abz", 4)); // so would "z"
        assert!(!m.cut_is_safe(b"x ab y", 3)); // inside it
        assert!(m.cut_is_safe(b"x ab y", 2));
        assert!(m.cut_is_safe(b"x ab y", 4));
        assert!(SpecialMatcher::new(&["ab".into()])
            .unwrap()
            .cut_is_safe(b"xab", 1));
    }

    #[test]
    fn streaming_holds_back_whitespace_an_lstrip_token_may_still_take() {
        let m = flagged(&[("<l>", &["lstrip"])]);
        assert_eq!(m.strippable_from(b"word    <"), 4);
        assert_eq!(m.strippable_from(b"word    "), 4);
        let plain = SpecialMatcher::new(&["<l>".into()]).unwrap();
        assert_eq!(plain.strippable_from(b"word    "), 8);
    }

    #[test]
    fn an_rstrip_token_with_a_token_starting_with_whitespace_is_refused() {
        let tokens = vec!["<r>".to_string(), "\n<x>".to_string()];
        let flags = [(
            "<r>".to_string(),
            TokenFlags {
                rstrip: true,
                ..Default::default()
            },
        )];
        let err = SpecialMatcher::with_flags(&tokens, &flags.into_iter().collect()).unwrap_err();
        assert!(err.contains("\"\\n<x>\" starts with whitespace"), "{err}");
    }

    #[test]
    fn units_interleave_pieces_and_specials() {
        let m = SpecialMatcher::new(&["<|e|>".into()]).unwrap();
        let pre = PreTokenizer::new(Some(GPT2_PATTERN)).unwrap();
        let mut units = Vec::new();
        for_each_unit("a b<|e|>c", &m, &pre, |u| units.push(u)).unwrap();
        assert_eq!(
            units,
            vec![
                Unit::Piece { start: 0, end: 1 },
                Unit::Piece { start: 1, end: 3 },
                Unit::Special {
                    start: 3,
                    end: 8,
                    index: 0
                },
                Unit::Piece { start: 8, end: 9 },
            ]
        );
    }
}
