//! Hugging Face's `Split` pre-tokenizer, for the steps a `tokenizer.json` runs after the
//! pattern (DeepSeek V3: three Splits in a `Sequence`; `Digits`, `Punctuation` and
//! `WhitespaceSplit` are Splits on a one-character class, mapped to one in Python).
//!
//! Each piece the step before made is split again, on its own: `tokenizers`'
//! `PreTokenizedString::split`. A regex divides a piece into matches and the text
//! between them (`Pattern::find_matches`), `invert` swaps which is which, and the
//! behavior (`SplitDelimiterBehavior`) says what becomes of the matches:
//! - `Isolated`: every match and every gap is a piece (the common case, and the fast
//!   one: no list of matches is made);
//! - `Removed`: the matches are dropped, the gaps kept;
//! - `MergedWithPrevious` / `MergedWithNext`: a match joins the piece before / after it;
//! - `Contiguous`: consecutive matches make one piece (so do consecutive gaps).
//!
//! An empty match is a match like any other (it splits the text around it); empty
//! pieces are dropped at the end, as `tokenizers` drops empty splits.

use super::patterns::RegexSplitter;
use super::PreTokenizer;

/// What becomes of the text a Split's regex matches (`SplitDelimiterBehavior`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behavior {
    Isolated,
    Removed,
    MergedWithPrevious,
    MergedWithNext,
    Contiguous,
}

