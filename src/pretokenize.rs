//! Pre-tokenization: splitting text into the pieces BPE works inside.
//!
//! Two steps, in this order:
//! 1. special tokens are hard boundaries: the text is cut around them
//!    ([`SpecialMatcher`], leftmost-longest, so `<|a|><|b|>` registered as one
//!    special beats `<|a|>` followed by `<|b|>`);
//! 2. each ordinary segment is split by the tokenizer's regex ([`PreTokenizer`]),
//!    or kept whole when there is no pattern (minbpe's BasicTokenizer).

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use fancy_regex::{Regex, RegexBuilder};

use crate::builtin::Builtin;

/// Splits an ordinary (special-free) segment into pre-tokens.
#[derive(Debug, Clone)]
pub struct PreTokenizer {
    regex: Option<Regex>,
    /// The hand-written splitter, when the pattern is a built-in one.
    builtin: Option<Builtin>,
    pattern: Option<String>,
}

impl PreTokenizer {
    /// `None` means "no pre-tokenization": every segment is a single piece. The
    /// built-in GPT patterns run on hand-written code (`builtin.rs`), others on the
    /// regex engine.
    pub fn new(pattern: Option<&str>) -> Result<Self, String> {
        let mut pre = Self::regex_only(pattern)?;
        pre.builtin = pattern.and_then(Builtin::from_pattern);
        Ok(pre)
    }

    /// Always the regex engine (the reference for the hand-written splitters).
    pub fn regex_only(pattern: Option<&str>) -> Result<Self, String> {
        let regex = match pattern {
            None => None,
            Some(p) => Some(
                RegexBuilder::new(p)
                    // The GPT patterns backtrack over whitespace runs; a long run must
                    // not turn into an error (tiktoken's "catastrophic" inputs).
                    .backtrack_limit(usize::MAX)
                    .build()
                    .map_err(|e| format!("invalid pre-tokenizer pattern {p:?}: {e}"))?,
            ),
        };
        Ok(Self {
            regex,
            builtin: None,
            pattern: pattern.map(str::to_owned),
        })
    }

    pub fn pattern(&self) -> Option<&str> {
        self.pattern.as_deref()
    }

    /// Calls `f(start, end)` for every piece of `text`, in order (byte offsets).
    /// Text the pattern does not match is skipped, as in tiktoken and CS336.
    pub fn for_each_piece(
        &self,
        text: &str,
        mut f: impl FnMut(usize, usize),
    ) -> Result<(), String> {
        if text.is_empty() {
            return Ok(());
        }
        if let Some(b) = self.builtin {
            b.for_each_piece(text, f);
            return Ok(());
        }
        match &self.regex {
            None => f(0, text.len()),
            Some(re) => {
                for m in re.find_iter(text) {
                    let m = m.map_err(|e| format!("pre-tokenizer failed: {e}"))?;
                    if m.end() > m.start() {
                        f(m.start(), m.end());
                    }
                }
            }
        }
        Ok(())
    }

    /// True when cutting text after `\n` preceded by ASCII punctuation/letter/digit
    /// and followed by an ASCII letter or digit can never change the pieces. This is
    /// proven (and fuzzed) for the three built-in GPT patterns only; see
    /// `chunking::is_newline_cut`.
    pub fn newline_cuts_are_safe(&self) -> bool {
        matches!(self.pattern.as_deref(), Some(p) if BUILTIN_PATTERNS.contains(&p))
    }
}

/// The GPT-2 / r50k pattern, as tiktoken writes it (equivalent to GPT-2's original
/// `\s+(?!\S)|\s+` ending, but faster).
pub const GPT2_PATTERN: &str =
    r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s";
/// cl100k_base (GPT-4).
pub const CL100K_PATTERN: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";
/// o200k_base (GPT-4o).
pub const O200K_PATTERN: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"|\s*[\r\n]+",
    r"|\s+(?!\S)",
    r"|\s+",
);
pub const BUILTIN_PATTERNS: [&str; 3] = [GPT2_PATTERN, CL100K_PATTERN, O200K_PATTERN];

/// Finds special tokens in text, leftmost-longest.
#[derive(Debug, Clone)]
pub struct SpecialMatcher {
    ac: Option<AhoCorasick>,
    tokens: Vec<String>,
    max_len: usize,
}

impl SpecialMatcher {
    pub fn new(tokens: &[String]) -> Result<Self, String> {
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
        Ok(Self {
            ac,
            tokens,
            max_len,
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

    /// `(start, end, index into tokens())` of every special token, leftmost-longest.
    pub fn find_all(&self, text: &[u8]) -> Vec<(usize, usize, usize)> {
        match &self.ac {
            None => Vec::new(),
            Some(ac) => ac
                .find_iter(text)
                .map(|m| (m.start(), m.end(), m.pattern().as_usize()))
                .collect(),
        }
    }
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

    fn pieces(pattern: &str, text: &str) -> Vec<String> {
        let pre = PreTokenizer::new(Some(pattern)).unwrap();
        let mut out = Vec::new();
        pre.for_each_piece(text, |s, e| out.push(text[s..e].to_string()))
            .unwrap();
        out
    }

    #[test]
    fn gpt2_splits_words_contractions_and_whitespace() {
        assert_eq!(
            pieces(GPT2_PATTERN, "Hello world's  end\n"),
            ["Hello", " world", "'s", " ", " end", "\n"]
        );
    }

    #[test]
    fn cl100k_groups_digits_by_three_and_newlines() {
        assert_eq!(
            pieces(CL100K_PATTERN, "12345\n\nx"),
            ["123", "45", "\n\n", "x"]
        );
    }

    #[test]
    fn o200k_keeps_contraction_with_word() {
        assert_eq!(pieces(O200K_PATTERN, "don't"), ["don't"]);
    }

    #[test]
    fn long_whitespace_run_does_not_hit_backtrack_limit() {
        let text = format!("{}x", " ".repeat(200_000));
        let p = pieces(GPT2_PATTERN, &text);
        assert_eq!(p.len(), 2);
        assert_eq!(p[1], " x");
    }

    #[test]
    fn specials_are_matched_longest_first() {
        let m = SpecialMatcher::new(&["<|a|>".into(), "<|a|><|a|>".into()]).unwrap();
        assert_eq!(
            m.find_all(b"x<|a|><|a|><|a|>"),
            vec![(1, 11, 1), (11, 16, 0)]
        );
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
