//! The normalizers of Hugging Face `tokenizer.json` files that bytepair applies
//! exactly as `tokenizers` does: NFC, NFKC, NFD, NFKD, Lowercase, Replace, Prepend and
//! Strip, alone or in a sequence. `tokenizers` normalizes the text between added
//! tokens, each such segment on its own, then pre-tokenizes the result; so does
//! [`crate::bpe::Encoder`].
//!
//! Every safe cut of `io::chunking` stays exact under the Unicode forms and Lowercase:
//! a cut is next to ASCII characters on both sides, which never decompose, never
//! compose with a neighbour and never follow a combining mark's reordering; and
//! Lowercase maps each character alone (`char::to_lowercase`, as `tokenizers` does:
//! no final-sigma rule). Replace, Prepend and Strip do not keep them (Prepend and Strip
//! act at a segment's edges, a Replace match may span a cut or join what it separates):
//! with them text is cut only at special tokens ([`Normalizer::keeps_text_cuts`]).
//!
//! The tables are those `tokenizers` uses (the `unicode-normalization-alignments`
//! crate, Unicode 9.0): a character Unicode assigned later (U+1F16C RAISED MR SIGN,
//! 12.0) is left as it is by both, where newer tables would turn it into "MR".

use std::borrow::Cow;
use std::sync::OnceLock;

use fancy_regex::{Error, Regex, RegexBuilder, RuntimeError};
use unicode_normalization_alignments::char::canonical_combining_class;
use unicode_normalization_alignments::{
    is_nfc_quick, is_nfd_quick, is_nfkc_quick, is_nfkd_quick, IsNormalized, UnicodeNormalization,
};

use crate::pretok::patterns::{backtrack_limit, BACKTRACK_LIMIT_VAR};

/// One normalizer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Nfc,
    Nfkc,
    Nfd,
    Nfkd,
    Lowercase,
    /// Every match of a literal or a regex replaced by a text (`Replace`).
    Replace(Replace),
    /// A text put before the segment, unless it is empty (`Prepend`).
    Prepend(String),
    /// Whitespace (`char::is_whitespace`) taken off the segment's start and/or end
    /// (`Strip`).
    Strip {
        left: bool,
        right: bool,
    },
}

