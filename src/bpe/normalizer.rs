//! The Unicode normalizers of Hugging Face `tokenizer.json` files that bytepair
//! applies exactly as `tokenizers` does: NFC, NFKC, NFD, NFKD and Lowercase, alone or
//! in a sequence. `tokenizers` normalizes the text between added tokens, then
//! pre-tokenizes the result; so does [`crate::bpe::Encoder`].
//!
//! Every safe cut of `io::chunking` stays exact under these: a cut is next to ASCII
//! characters on both sides, which never decompose, never compose with a neighbour
//! and never follow a combining mark's reordering; and Lowercase maps each character
//! alone (`char::to_lowercase`, as `tokenizers` does: no final-sigma rule).

use std::borrow::Cow;

use unicode_normalization::{
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
        let quick = match self {
            Step::Nfc => is_nfc_quick(text.chars()),
            Step::Nfkc => is_nfkc_quick(text.chars()),
            Step::Nfd => is_nfd_quick(text.chars()),
            Step::Nfkd => is_nfkd_quick(text.chars()),
            Step::Lowercase => unreachable!("handled above"),
        };
        if quick == IsNormalized::Yes {
            return text;
        }
        Cow::Owned(match self {
            Step::Nfc => text.nfc().collect(),
            Step::Nfkc => text.nfkc().collect(),
            Step::Nfd => text.nfd().collect(),
            Step::Nfkd => text.nfkd().collect(),
            Step::Lowercase => unreachable!("handled above"),
        })
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
    fn normalized_text_is_borrowed() {
        let n = Normalizer::from_names(&["NFC", "Lowercase"]).unwrap();
        assert!(matches!(n.normalize("plain text"), Cow::Borrowed(_)));
        assert!(matches!(n.normalize("d\u{e9}j\u{e0}"), Cow::Borrowed(_)));
    }

    #[test]
    fn other_normalizers_are_refused_by_name() {
        let err = Normalizer::from_names(&["NFC", "Replace"]).unwrap_err();
        assert!(err.contains("\"Replace\" is not supported"), "{err}");
    }
}
