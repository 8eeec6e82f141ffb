//! The Unicode normalizers of Hugging Face `tokenizer.json` files that bytepair
//! applies exactly as `tokenizers` does: NFC, NFKC, NFD, NFKD and Lowercase, alone or
//! in a sequence. `tokenizers` normalizes the text between added tokens, then
//! pre-tokenizes the result; so does [`crate::bpe::Encoder`].
//!
//! Every safe cut of `io::chunking` stays exact under these: a cut is next to ASCII
//! characters on both sides, which never decompose, never compose with a neighbour
//! and never follow a combining mark's reordering; and Lowercase maps each character
//! alone (`char::to_lowercase`, as `tokenizers` does: no final-sigma rule).
//!
//! The tables are those `tokenizers` uses (the `unicode-normalization-alignments`
//! crate, Unicode 9.0): a character Unicode assigned later (U+1F16C RAISED MR SIGN,
//! 12.0) is left as it is by both, where newer tables would turn it into "MR".

use std::borrow::Cow;
use std::sync::OnceLock;

use unicode_normalization_alignments::char::canonical_combining_class;
use unicode_normalization_alignments::{
    is_nfc_quick, is_nfd_quick, is_nfkc_quick, is_nfkd_quick, IsNormalized, UnicodeNormalization,
};

/// One normalizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Nfc,
    Nfkc,
    Nfd,
    Nfkd,
    Lowercase,
}

impl Step {
    /// The step named as in `tokenizer.json` (`"NFC"`, ..., `"Lowercase"`).
    pub fn from_name(name: &str) -> Result<Step, String> {
        Ok(match name {
            "NFC" => Step::Nfc,
            "NFKC" => Step::Nfkc,
            "NFD" => Step::Nfd,
            "NFKD" => Step::Nfkd,
            "Lowercase" => Step::Lowercase,
            other => {
                return Err(format!(
                    "normalizer {other:?} is not supported (NFC, NFKC, NFD, NFKD and Lowercase are)"
                ))
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Step::Nfc => "NFC",
            Step::Nfkc => "NFKC",
            Step::Nfd => "NFD",
            Step::Nfkd => "NFKD",
            Step::Lowercase => "Lowercase",
        }
    }

    /// `text` normalized, borrowed when it already is (ASCII text, most often).
    fn apply<'a>(self, text: Cow<'a, str>) -> Cow<'a, str> {
        if self == Step::Lowercase {
            return lowercase(text);
        }
        if text.is_ascii() {
            return text;
        }
        match self.by_spans(&text) {
            Some(normalized) => Cow::Owned(normalized),
            None => text,
        }
    }

    /// Is `c` a *stable* character for this form: unchanged by it (quick check Yes on
    /// its own), a starter (combining class 0), so that nothing before it composes or
    /// reorders with it or anything after it? The form of a text is then the forms
    /// of the pieces between stable characters (each piece starting at one), joined.
    fn stable(self, c: char) -> bool {
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
    fn stable_lookup(self, c: char) -> bool {
        let one = std::iter::once(c);
        let quick = match self {
            Step::Nfc => is_nfc_quick(one),
            Step::Nfkc => is_nfkc_quick(one),
            Step::Nfd => is_nfd_quick(one),
            Step::Nfkd => is_nfkd_quick(one),
            Step::Lowercase => unreachable!("not a normal form"),
        };
        quick == IsNormalized::Yes && canonical_combining_class(c) == 0
    }

    /// [`Step::stable`] for every character below U+10000, a bit each (8 KB a form,
    /// made on first use): one load per character instead of two table searches.
    fn stable_bmp(self) -> &'static [u64; 1024] {
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
            Step::Lowercase => unreachable!("not a normal form"),
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
    fn by_spans(self, text: &str) -> Option<String> {
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
        self,
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
            Step::Lowercase => unreachable!("not a normal form"),
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
    fn extend(self, out: &mut String, piece: &str) {
        match self {
            Step::Nfc => out.extend(piece.nfc().map(|(c, _)| c)),
            Step::Nfkc => out.extend(piece.nfkc().map(|(c, _)| c)),
            Step::Nfd => out.extend(piece.nfd().map(|(c, _)| c)),
            Step::Nfkd => out.extend(piece.nfkd().map(|(c, _)| c)),
            Step::Lowercase => unreachable!("not a normal form"),
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

/// The normalizers of a model, applied in order (none: the text as it is).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Normalizer {
    steps: Vec<Step>,
}

impl Normalizer {
    /// The normalizer of the steps named (an empty list: none).
    pub fn from_names<S: AsRef<str>>(names: &[S]) -> Result<Self, String> {
        let steps = names
            .iter()
            .map(|n| Step::from_name(n.as_ref()))
            .collect::<Result<_, _>>()?;
        Ok(Self { steps })
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.steps.iter().map(|s| s.name()).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// `text` after every step.
    pub fn normalize<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.steps
            .iter()
            .fold(Cow::Borrowed(text), |text, step| step.apply(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(names: &[&str], text: &str) -> String {
        Normalizer::from_names(names)
            .unwrap()
            .normalize(text)
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
        assert!(matches!(n.normalize("plain text"), Cow::Borrowed(_)));
        assert!(matches!(n.normalize("d\u{e9}j\u{e0}"), Cow::Borrowed(_)));
        // Marks in canonical order (a virama, Thai tone marks) are in form: borrowed.
        let marks = "\u{928}\u{92e}\u{938}\u{94d}\u{924}\u{947} \u{e44}\u{e21}\u{e48}";
        assert!(matches!(n.normalize(marks), Cow::Borrowed(_)));
        let nfd = Normalizer::from_names(&["NFD"]).unwrap();
        assert_eq!(nfd.normalize("ab\u{e9}cd"), "abe\u{301}cd");
    }

    #[test]
    fn other_normalizers_are_refused_by_name() {
        let err = Normalizer::from_names(&["NFC", "Replace"]).unwrap_err();
        assert!(err.contains("\"Replace\" is not supported"), "{err}");
    }
}