impl Step {
    /// The step named as in `tokenizer.json` (`"NFC"`, ..., `"Lowercase"`): those
    /// without settings.
    pub fn from_name(name: &str) -> Result<Step, String> {
        Ok(match name {
            "NFC" => Step::Nfc,
            "NFKC" => Step::Nfkc,
            "NFD" => Step::Nfd,
            "NFKD" => Step::Nfkd,
            "Lowercase" => Step::Lowercase,
            other => {
                return Err(format!(
                    "normalizer {other:?} is not supported (NFC, NFKC, NFD, NFKD and Lowercase \
                     are, and Replace, Prepend and Strip with their settings)"
                ))
            }
        })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Step::Nfc => "NFC",
            Step::Nfkc => "NFKC",
            Step::Nfd => "NFD",
            Step::Nfkd => "NFKD",
            Step::Lowercase => "Lowercase",
            Step::Replace(_) => "Replace",
            Step::Prepend(_) => "Prepend",
            Step::Strip { .. } => "Strip",
        }
    }

    /// Is this a Unicode normal form or Lowercase (which keep the text cuts)?
    fn keeps_text_cuts(&self) -> bool {
        !matches!(
            self,
            Step::Replace(_) | Step::Prepend(_) | Step::Strip { .. }
        )
    }

    /// `text` normalized, borrowed when it already is (ASCII text, most often).
    fn apply<'a>(&self, text: Cow<'a, str>) -> Result<Cow<'a, str>, String> {
        match self {
            Step::Lowercase => return Ok(lowercase(text)),
            Step::Replace(replace) => return replace.apply(text),
            Step::Prepend(prepend) => return Ok(self::prepend(prepend, text)),
            &Step::Strip { left, right } => return Ok(strip(left, right, text)),
            _ => {}
        }
        if text.is_ascii() {
            return Ok(text);
        }
        Ok(match self.by_spans(&text) {
            Some(normalized) => Cow::Owned(normalized),
            None => text,
        })
    }

    /// Is `c` a *stable* character for this form: unchanged by it (quick check Yes on
    /// its own), a starter (combining class 0), so that nothing before it composes or
    /// reorders with it or anything after it? The form of a text is then the forms
    /// of the pieces between stable characters (each piece starting at one), joined.
    fn stable(&self, c: char) -> bool {
        if c.is_ascii() {
            return true;
        }
        let c = c as u32;
        if c < 0x10000 {
            let table = self.stable_bmp();
            return table[(c >> 6) as usize] >> (c & 63) & 1 == 1;
        }
        self.stable_lookup(char::from_u32(c).expect("a char"))
    }

    /// [`Step::stable`] from Unicode's tables (two lookups).
    fn stable_lookup(&self, c: char) -> bool {
        let one = std::iter::once(c);
        let quick = match self {
            Step::Nfc => is_nfc_quick(one),
            Step::Nfkc => is_nfkc_quick(one),
            Step::Nfd => is_nfd_quick(one),
            Step::Nfkd => is_nfkd_quick(one),
            _ => unreachable!("not a normal form"),
        };
        quick == IsNormalized::Yes && canonical_combining_class(c) == 0
    }

    /// [`Step::stable`] for every character below U+10000, a bit each (8 KB a form,
    /// made on first use): one load per character instead of two table searches.
    fn stable_bmp(&self) -> &'static [u64; 1024] {
        static TABLES: [OnceLock<Box<[u64; 1024]>>; 4] = [
            OnceLock::new(),
            OnceLock::new(),
            OnceLock::new(),
            OnceLock::new(),
        ];
        let slot = match self {
            Step::Nfc => 0,
            Step::Nfkc => 1,
            Step::Nfd => 2,
            Step::Nfkd => 3,
            _ => unreachable!("not a normal form"),
        };
        TABLES[slot].get_or_init(|| {
            let mut bits = Box::new([0u64; 1024]);
            for (n, c) in (0..0x10000u32).filter_map(|n| Some((n, char::from_u32(n)?))) {
                if self.stable_lookup(c) {
                    bits[(n >> 6) as usize] |= 1 << (n & 63);
                }
            }
            bits
        })
    }

    /// `text` in this normal form, or None if it is in it already. One pass over the
    /// text, which normalizes only the spans that may need it: from the last stable
    /// character before one that is not to the next stable character (a span that
    /// passes the quick check is kept as it is). Most of a text that is not all
    /// normalized is (a decomposed accent in a page of prose), and copying it costs
    /// less than running it through the form.
    fn by_spans(&self, text: &str) -> Option<String> {
        let mut out: Option<String> = None;
        let mut copied = 0; // `out` holds the form of text[..copied]
        let mut span: Option<usize> = None; // where the span being gathered starts
        let mut last_stable = 0;
        for (i, c) in text.char_indices() {
            if self.stable(c) {
                if let Some(start) = span.take() {
                    if self.normalize_span(&mut out, text, copied, start, i) {
                        copied = i;
                    }
                }
                last_stable = i;
            } else if span.is_none() {
                span = Some(last_stable);
            }
        }
        if let Some(start) = span {
            if self.normalize_span(&mut out, text, copied, start, text.len()) {
                copied = text.len();
            }
        }
        let mut out = out?;
        out.push_str(&text[copied..]);
        Some(out)
    }

    /// If the span `text[start..end]` is not surely in this form already, appends
    /// `text[copied..start]` and the span's form to `out` (made on the first such
    /// span) and returns true.
    fn normalize_span(
        &self,
        out: &mut Option<String>,
        text: &str,
        copied: usize,
        start: usize,
        end: usize,
    ) -> bool {
        let piece = &text[start..end];
        let quick = match self {
            Step::Nfc => is_nfc_quick(piece.chars()),
            Step::Nfkc => is_nfkc_quick(piece.chars()),
            Step::Nfd => is_nfd_quick(piece.chars()),
            Step::Nfkd => is_nfkd_quick(piece.chars()),
            _ => unreachable!("not a normal form"),
        };
        if quick == IsNormalized::Yes {
            return false;
        }
        let out = out.get_or_insert_with(|| String::with_capacity(text.len() + text.len() / 8));
        out.push_str(&text[copied..start]);
        self.extend(out, piece);
        true
    }

    /// Appends `piece` in this normal form to `out`.
    fn extend(&self, out: &mut String, piece: &str) {
        match self {
            Step::Nfc => out.extend(piece.nfc().map(|(c, _)| c)),
            Step::Nfkc => out.extend(piece.nfkc().map(|(c, _)| c)),
            Step::Nfd => out.extend(piece.nfd().map(|(c, _)| c)),
            Step::Nfkd => out.extend(piece.nfkd().map(|(c, _)| c)),
            _ => unreachable!("not a normal form"),
        }
    }
}

