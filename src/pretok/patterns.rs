//! The built-in pre-tokenization patterns, and the regex engine that runs any pattern.
//!
//! The GPT-2 / cl100k / o200k regexes are written here as tiktoken writes them; the
//! hand-written splitters (`builtin.rs`) recognise them by these constants, and this
//! file's [`RegexSplitter`] (fancy-regex) runs custom patterns and is the reference the
//! hand-written splitters are checked against.

use fancy_regex::{Error, Regex, RegexBuilder, RuntimeError};

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
/// Llama 3's pattern (`pat_str` of Meta's `llama_models/llama3/tokenizer.py`, and the
/// Split of its `tokenizer.json`): cl100k's as first published, without possessive
/// quantifiers and without `\s++$`. It splits every text as cl100k does but for a
/// run of whitespace at the very end holding a newline: cut after its last \r or \n.
pub const LLAMA3_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's pattern (`PRETOKENIZE_REGEX` of transformers' `tokenization_qwen2.py`; also
/// Qwen2.5 and Qwen3): Llama 3's with one digit a piece.
pub const QWEN2_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen3.5's pattern (`PRETOKENIZE_REGEX` of transformers' `tokenization_qwen3_5.py`):
/// Qwen2's with marks (`\p{M}`) in words and out of the others.
pub const QWEN3_5_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Mistral's Tekken pattern (`config.pattern` of the `tekken_*.json` files in
/// mistral-common): o200k's without the contractions, one digit a piece.
pub const TEKKEN_PATTERN: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*",
    r"|\p{N}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"|\s*[\r\n]+",
    r"|\s+(?!\S)",
    r"|\s+",
);
/// Every pattern a hand-written splitter runs (`builtin.rs`): the GPT patterns and the
/// open models' variants of them.
pub const BUILTIN_PATTERNS: [&str; 7] = [
    GPT2_PATTERN,
    CL100K_PATTERN,
    O200K_PATTERN,
    LLAMA3_PATTERN,
    QWEN2_PATTERN,
    QWEN3_5_PATTERN,
    TEKKEN_PATTERN,
];

/// How much backtracking one search of a custom pattern may do (fancy-regex's own
/// default, counted per search for the next piece): a pattern such as
/// `(?:a|aa)+(?=b)` backtracks exponentially, and without a budget one line of text
/// hung the process for good. The built-in patterns run on hand-written splitters;
/// run by the regex engine they stay far below it on any input.
pub const DEFAULT_BACKTRACK_LIMIT: usize = 1_000_000;

/// The environment variable that sets the budget (a positive integer), read when a
/// pattern is compiled.
pub const BACKTRACK_LIMIT_VAR: &str = "BYTEPAIR_BACKTRACK_LIMIT";

/// The budget: [`BACKTRACK_LIMIT_VAR`] when set, else [`DEFAULT_BACKTRACK_LIMIT`].
pub fn backtrack_limit() -> Result<usize, String> {
    match std::env::var(BACKTRACK_LIMIT_VAR) {
        Err(_) => Ok(DEFAULT_BACKTRACK_LIMIT),
        Ok(value) => value
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| {
                format!("{BACKTRACK_LIMIT_VAR} must be a positive integer, not {value:?}")
            }),
    }
}

/// A pattern compiled by the regex engine, with its backtracking budget.
#[derive(Debug, Clone)]
pub struct RegexSplitter {
    regex: Regex,
    limit: usize,
}

/// A pattern quoted for a message: its first 200 characters (a damaged file can hold a
/// pattern of megabytes), saying how long it is when cut.
fn quoted(pattern: &str) -> String {
    let head: String = pattern.chars().take(200).collect();
    if head.len() == pattern.len() {
        format!("{head:?}")
    } else {
        format!("{head:?}… ({} characters)", pattern.chars().count())
    }
}

impl RegexSplitter {
    /// Compiles `pattern` with the budget of [`backtrack_limit`].
    pub fn new(pattern: &str) -> Result<Self, String> {
        Self::with_limit(pattern, backtrack_limit()?)
    }

    /// Compiles `pattern` with a budget of `limit` backtracking steps per search.
    pub fn with_limit(pattern: &str, limit: usize) -> Result<Self, String> {
        RegexBuilder::new(pattern)
            .backtrack_limit(limit)
            .build()
            .map(|regex| Self { regex, limit })
            .map_err(|e| format!("invalid pre-tokenizer pattern {}: {e}", quoted(pattern)))
    }

    /// The message for a search from byte `offset` that ran out of budget.
    fn too_much_backtracking(&self, offset: usize) -> String {
        let pattern = quoted(self.regex.as_str());
        format!(
            "the pre-tokenizer pattern {pattern} needs more backtracking than the limit \
             of {} steps at byte offset {offset} of the text (between special tokens); \
             simplify the pattern (possessive quantifiers such as ++ or atomic groups \
             (?>...) avoid backtracking) or raise the limit with the environment \
             variable {BACKTRACK_LIMIT_VAR}",
            self.limit
        )
    }

    /// Calls `f(start, end)` for every non-empty match in `text`, in order, and for
    /// the text between matches: a pattern that does not cover the text (a custom
    /// `[a-z]+`, a mistyped name taken as a regex) must never drop it, so what falls
    /// between matches is a piece of its own (Hugging Face's `Split` with `Isolated`
    /// keeps it the same way; an empty match ends the text before it there too:
    /// `\b` splits `"ab cd"` into `"ab"`, `" "`, `"cd"`). The built-in patterns cover
    /// all text and never match the empty string, so for them this is tiktoken's split
    /// exactly.
    pub fn for_each_piece(
        &self,
        text: &str,
        mut f: impl FnMut(usize, usize),
    ) -> Result<(), String> {
        self.for_each_match(text, |s, e, _| {
            if e > s {
                f(s, e)
            }
        })
    }

    /// The matches of the pattern in `text` and the text between them, in order, as
    /// `f(start, end, matched)`: `tokenizers`' `Pattern::find_matches`, empty matches
    /// included (`f(p, p, true)`).
    pub fn for_each_match(
        &self,
        text: &str,
        mut f: impl FnMut(usize, usize, bool),
    ) -> Result<(), String> {
        let mut done = 0;
        for m in self.regex.find_iter(text) {
            let m = m.map_err(|e| match e {
                Error::RuntimeError(RuntimeError::BacktrackLimitExceeded) => {
                    self.too_much_backtracking(done)
                }
                e => format!("pre-tokenizer failed: {e}"),
            })?;
            if m.start() > done {
                f(done, m.start(), false);
            }
            f(m.start(), m.end(), true);
            done = m.end();
        }
        if done < text.len() {
            f(done, text.len(), false);
        }
        Ok(())
    }
}
