//! Pre-tokenization: splitting text into the pieces BPE works inside.
//!
//! Two steps, in this order:
//! 1. special tokens are hard boundaries: the text is cut around them
//!    ([`specials`]: [`SpecialMatcher`], [`for_each_unit`]);
//! 2. each ordinary segment is split by the tokenizer's pattern ([`PreTokenizer`]):
//!    the built-in GPT patterns ([`patterns`]) by hand-written splitters
//!    ([`builtin`]), any other pattern by the regex engine, or kept whole when there is
//!    no pattern (minbpe's BasicTokenizer); then, for a Hugging Face file whose
//!    pre-tokenizer is a `Sequence` of Splits (DeepSeek V3), each piece is split again
//!    by the later steps, in order ([`split`]).

pub mod builtin;
pub mod patterns;
pub mod specials;
pub mod split;

pub use patterns::{
    BACKTRACK_LIMIT_VAR, BUILTIN_PATTERNS, CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN,
};
pub use specials::{for_each_unit, SpecialMatcher, Unit};

use builtin::Builtin;
use patterns::{RegexSplitter, DEFAULT_BACKTRACK_LIMIT};
use split::Split;

/// Splits an ordinary (special-free) segment into pre-tokens.
#[derive(Debug, Clone)]
pub struct PreTokenizer {
    regex: Option<RegexSplitter>,
    /// The hand-written splitter, when the pattern is a built-in one.
    builtin: Option<Builtin>,
    pattern: Option<String>,
    /// Splits applied after the pattern, in order, each to every piece of the one
    /// before (empty for nearly every tokenizer: the fast path is untouched).
    steps: Vec<Split>,
}

impl PreTokenizer {
    /// `None` means "no pre-tokenization": every segment is a single piece. The
    /// built-in GPT patterns run on hand-written code (`builtin.rs`), others on the
    /// regex engine.
    pub fn new(pattern: Option<&str>) -> Result<Self, String> {
        let builtin = pattern.and_then(Builtin::from_pattern);
        let regex = match (pattern, builtin) {
            // Never runs on text (the built-in splitter does): the backtracking budget
            // set in the environment does not apply, and a bad one does not stop it.
            (Some(p), Some(_)) => Some(RegexSplitter::with_limit(p, DEFAULT_BACKTRACK_LIMIT)?),
            (p, _) => p.map(RegexSplitter::new).transpose()?,
        };
        Ok(Self {
            regex,
            builtin,
            pattern: pattern.map(str::to_owned),
            steps: Vec::new(),
        })
    }

    /// The same pre-tokenizer, splitting each piece further by `steps`, in order.
    pub fn with_steps(mut self, steps: Vec<Split>) -> Self {
        self.steps = steps;
        self
    }

    pub fn steps(&self) -> &[Split] {
        &self.steps
    }

    /// The pre-tokenizer of the pattern alone, without the later steps: its pieces are
    /// the ones streaming may cut between (each is split further on its own).
    pub fn pattern_only(&self) -> Self {
        Self {
            steps: Vec::new(),
            ..self.clone()
        }
    }

    /// Always the regex engine (the reference for the hand-written splitters).
    pub fn regex_only(pattern: Option<&str>) -> Result<Self, String> {
        Ok(Self {
            regex: pattern.map(RegexSplitter::new).transpose()?,
            builtin: None,
            pattern: pattern.map(str::to_owned),
            steps: Vec::new(),
        })
    }

    pub fn pattern(&self) -> Option<&str> {
        self.pattern.as_deref()
    }

    /// Calls `f(start, end)` for every piece of `text`, in order (byte offsets).
    /// Text a custom pattern does not match is a piece of its own, never dropped.
    pub fn for_each_piece(
        &self,
        text: &str,
        mut f: impl FnMut(usize, usize),
    ) -> Result<(), String> {
        if self.steps.is_empty() {
            return self.for_each_pattern_piece(text, f);
        }
        let mut failed = Ok(());
        self.for_each_pattern_piece(text, |s, e| {
            if failed.is_ok() {
                failed = self.split_further(0, text, s, e, &mut f);
            }
        })?;
        failed
    }