/// Each character lowercased alone (`char::to_lowercase`, as `tokenizers` does).
fn lowercase(text: Cow<'_, str>) -> Cow<'_, str> {
    if text.is_ascii() {
        if !text.bytes().any(|b| b.is_ascii_uppercase()) {
            return text;
        }
        return Cow::Owned(text.to_ascii_lowercase());
    }
    let unchanged = |c: char| {
        let mut lower = c.to_lowercase();
        lower.next() == Some(c) && lower.next().is_none()
    };
    if text.chars().all(unchanged) {
        return text;
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
        } else {
            out.extend(c.to_lowercase());
        }
    }
    Cow::Owned(out)
}

/// `prepend` before `text`, unless `text` is empty (`tokenizers`' `Prepend`).
fn prepend<'a>(prepend: &str, text: Cow<'a, str>) -> Cow<'a, str> {
    if text.is_empty() || prepend.is_empty() {
        return text;
    }
    Cow::Owned(format!("{prepend}{text}"))
}

/// `text` without the whitespace at its start (`left`) and end (`right`), whitespace
/// as `char::is_whitespace` says (`tokenizers`' `Strip`; `str::trim` uses the same
/// property).
fn strip(left: bool, right: bool, text: Cow<'_, str>) -> Cow<'_, str> {
    let trim = |t: &str| -> (usize, usize) {
        let start = if left {
            t.len() - t.trim_start().len()
        } else {
            0
        };
        let end = if right { t.trim_end().len() } else { t.len() };
        (start, end.max(start))
    };
    match text {
        Cow::Borrowed(t) => {
            let (start, end) = trim(t);
            Cow::Borrowed(&t[start..end])
        }
        Cow::Owned(mut t) => {
            let (start, end) = trim(&t);
            t.truncate(end);
            t.drain(..start);
            Cow::Owned(t)
        }
    }
}

/// `tokenizers`' `Replace`: every match of the pattern, leftmost first and not
/// overlapping ("aa" in "aaa" is the first two), replaced by `content`. A regex runs on
/// bytepair's engine (the formats refuse regexes whose matches differ from
/// Oniguruma's, `tokenizers`' engine). A pattern that matches the empty string is
/// refused: `tokenizers` misplaces the text after an empty match (and may panic), so
/// no ids are its. The empty literal and regexes that can match nothing are refused
/// when made; an empty match of another regex (a lookahead) fails the encode.
#[derive(Debug, Clone)]
pub struct Replace {
    pattern: String,
    content: String,
    /// The compiled pattern and its backtracking budget, when the pattern is a regex.
    regex: Option<(Regex, usize)>,
}

impl PartialEq for Replace {
    fn eq(&self, other: &Self) -> bool {
        (&self.pattern, &self.content, self.regex.is_some())
            == (&other.pattern, &other.content, other.regex.is_some())
    }
}

impl Eq for Replace {}

impl Replace {
    /// Replaces `pattern` (a regex when `regex`, else a literal) by `content`.
    pub fn new(pattern: &str, content: &str, regex: bool) -> Result<Self, String> {
        let empty = || {
            format!(
                "normalizer Replace pattern {pattern:?} matches the empty string: not \
                 supported (tokenizers misplaces the text around an empty match)"
            )
        };
        let regex = if regex {
            // What the plain engine can read, it can tell whether it matches nothing.
            if let Ok(hir) = regex_syntax::parse(pattern) {
                if hir.properties().minimum_len() == Some(0) {
                    return Err(empty());
                }
            }
            let limit = backtrack_limit()?;
            let compiled = RegexBuilder::new(pattern)
                .backtrack_limit(limit)
                .build()
                .map_err(|e| format!("normalizer Replace: invalid regex {pattern:?}: {e}"))?;
            Some((compiled, limit))
        } else if pattern.is_empty() {
            return Err(empty());
        } else {
            None
        };
        Ok(Self {
            pattern: pattern.to_owned(),
            content: content.to_owned(),
            regex,
        })
    }

    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    pub fn content(&self) -> &str {
        &self.content
    }

    pub fn is_regex(&self) -> bool {
        self.regex.is_some()
    }

    fn apply<'a>(&self, text: Cow<'a, str>) -> Result<Cow<'a, str>, String> {
        if text.is_empty() {
            return Ok(text);
        }
        let mut matches: Vec<(usize, usize)> = Vec::new();
        match &self.regex {
            Some((regex, limit)) => {
                for m in regex.find_iter(&text[..]) {
                    let m = m.map_err(|e| self.search_error(e, *limit))?;
                    if m.start() == m.end() {
                        return Err(format!(
                            "the normalizer Replace regex {:?} matched the empty string at \
                             byte {} of a text between special tokens: not supported \
                             (tokenizers misplaces the text around an empty match)",
                            self.pattern,
                            m.start()
                        ));
                    }
                    matches.push((m.start(), m.end()));
                }
            }
            None => {
                let n = self.pattern.len();
                matches.extend(
                    text.match_indices(&self.pattern[..])
                        .map(|(i, _)| (i, i + n)),
                );
            }
        }
        if matches.is_empty() {
            return Ok(text);
        }
        let mut out = String::with_capacity(text.len() + matches.len() * self.content.len());
        let mut done = 0;
        for (start, end) in matches {
            out.push_str(&text[done..start]);
            out.push_str(&self.content);
            done = end;
        }
        out.push_str(&text[done..]);
        Ok(Cow::Owned(out))
    }

    fn search_error(&self, e: Error, limit: usize) -> String {
        match e {
            Error::RuntimeError(RuntimeError::BacktrackLimitExceeded) => format!(
                "the normalizer Replace regex {:?} needs more backtracking than the limit of \
                 {limit} steps; simplify it or raise the limit with the environment variable \
                 {BACKTRACK_LIMIT_VAR}",
                self.pattern
            ),
            e => format!("normalizer Replace failed: {e}"),
        }
    }
}

