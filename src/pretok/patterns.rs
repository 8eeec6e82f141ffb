//! The built-in pre-tokenization patterns, and the regex engine that runs any pattern.
//!
//! The GPT-2 / cl100k / o200k regexes are written here as tiktoken writes them; the
//! hand-written splitters (`builtin.rs`) recognise them by these constants, and this
//! file's [`RegexSplitter`] (fancy-regex) runs custom patterns and is the reference the
//! hand-written splitters are checked against.

use fancy_regex::{Regex, RegexBuilder};

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

/// A pattern compiled by the regex engine.
#[derive(Debug, Clone)]
pub struct RegexSplitter(Regex);

impl RegexSplitter {
    pub fn new(pattern: &str) -> Result<Self, String> {
        RegexBuilder::new(pattern)
            // The GPT patterns backtrack over whitespace runs; a long run must not turn
            // into an error (tiktoken's "catastrophic" inputs).
            .backtrack_limit(usize::MAX)
            .build()
            .map(Self)
            .map_err(|e| format!("invalid pre-tokenizer pattern {pattern:?}: {e}"))
    }

    /// Calls `f(start, end)` for every non-empty match in `text`, in order, and for
    /// the text between matches: a pattern that does not cover the text (a custom
    /// `[a-z]+`, a mistyped name taken as a regex) must never drop it, so what falls
    /// between matches is a piece of its own (Hugging Face's `Split` with `Isolated`
    /// keeps it the same way). The built-in patterns cover all text, so for them this
    /// is tiktoken's split exactly.
    pub fn for_each_piece(
        &self,
        text: &str,
        mut f: impl FnMut(usize, usize),
    ) -> Result<(), String> {
        let mut done = 0;
        for m in self.0.find_iter(text) {
            let m = m.map_err(|e| format!("pre-tokenizer failed: {e}"))?;
            if m.end() > m.start() {
                if m.start() > done {
                    f(done, m.start());
                }
                f(m.start(), m.end());
                done = m.end();
            }
        }
        if done < text.len() {
            f(done, text.len());
        }
        Ok(())
    }
}