impl Behavior {
    /// The behavior of its `tokenizer.json` name (`"Isolated"`, ...).
    pub fn from_name(name: &str) -> Result<Self, String> {
        Ok(match name {
            "Isolated" => Behavior::Isolated,
            "Removed" => Behavior::Removed,
            "MergedWithPrevious" => Behavior::MergedWithPrevious,
            "MergedWithNext" => Behavior::MergedWithNext,
            "Contiguous" => Behavior::Contiguous,
            _ => {
                return Err(format!(
                    "unknown Split behavior {name:?}; expected Isolated, Removed, \
                     MergedWithPrevious, MergedWithNext or Contiguous"
                ))
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Behavior::Isolated => "Isolated",
            Behavior::Removed => "Removed",
            Behavior::MergedWithPrevious => "MergedWithPrevious",
            Behavior::MergedWithNext => "MergedWithNext",
            Behavior::Contiguous => "Contiguous",
        }
    }
}

/// True when what `pattern` matches at a place may depend on the text before it (a
/// lookbehind, `\b`, `\B`, `^`, `\A`, `\G`): pre-tokenizing that starts over there
/// could then find other pieces. Conservative: a `^` outside a class is taken as an
/// anchor whatever the flags.
pub fn looks_behind(pattern: &str) -> bool {
    let b = pattern.as_bytes();
    let mut i = 0;
    let mut in_class = false;
    while i < b.len() {
        match b[i] {
            b'\\' => {
                if !in_class && matches!(b.get(i + 1), Some(b'b' | b'B' | b'A' | b'G')) {
                    return true;
                }
                i += 2;
                continue;
            }
            b'[' if !in_class => {
                in_class = true;
                i += 1;
                // A leading `^` negates, a leading `]` is literal.
                if b.get(i) == Some(&b'^') {
                    i += 1;
                }
                if b.get(i) == Some(&b']') {
                    i += 1;
                }
                continue;
            }
            b']' if in_class => in_class = false,
            b'^' if !in_class => return true,
            b'(' if !in_class && (b[i..].starts_with(b"(?<=") || b[i..].starts_with(b"(?<!")) => {
                return true
            }
            _ => {}
        }
        i += 1;
    }
    false
}

/// One Split step: a regex, a behavior and `invert`.
#[derive(Debug, Clone)]
pub struct Split {
    /// Isolated: the pattern's pieces as they are (a built-in pattern by its
    /// hand-written splitter).
    isolated: PreTokenizer,
    regex: RegexSplitter,
    pattern: String,
    behavior: Behavior,
    invert: bool,
}

impl Split {
    pub fn new(pattern: &str, behavior: Behavior, invert: bool) -> Result<Self, String> {
        Ok(Self {
            isolated: PreTokenizer::new(Some(pattern))?,
            regex: RegexSplitter::new(pattern)?,
            pattern: pattern.to_owned(),
            behavior,
            invert,
        })
    }

    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    pub fn behavior(&self) -> Behavior {
        self.behavior
    }

    pub fn invert(&self) -> bool {
        self.invert
    }

    /// Calls `f(start, end, matched)` for every piece of `text` this step keeps, in
    /// order, saying whether a regex search started inside it could find other matches
    /// than the search from its start did (`matched`; false only for text the regex did
    /// not match: the gaps of `Isolated`, the pieces `Removed` keeps).
    pub fn for_each_part(
        &self,
        text: &str,
        mut f: impl FnMut(usize, usize, bool),
    ) -> Result<(), String> {
        match self.behavior {
            Behavior::Isolated if self.isolated.is_builtin() => {
                self.isolated.for_each_piece(text, |s, e| f(s, e, true))
            }
            Behavior::Isolated => self.regex.for_each_match(text, |s, e, matched| {
                if e > s {
                    f(s, e, matched)
                }
            }),
            Behavior::Removed => self.for_each_piece(text, |s, e| f(s, e, self.invert)),
            _ => self.for_each_piece(text, |s, e| f(s, e, true)),
        }
    }

    /// Calls `f(start, end)` for every piece of `text` this step keeps, in order.
    pub fn for_each_piece(
        &self,
        text: &str,
        mut f: impl FnMut(usize, usize),
    ) -> Result<(), String> {
        if self.behavior == Behavior::Isolated {
            // Matches and gaps alike are pieces, whichever `invert` calls matches.
            return self.isolated.for_each_piece(text, f);
        }
        let mut parts: Vec<(usize, usize, bool)> = Vec::new();
        self.regex.for_each_match(text, |s, e, matched| {
            parts.push((s, e, matched != self.invert))
        })?;
        let mut pieces: Vec<(usize, usize)> = Vec::with_capacity(parts.len());
        match self.behavior {
            Behavior::Isolated => unreachable!("handled above"),
            Behavior::Removed => {
                pieces.extend(parts.iter().filter(|p| !p.2).map(|&(s, e, _)| (s, e)))
            }
            Behavior::Contiguous => {
                let mut previous = None;
                for &(s, e, matched) in &parts {
                    match pieces.last_mut() {
                        Some(last) if previous == Some(matched) => last.1 = e,
                        _ => pieces.push((s, e)),
                    }
                    previous = Some(matched);
                }
            }
            Behavior::MergedWithPrevious => {
                let mut previous = false;
                for &(s, e, matched) in &parts {
                    match pieces.last_mut() {
                        Some(last) if matched && !previous => last.1 = e,
                        _ => pieces.push((s, e)),
                    }
                    previous = matched;
                }
            }
            Behavior::MergedWithNext => {
                let mut previous = false;
                for &(s, e, matched) in parts.iter().rev() {
                    match pieces.last_mut() {
                        Some(last) if matched && !previous => last.0 = s,
                        _ => pieces.push((s, e)),
                    }
                    previous = matched;
                }
                pieces.reverse();
            }
        }
        for (s, e) in pieces {
            if e > s {
                f(s, e);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(pattern: &str, behavior: &str, invert: bool, text: &str) -> Vec<String> {
        let split = Split::new(pattern, Behavior::from_name(behavior).unwrap(), invert).unwrap();
        let mut out = Vec::new();
        split
            .for_each_piece(text, |s, e| out.push(text[s..e].to_string()))
            .unwrap();
        out
    }

    #[test]
    fn each_behavior_splits_as_tokenizers_documents_it() {
        // tokenizers' own examples (SplitDelimiterBehavior), on "the-final--countdown".
        let text = "the-final--countdown";
        assert_eq!(
            pieces("-", "Isolated", false, text),
            ["the", "-", "final", "-", "-", "countdown"]
        );
        assert_eq!(
            pieces("-", "Removed", false, text),
            ["the", "final", "countdown"]
        );
        assert_eq!(
            pieces("-", "MergedWithPrevious", false, text),
            ["the-", "final-", "-", "countdown"]
        );
        assert_eq!(
            pieces("-", "MergedWithNext", false, text),
            ["the", "-final", "-", "-countdown"]
        );
        assert_eq!(
            pieces("-", "Contiguous", false, text),
            ["the", "-", "final", "--", "countdown"]
        );
    }

    #[test]
    fn invert_swaps_matches_and_gaps() {
        assert_eq!(pieces(r"\w+", "Removed", true, "ab, cd"), ["ab", "cd"]);
        assert_eq!(
            pieces(r"\s", "MergedWithPrevious", true, "a bc d"),
            ["a", " bc", " d"]
        );
        assert_eq!(pieces("x", "Isolated", true, "axb"), ["a", "x", "b"]);
    }

    #[test]
    fn an_empty_match_splits_the_text_around_it() {
        assert_eq!(
            pieces(r"\b", "Isolated", false, "ab, cd"),
            ["ab", ", ", "cd"]
        );
        // "x*" matches "xx" and the empty string before every other character.
        assert_eq!(
            pieces("x*", "MergedWithPrevious", false, "axxb"),
            ["axx", "b"]
        );
        assert_eq!(pieces("(?=a)", "Removed", false, "bab"), ["b", "ab"]);
    }

    #[test]
    fn patterns_that_look_behind_are_told_apart() {
        for p in [
            r"(?<=a)b",
            r"(?<!a)b",
            r"\bx",
            r"x\B",
            "^a",
            r"\Ax",
            r"a|(?m:^b)",
        ] {
            assert!(looks_behind(p), "{p}");
        }
        for p in [
            r"[^\r\n\p{L}]?\p{L}+",
            r"\\b",
            r"[\b]",
            r"[]^]",
            r"\s+(?!\S)",
            r"\p{N}{1,3}",
        ] {
            assert!(!looks_behind(p), "{p}");
        }
    }

    #[test]
    fn an_unknown_behavior_is_named() {
        assert_eq!(
            Behavior::from_name("Merged").unwrap_err(),
            "unknown Split behavior \"Merged\"; expected Isolated, Removed, \
             MergedWithPrevious, MergedWithNext or Contiguous"
        );
    }
}
