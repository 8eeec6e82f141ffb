//! Pre-tokenization: splitting text into the pieces BPE works inside.
//!
//! Two steps, in this order:
//! 1. special tokens are hard boundaries: the text is cut around them
//!    ([`specials`]: [`SpecialMatcher`], [`for_each_unit`]);
//! 2. each ordinary segment is split by the tokenizer's pattern ([`PreTokenizer`]):
//!    the built-in GPT patterns and the open models' variants of them (Llama 3,
//!    Qwen2, Qwen3.5, Tekken: [`patterns`]) by hand-written splitters ([`builtin`]), any other
//!    pattern by the regex engine, or kept whole when there is
//!    no pattern (minbpe's BasicTokenizer); then, for a Hugging Face file whose
//!    pre-tokenizer is a `Sequence` of Splits (DeepSeek V3), each piece is split again
//!    by the later steps, in order ([`split`]).

mod blocks;
pub mod builtin;
pub mod patterns;
pub mod specials;
pub mod split;

pub use patterns::{
    BACKTRACK_LIMIT_VAR, BUILTIN_PATTERNS, CL100K_PATTERN, GPT2_PATTERN, LLAMA3_PATTERN,
    O200K_PATTERN, QWEN2_PATTERN, QWEN3_5_PATTERN, TEKKEN_PATTERN,
};
pub use specials::{for_each_unit, SpecialMatcher, TokenFlags, Unit};

pub use blocks::Simd;
pub use builtin::{Builtin, WINDOW_STARTS};
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
    /// Pre-tokenizing may start over inside text the pattern (or a step) did not match:
    /// false when one of them looks behind ([`split::looks_behind`]).
    restarts_inside: bool,
}

