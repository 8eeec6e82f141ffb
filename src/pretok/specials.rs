//! Special tokens: finding them in text, and cutting text into units around them.
//!
//! Special tokens are hard boundaries: the text is cut around them ([`SpecialMatcher`],
//! leftmost-longest, so `<|a|><|b|>` registered as one special beats `<|a|>` followed
//! by `<|b|>`), and each ordinary segment between them is split by the pre-tokenizer
//! ([`for_each_unit`]).

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

use super::PreTokenizer;

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

    /// `(start, end, index into tokens())` of the leftmost(-longest) special token.
    pub fn find_first(&self, text: &[u8]) -> Option<(usize, usize, usize)> {
        let m = self.ac.as_ref()?.find(text)?;
        Some((m.start(), m.end(), m.pattern().as_usize()))
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
    use crate::pretok::GPT2_PATTERN;
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