    /// Splits `text[start..end]` by the steps from `step` on, calling `f` with the
    /// pieces (offsets in `text`).
    fn split_further(
        &self,
        step: usize,
        text: &str,
        start: usize,
        end: usize,
        f: &mut dyn FnMut(usize, usize),
    ) -> Result<(), String> {
        let Some(split) = self.steps.get(step) else {
            f(start, end);
            return Ok(());
        };
        let mut failed = Ok(());
        split.for_each_piece(&text[start..end], |s, e| {
            if failed.is_ok() {
                failed = self.split_further(step + 1, text, start + s, start + e, f);
            }
        })?;
        failed
    }

    /// The pieces of the pattern alone.
    fn for_each_pattern_piece(
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
            None => {
                f(0, text.len());
                Ok(())
            }
            Some(re) => re.for_each_piece(text, f),
        }
    }

    /// True when cutting text at newline cuts and space cuts can never change the
    /// pieces. This is proven (and fuzzed) for the three built-in GPT patterns only;
    /// see `io::chunking`. Later steps do not change it: they split each piece of the
    /// pattern on its own, and a cut between pieces leaves every piece whole.
    pub fn pattern_cuts_are_safe(&self) -> bool {
        matches!(self.pattern.as_deref(), Some(p) if BUILTIN_PATTERNS.contains(&p))
    }
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
    fn text_between_matches_of_a_custom_pattern_is_kept_as_pieces() {
        assert_eq!(
            pieces("[a-z]+", "hello, World 123"),
            ["hello", ", W", "orld", " 123"]
        );
        assert_eq!(
            pieces("gpt4", "hello gpt4 world"),
            ["hello ", "gpt4", " world"]
        );
        assert_eq!(pieces("x", ""), Vec::<String>::new());
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
    fn a_pattern_that_backtracks_without_end_fails_naming_pattern_limit_and_offset() {
        let pattern = r"(?:a|aa)+(?=b)|\s+|\S";
        let pre = PreTokenizer::new(Some(pattern)).unwrap();
        let text = format!("x y {}", "a".repeat(60));
        let e = pre.for_each_piece(&text, |_, _| {}).unwrap_err();
        assert_eq!(
            e,
            format!(
                "the pre-tokenizer pattern {pattern:?} needs more backtracking than the \
                 limit of 1000000 steps at byte offset 4 of the text (between special \
                 tokens); simplify the pattern (possessive quantifiers such as ++ or \
                 atomic groups (?>...) avoid backtracking) or raise the limit with the \
                 environment variable BYTEPAIR_BACKTRACK_LIMIT"
            )
        );
    }

    #[test]
    fn the_builtin_patterns_run_by_the_regex_engine_stay_within_the_limit() {
        // Long runs of each kind of character, and the places where the patterns'
        // whitespace rules look ahead: what backtracks most in them.
        let n = 100_000;
        let runs = [
            " ".repeat(n),
            format!("{}x", " ".repeat(n)),
            format!("{}\n", " ".repeat(n)),
            format!("{}\n\nx", " \t".repeat(n / 2)),
            format!("\n{}", "\r\n ".repeat(n / 3)),
            "a".repeat(n),
            format!(" {}", "é".repeat(n / 2)),
            "Ab".repeat(n / 2),
            "7".repeat(n),
            " 1".repeat(n / 2),
            "!".repeat(n),
            format!(" {}\n\n", "?!".repeat(n / 2)),
            "'s".repeat(n / 2),
            "a\u{301}".repeat(n / 3),
        ];
        for pattern in BUILTIN_PATTERNS {
            let fast = PreTokenizer::new(Some(pattern)).unwrap();
            let regex = PreTokenizer::regex_only(Some(pattern)).unwrap();
            for text in &runs {
                let (mut want, mut got) = (Vec::new(), Vec::new());
                fast.for_each_piece(text, |s, e| want.push((s, e))).unwrap();
                regex
                    .for_each_piece(text, |s, e| got.push((s, e)))
                    .unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(got, want, "{pattern} on {:?}", &text[..20]);
            }
        }
    }
}