impl PreTokenizer {
    /// `None` means "no pre-tokenization": every segment is a single piece. The
    /// built-in patterns ([`BUILTIN_PATTERNS`]) run on hand-written code
    /// (`builtin.rs`), others on the regex engine.
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
            restarts_inside: true,
        })
    }

    /// The same pre-tokenizer, splitting each piece further by `steps`, in order.
    pub fn with_steps(mut self, steps: Vec<Split>) -> Self {
        let patterns = self.pattern.iter().map(String::as_str);
        let mut patterns = patterns.chain(steps.iter().map(Split::pattern));
        self.restarts_inside = !patterns.any(split::looks_behind);
        self.steps = steps;
        self
    }

    /// The hand-written splitter, when it alone makes the pieces (a built-in pattern
    /// and no later steps): callers may then walk the pieces in batches.
    pub fn builtin_alone(&self) -> Option<Builtin> {
        self.builtin.filter(|_| self.steps.is_empty())
    }

    /// True when a hand-written splitter runs the pattern (it matches all text).
    pub fn is_builtin(&self) -> bool {
        self.builtin.is_some()
    }

    pub fn steps(&self) -> &[Split] {
        &self.steps
    }

    /// Calls `f(end)` at offsets of `text` where pre-tokenizing may start over and find
    /// the pieces after it that pre-tokenizing the whole finds (streaming's cuts when
    /// there are later steps): the end of every piece of the pattern and, inside text
    /// the pattern did not match, the ends of the pieces of the next step there, and so
    /// on down the steps. A regex search started inside text it did not match finds
    /// the same next match (unless a pattern looks behind: then only the ends of the
    /// pattern's pieces count); one started inside a match may not, so inside a match
    /// only its end counts. (The built-in patterns match all text.)
    pub fn for_each_restart(&self, text: &str, mut f: impl FnMut(usize)) -> Result<(), String> {
        if text.is_empty() {
            return Ok(());
        }
        // A stretch and the last piece inside it end at the same place: once is enough.
        let mut last = 0;
        let mut f = |e: usize| {
            if e > last {
                last = e;
                f(e);
            }
        };
        let mut failed = Ok(());
        let mut part = |s: usize, e: usize, matched: bool| {
            if !matched && self.restarts_inside && failed.is_ok() {
                failed = self.restarts_within(0, text, s, e, &mut f);
            }
            f(e);
        };
        match (self.builtin, &self.regex) {
            (Some(b), _) => b.for_each_piece(text, |s, e| part(s, e, true)),
            (None, Some(re)) => re.for_each_match(text, &mut part)?,
            (None, None) => part(0, text.len(), false),
        }
        failed
    }

    /// [`PreTokenizer::for_each_restart`] inside `text[start..end]`, text the steps
    /// before `step` did not match.
    fn restarts_within(
        &self,
        step: usize,
        text: &str,
        start: usize,
        end: usize,
        f: &mut dyn FnMut(usize),
    ) -> Result<(), String> {
        let Some(split) = self.steps.get(step) else {
            return Ok(());
        };
        let mut failed = Ok(());
        split.for_each_part(&text[start..end], |s, e, matched| {
            if !matched && failed.is_ok() {
                failed = self.restarts_within(step + 1, text, start + s, start + e, f);
            }
            f(start + e);
        })?;
        failed
    }

    /// Always the regex engine (the reference for the hand-written splitters).
    pub fn regex_only(pattern: Option<&str>) -> Result<Self, String> {
        Ok(Self {
            regex: pattern.map(RegexSplitter::new).transpose()?,
            builtin: None,
            pattern: pattern.map(str::to_owned),
            steps: Vec::new(),
            restarts_inside: true,
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

    /// DeepSeek V3's pre-tokenizer: the pattern, then two Splits.
    fn deepseek_v3() -> PreTokenizer {
        let steps = [
            "[一-龥\u{3040}-ゟ゠-ヿ]+",
            concat!(
                r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"##,
                r"|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+",
                r"|\s+(?!\S)|\s+"
            ),
        ];
        let steps = steps
            .iter()
            .map(|p| Split::new(p, split::Behavior::Isolated, false).unwrap())
            .collect();
        PreTokenizer::new(Some(r"\p{N}{1,3}"))
            .unwrap()
            .with_steps(steps)
    }

    fn spans(pre: &PreTokenizer, text: &str) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        pre.for_each_piece(text, |s, e| out.push((s, e))).unwrap();
        out
    }

    #[test]
    fn later_steps_split_each_piece_of_the_pattern_again() {
        let pre = deepseek_v3();
        let text = "12345中文ab, x";
        let got: Vec<&str> = spans(&pre, text)
            .iter()
            .map(|&(s, e)| &text[s..e])
            .collect();
        assert_eq!(got, ["123", "45", "中文", "ab", ",", " x"]);
    }

    #[test]
    fn starting_over_at_a_restart_finds_the_same_pieces_after_it() {
        let pre = deepseek_v3();
        let alphabet = [
            "a", "Z", "é", "\u{301}", "1", "23", "٣", " ", "  ", "\n", "\r\n", ",", "--", "(x",
            "中", "文", "ひ", "カ", "한", "€", "'s", "\t",
        ];
        let mut rng = crate::bpe::model::testing::XorShift(5);
        for _ in 0..300 {
            let n = rng.below(30);
            let text: String = (0..n)
                .map(|_| alphabet[rng.below(alphabet.len())])
                .collect();
            let whole = spans(&pre, &text);
            let mut restarts = Vec::new();
            pre.for_each_restart(&text, |e| restarts.push(e)).unwrap();
            assert!(restarts.windows(2).all(|w| w[0] < w[1]), "{text:?}");
            for &c in &restarts {
                assert!(whole.iter().any(|&(_, e)| e == c), "{text:?} at {c}");
                let after: Vec<_> = spans(&pre, &text[c..])
                    .iter()
                    .map(|&(s, e)| (s + c, e + c))
                    .collect();
                let want: Vec<_> = whole.iter().copied().filter(|&(s, _)| s >= c).collect();
                assert_eq!(after, want, "{text:?} started over at {c}");
            }
        }
        // Inside a run of digits (a match of the pattern) only its end is a restart:
        // "1234" from its second digit would split "234" instead of "123" + "4".
        let mut restarts = Vec::new();
        pre.for_each_restart("1234 ab, cd", |e| restarts.push(e))
            .unwrap();
        assert_eq!(restarts, [3, 4, 7, 8, 11]);
        // A step that looks behind: only the ends of the pattern's pieces.
        let behind = Split::new(r"(?<=a)b", split::Behavior::Isolated, false).unwrap();
        let pre = PreTokenizer::new(Some(r"\p{N}{1,3}"))
            .unwrap()
            .with_steps(vec![behind]);
        let mut restarts = Vec::new();
        pre.for_each_restart("1234 ab, cd", |e| restarts.push(e))
            .unwrap();
        assert_eq!(restarts, [3, 4, 11]);
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