/// The normalizers of a model, applied in order (none: the text as it is).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Normalizer {
    steps: Vec<Step>,
}

impl Normalizer {
    pub fn new(steps: Vec<Step>) -> Self {
        Self { steps }
    }

    /// The normalizer of the steps named (an empty list: none).
    pub fn from_names<S: AsRef<str>>(names: &[S]) -> Result<Self, String> {
        let steps = names
            .iter()
            .map(|n| Step::from_name(n.as_ref()))
            .collect::<Result<_, _>>()?;
        Ok(Self { steps })
    }

    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.steps.iter().map(|s| s.name()).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// May text be cut at the pattern's text cuts (`io::chunking`) and its parts
    /// normalized apart? Yes for the Unicode forms and Lowercase; not with Replace,
    /// Prepend or Strip (see the module docs).
    pub fn keeps_text_cuts(&self) -> bool {
        self.steps.iter().all(Step::keeps_text_cuts)
    }

    /// `text` (one segment between added tokens) after every step; an error only
    /// from a Replace regex that runs out of backtracking budget.
    pub fn normalize<'a>(&self, text: &'a str) -> Result<Cow<'a, str>, String> {
        self.steps
            .iter()
            .try_fold(Cow::Borrowed(text), |text, step| step.apply(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(names: &[&str], text: &str) -> String {
        Normalizer::from_names(names)
            .unwrap()
            .normalize(text)
            .unwrap()
            .into_owned()
    }

    #[test]
    fn each_step_normalizes_as_unicode_says() {
        assert_eq!(norm(&["NFC"], "e\u{301}"), "\u{e9}");
        assert_eq!(norm(&["NFD"], "\u{e9}"), "e\u{301}");
        assert_eq!(norm(&["NFKC"], "\u{fb01}\u{2460}"), "fi1");
        assert_eq!(norm(&["NFKD"], "\u{fb01}\u{e9}"), "fie\u{301}");
        assert_eq!(
            norm(&["Lowercase"], "AbC \u{130}\u{3a3}"),
            "abc i\u{307}\u{3c3}"
        );
        assert_eq!(norm(&["NFKC", "Lowercase"], "\u{ff21}B"), "ab");
        assert_eq!(norm(&[], "\u{ff21}"), "\u{ff21}");
    }

    #[test]
    fn normalizing_by_spans_equals_normalizing_the_whole_text() {
        // Composed and decomposed accents, marks out of canonical order after a
        // starter that decomposes, Hangul syllables and jamo, compatibility forms,
        // at the start, the end and between stable characters.
        let pieces = [
            "e\u{301}",
            "\u{e9}\u{323}",
            "a\u{323}\u{301}",
            "\u{1e9b}\u{323}",
            "\u{ac00}",
            "\u{1100}\u{1161}\u{11a8}",
            "\u{ac00}\u{11a8}",
            "\u{fb01}",
            "\u{2460}",
            "x",
            " ",
            "\u{301}",
            "\u{5d0}\u{5b7}",
            "\u{915}\u{93c}",
            "\u{958}",
            "\u{212b}",
            "\u{3000}",
            "\u{30ab}\u{3099}",
            "\u{ff76}\u{ff9e}",
            "\u{f900}",
            "\u{2126}",
        ];
        let mut seed = 7u64;
        for _ in 0..3000 {
            let mut text = String::new();
            for _ in 0..(seed % 9) {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                text += pieces[(seed >> 33) as usize % pieces.len()];
            }
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            for step in [Step::Nfc, Step::Nfkc, Step::Nfd, Step::Nfkd] {
                let whole: String = match step {
                    Step::Nfc => text.nfc().map(|(c, _)| c).collect(),
                    Step::Nfkc => text.nfkc().map(|(c, _)| c).collect(),
                    Step::Nfd => text.nfd().map(|(c, _)| c).collect(),
                    _ => text.nfkd().map(|(c, _)| c).collect(),
                };
                assert_eq!(
                    step.by_spans(&text).unwrap_or(text.clone()),
                    whole,
                    "{step:?} of {text:?}"
                );
            }
        }
    }

    #[test]
    fn the_table_of_stable_characters_agrees_with_unicodes_tables() {
        for step in [Step::Nfc, Step::Nfkc, Step::Nfd, Step::Nfkd] {
            for c in (0x80..0x10000u32).filter_map(char::from_u32) {
                assert_eq!(step.stable(c), step.stable_lookup(c), "{step:?} {c:?}");
            }
        }
    }

    #[test]
    fn normalized_text_is_borrowed() {
        let n = Normalizer::from_names(&["NFC", "Lowercase"]).unwrap();
        assert!(matches!(
            n.normalize("plain text").unwrap(),
            Cow::Borrowed(_)
        ));
        assert!(matches!(
            n.normalize("d\u{e9}j\u{e0}").unwrap(),
            Cow::Borrowed(_)
        ));
        // Marks in canonical order (a virama, Thai tone marks) are in form: borrowed.
        let marks = "\u{928}\u{92e}\u{938}\u{94d}\u{924}\u{947} \u{e44}\u{e21}\u{e48}";
        assert!(matches!(n.normalize(marks).unwrap(), Cow::Borrowed(_)));
        let nfd = Normalizer::from_names(&["NFD"]).unwrap();
        assert_eq!(nfd.normalize("ab\u{e9}cd").unwrap(), "abe\u{301}cd");
    }

    fn apply(step: Step, text: &str) -> String {
        Normalizer::new(vec![step])
            .normalize(text)
            .unwrap()
            .into_owned()
    }

    #[test]
    fn replace_prepend_and_strip_rewrite_as_tokenizers_does() {
        let replace = |p: &str, c: &str, regex| Step::Replace(Replace::new(p, c, regex).unwrap());
        // Leftmost matches, not overlapping; content may be empty or longer.
        assert_eq!(apply(replace("aa", "b", false), "aaaaa"), "bba");
        assert_eq!(apply(replace(" ", "", false), " a b "), "ab");
        assert_eq!(apply(replace(r"\s{2,}", " ", true), "a   b\n\nc"), "a b c");
        assert_eq!(apply(replace("x", "yy", false), ""), "");
        // Prepend: only before text that is there.
        assert_eq!(
            apply(Step::Prepend("\u{2581}".into()), "a b"),
            "\u{2581}a b"
        );
        assert_eq!(apply(Step::Prepend("\u{2581}".into()), ""), "");
        // Strip: char::is_whitespace (U+3000, U+0085 yes; U+200B no).
        let strip = |left, right| Step::Strip { left, right };
        assert_eq!(apply(strip(true, true), "\u{3000} a \u{85}"), "a");
        assert_eq!(apply(strip(true, false), " a "), "a ");
        assert_eq!(apply(strip(false, true), " a\u{200b} "), " a\u{200b}");
        assert_eq!(apply(strip(true, true), " \t\n "), "");
        // In order, each on what the one before left.
        let n = Normalizer::new(vec![
            replace("a", "", false),
            Step::Prepend("_".into()),
            Step::Lowercase,
        ]);
        assert_eq!(n.normalize("aa").unwrap(), "");
        assert_eq!(n.normalize("aBa").unwrap(), "_b");
        assert!(!n.keeps_text_cuts());
        assert!(Normalizer::from_names(&["NFC", "Lowercase"])
            .unwrap()
            .keeps_text_cuts());
    }

    #[test]
    fn replace_patterns_that_match_nothing_are_refused() {
        for (pattern, regex) in [("", false), ("x*", true), ("a|", true), ("^", true)] {
            let err = Replace::new(pattern, "y", regex).unwrap_err();
            assert!(err.contains("matches the empty string"), "{pattern}: {err}");
        }
        let lookahead = Normalizer::new(vec![Step::Replace(
            Replace::new("(?=b)", "x", true).unwrap(),
        )]);
        assert_eq!(lookahead.normalize("aa").unwrap(), "aa");
        let err = lookahead.normalize("ab").unwrap_err();
        assert!(err.contains("matched the empty string at byte 1"), "{err}");
    }

    #[test]
    fn other_normalizers_are_refused_by_name() {
        let err = Normalizer::from_names(&["NFC", "Replace"]).unwrap_err();
        assert!(err.contains("\"Replace\" is not supported"), "{err}");
    }
}
