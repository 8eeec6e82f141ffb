//! Ids -> text as Hugging Face `tokenizers` decodes a SentencePiece-family
//! `tokenizer.json` (`Tokenizer::decode(ids, skip_special_tokens=false)`): every id
//! becomes its token, special tokens included, and the file's decoder chain
//! (`tokenizers/src/decoders/`) turns the tokens into text; a file without a decoder
//! joins the tokens with spaces. A model gets this decode from the file it was read
//! from ([`SpmModel::with_hf_decoder`]); a `.model` keeps sentencepiece's
//! (`decode.rs`).
//!
//! The steps, each as `tokenizers` has it:
//! - `Replace(pattern, content)` (a string pattern): every match in each token;
//! - `ByteFallback`: a run of tokens spelled `<0xNN>` becomes its bytes when they are
//!   valid UTF-8 as a whole, else one U+FFFD per byte — the valid ones too;
//! - `Fuse`: all tokens into one;
//! - `Strip(content, start, 0)`: up to `start` leading `content` characters of each
//!   token (after `Fuse`: of the text);
//! - `Metaspace`: each `▁` a space, but in the first token, where a prepend scheme
//!   other than "never" drops them.
//!
//! Mistral v0.3 (`Replace("▁", " ")`, `ByteFallback`, `Fuse`, `Strip(" ", 1, 0)`),
//! where sentencepiece writes nothing for a control piece and " ⁇ " for `<unk>`:
//! ```text
//! ["<s>", "▁/", "</s>"]        -> "<s> /</s>"   (sentencepiece: "/")
//! ["▁/", "<unk>", "▁/"]        -> "/<unk> /"    (sentencepiece: "/ ⁇  /")
//! ["<0x61>", "<0xFF>", "▁b"]   -> "�� b"        (sentencepiece: "a� b")
//! ```
//!
//! Every byte of the text is owned by the id it came from, so that the text can be
//! given per id ([`SpmModel::surfaces`]): a replacement belongs to the id of what it
//! replaced, a U+FFFD to the id of its byte.

use super::model::SpmModel;
use super::SpmError;

/// One step of a decoder chain (a `tokenizers` decoder, by its `type`).
#[derive(Debug, Clone, PartialEq)]
pub enum DecodeStep {
    Replace {
        pattern: String,
        content: String,
    },
    ByteFallback,
    Fuse,
    /// Only `stop: 0`: a cut at the end would make the last token's text depend on
    /// the ones after it.
    Strip {
        content: char,
        start: usize,
    },
    /// `prepend`: the prepend scheme is not "never".
    Metaspace {
        replacement: char,
        prepend: bool,
    },
}

/// A `tokenizer.json`'s decoder: its steps (a `Sequence` flattened), or `None` for a
/// file without one.
#[derive(Debug, Clone, PartialEq)]
pub struct HfDecoder {
    steps: Option<Vec<DecodeStep>>,
}

impl HfDecoder {
    /// The decoder of these steps (`None`: the file has none); an error for a
    /// `Replace` of the empty string, which `tokenizers` matches between every two
    /// characters.
    pub fn new(steps: Option<Vec<DecodeStep>>) -> Result<HfDecoder, SpmError> {
        let empty =
            |s: &DecodeStep| matches!(s, DecodeStep::Replace { pattern, .. } if pattern.is_empty());
        if steps.iter().flatten().any(empty) {
            return Err(SpmError::Unsupported(
                "decoder Replace of the empty string is not supported".into(),
            ));
        }
        Ok(HfDecoder { steps })
    }

    /// Whether some step turns `<0xNN>` tokens into bytes (so the text of a run of
    /// them waits for its end: see [`SpmModel::open_tail`]).
    fn has_byte_fallback(&self) -> bool {
        let steps = self.steps.iter().flatten();
        steps.into_iter().any(|s| *s == DecodeStep::ByteFallback)
    }

    /// The text of `tokens` and, per byte of it, the index of the token it came from.
    pub fn decode<'a>(&self, tokens: impl IntoIterator<Item = &'a str>) -> (String, Vec<u32>) {
        let mut chain = Tokens::default();
        let Some(steps) = &self.steps else {
            // No decoder: `tokens.join(" ")`, each space owned by the token after it.
            for (k, token) in tokens.into_iter().enumerate() {
                if k > 0 {
                    chain.push(" ", k as u32);
                }
                chain.push(token, k as u32);
            }
            return (chain.text, chain.owners);
        };
        for (k, token) in tokens.into_iter().enumerate() {
            chain.push(token, k as u32);
            chain.end_token();
        }
        for step in steps {
            chain = match step {
                DecodeStep::Replace { pattern, content } => chain.replace(pattern, content),
                DecodeStep::ByteFallback => chain.byte_fallback(),
                DecodeStep::Fuse => chain.fuse(),
                DecodeStep::Strip { content, start } => chain.strip(*content, *start),
                DecodeStep::Metaspace {
                    replacement,
                    prepend,
                } => chain.metaspace(*replacement, *prepend),
            };
        }
        (chain.text, chain.owners)
    }
}

/// The tokens between two steps of the chain, flat: their text one after another,
/// where each ends, and the owner (an index into the ids) of every byte.
#[derive(Debug, Default)]
struct Tokens {
    text: String,
    owners: Vec<u32>,
    ends: Vec<usize>,
}

impl Tokens {
    fn push(&mut self, s: &str, owner: u32) {
        self.text.push_str(s);
        self.owners.resize(self.text.len(), owner);
    }

    fn end_token(&mut self) {
        self.ends.push(self.text.len());
    }

    /// Each token: its text and the owner of each of its bytes.
    fn tokens(&self) -> impl Iterator<Item = (&str, &[u32])> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(a, b)| (&self.text[a..b], &self.owners[a..b]))
    }

    /// Each token rewritten by `f(token, owners, out)`, which pushes its new text.
    fn map(&self, mut f: impl FnMut(usize, &str, &[u32], &mut Tokens)) -> Tokens {
        let mut out = Tokens::default();
        for (k, (token, owners)) in self.tokens().enumerate() {
            f(k, token, owners, &mut out);
            out.end_token();
        }
        out
    }

    fn replace(&self, pattern: &str, content: &str) -> Tokens {
        self.map(|_, token, owners, out| {
            let mut at = 0;
            for (start, _) in token.match_indices(pattern) {
                copy(out, token, owners, at..start);
                out.push(content, owners[start]);
                at = start + pattern.len();
            }
            copy(out, token, owners, at..token.len());
        })
    }

    fn byte_fallback(&self) -> Tokens {
        let mut out = Tokens::default();
        let mut run: Vec<(u8, u32)> = Vec::new();
        for (token, owners) in self.tokens() {
            match byte_of_token(token) {
                Some(byte) => run.push((byte, owners[0])),
                None => {
                    push_run(&mut out, &mut run);
                    copy(&mut out, token, owners, 0..token.len());
                    out.end_token();
                }
            }
        }
        push_run(&mut out, &mut run);
        out
    }

    fn fuse(mut self) -> Tokens {
        self.ends = vec![self.text.len()];
        self
    }

    fn strip(&self, content: char, start: usize) -> Tokens {
        self.map(|_, token, owners, out| {
            let cut: usize = token
                .chars()
                .take(start)
                .take_while(|&c| c == content)
                .map(char::len_utf8)
                .sum();
            copy(out, token, owners, cut..token.len());
        })
    }

    fn metaspace(&self, replacement: char, prepend: bool) -> Tokens {
        self.map(|k, token, owners, out| {
            for (i, c) in token.char_indices() {
                if c != replacement {
                    copy(out, token, owners, i..i + c.len_utf8());
                } else if k > 0 || !prepend {
                    out.push(" ", owners[i]);
                }
            }
        })
    }
}

/// Appends `token[range]` with its owners (no token end).
fn copy(out: &mut Tokens, token: &str, owners: &[u32], range: std::ops::Range<usize>) {
    out.text.push_str(&token[range.clone()]);
    out.owners.extend_from_slice(&owners[range]);
}

/// The run of byte tokens as `ByteFallback` gives it: one token of its text when
/// the bytes are UTF-8, else one U+FFFD token per byte; the run is emptied.
fn push_run(out: &mut Tokens, run: &mut Vec<(u8, u32)>) {
    if run.is_empty() {
        return;
    }
    let bytes: Vec<u8> = run.iter().map(|&(b, _)| b).collect();
    match String::from_utf8(bytes) {
        Ok(text) => {
            out.text.push_str(&text);
            out.owners.extend(run.iter().map(|&(_, owner)| owner));
            out.end_token();
        }
        Err(_) => {
            for &(_, owner) in run.iter() {
                out.push("\u{FFFD}", owner);
                out.end_token();
            }
        }
    }
    run.clear();
}

/// The byte a token spelled `<0xNN>` stands for, tested as `ByteFallback` tests it
/// (six bytes, the two hex digits as `u8::from_str_radix` reads them).
fn byte_of_token(token: &str) -> Option<u8> {
    if token.len() == 6 && token.starts_with("<0x") && token.ends_with('>') {
        u8::from_str_radix(token.get(3..5)?, 16).ok()
    } else {
        None
    }
}

impl SpmModel {
    /// The model decoding as `tokenizers` does with this decoder (see the module
    /// header) instead of as sentencepiece does.
    pub fn with_hf_decoder(mut self, decoder: HfDecoder) -> SpmModel {
        self.hf_decoder = Some(decoder);
        self
    }

    /// The text `tokenizers` decodes `ids` to and the owner of each of its bytes.
    pub(super) fn hf_decode(&self, decoder: &HfDecoder, ids: &[u32]) -> (String, Vec<u32>) {
        decoder.decode(
            ids.iter()
                .map(|&id| self.entries[id as usize].piece.as_str()),
        )
    }

    /// How many of the last `ids` a later id can still change the text of: under a
    /// `ByteFallback` decoder, the run of byte tokens at the end (valid UTF-8 as a
    /// whole or U+FFFD for each byte, once the run ends); 0 otherwise.
    pub fn open_tail(&self, ids: &[u32]) -> Result<usize, SpmError> {
        self.check_ids(ids)?;
        if !self
            .hf_decoder
            .as_ref()
            .is_some_and(HfDecoder::has_byte_fallback)
        {
            return Ok(0);
        }
        let piece = |id: &&u32| self.entries[**id as usize].piece.as_str();
        let run = ids
            .iter()
            .rev()
            .take_while(|id| byte_of_token(piece(id)).is_some());
        Ok(run.count())
    }
}

#[cfg(test)]
mod tests {
    use super::DecodeStep::*;
    use super::*;

    fn mistral() -> HfDecoder {
        let steps = vec![
            Replace {
                pattern: "\u{2581}".into(),
                content: " ".into(),
            },
            ByteFallback,
            Fuse,
            Strip {
                content: ' ',
                start: 1,
            },
        ];
        HfDecoder::new(Some(steps)).unwrap()
    }

    fn text(decoder: &HfDecoder, tokens: &[&str]) -> String {
        decoder.decode(tokens.iter().copied()).0
    }

    #[test]
    fn the_mistral_chain_keeps_special_tokens_and_strips_one_leading_space() {
        let d = mistral();
        assert_eq!(text(&d, &["<s>", "\u{2581}/", "</s>"]), "<s> /</s>");
        assert_eq!(text(&d, &["<unk>"]), "<unk>");
        assert_eq!(text(&d, &["\u{2581}/", "<unk>", "\u{2581}/"]), "/<unk> /");
        assert_eq!(text(&d, &["\u{2581}\u{2581}a"]), " a");
        assert_eq!(text(&d, &["<0x20>", "a"]), "a");
        assert_eq!(text(&d, &[]), "");
    }

    #[test]
    fn a_run_of_bytes_is_its_utf8_or_one_replacement_per_byte() {
        let d = mistral();
        let check = ["<0xE2>", "<0x9C>", "<0x93>"];
        assert_eq!(text(&d, &check), "\u{2713}");
        assert_eq!(text(&d, &check[..2]), "\u{FFFD}\u{FFFD}");
        // The valid "a" before an invalid byte in the same run is replaced too.
        assert_eq!(
            text(&d, &["<0x61>", "<0xFF>", "\u{2581}b"]),
            "\u{FFFD}\u{FFFD} b"
        );
        assert_eq!(text(&d, &["<0x61>", "x", "<0xFF>"]), "ax\u{FFFD}");
        // Lower-case hex is a byte for ByteFallback; "<0xG1>" is not.
        assert_eq!(text(&d, &["<0x6a>", "<0xG1>"]), "j<0xG1>");
    }

    #[test]
    fn each_byte_is_owned_by_the_token_it_came_from() {
        let d = mistral();
        let (got, owners) = d.decode(["<s>", "\u{2581}a", "<0xE2>", "<0x9C>", "<0x93>"]);
        assert_eq!(got, "<s> a\u{2713}");
        assert_eq!(owners, [0, 0, 0, 1, 1, 2, 3, 4]);
        // The stripped space was the first token's.
        let (got, owners) = d.decode(["\u{2581}a", "\u{2581}b"]);
        assert_eq!((got.as_str(), owners), ("a b", vec![0, 1, 1]));
    }

    #[test]
    fn metaspace_drops_every_mark_of_the_first_token_unless_the_scheme_is_never() {
        let tokens = ["\u{2581}\u{2581}a", "\u{2581}b", "<0x41>"];
        for (prepend, want) in [(true, "a b<0x41>"), (false, "  a b<0x41>")] {
            let steps = vec![Metaspace {
                replacement: '\u{2581}',
                prepend,
            }];
            let d = HfDecoder::new(Some(steps)).unwrap();
            assert_eq!(text(&d, &tokens), want);
        }
    }

    #[test]
    fn without_a_decoder_the_tokens_are_joined_with_spaces() {
        let d = HfDecoder::new(None).unwrap();
        let (got, owners) = d.decode(["<s>", "\u{2581}a"]);
        assert_eq!(got, "<s> \u{2581}a");
        assert_eq!(owners, [0, 0, 0, 1, 1, 1, 1, 1]);
    }

    #[test]
    fn a_strip_before_fuse_cuts_each_token() {
        let steps = vec![
            Strip {
                content: ' ',
                start: 1,
            },
            Fuse,
        ];
        let d = HfDecoder::new(Some(steps)).unwrap();
        assert_eq!(text(&d, &[" a", "  b"]), "a b");
        let empty = Replace {
            pattern: String::new(),
            content: "x".into(),
        };
        assert!(HfDecoder::new(Some(vec![empty])).is_err());
    }

    #[test]
    fn only_a_run_of_byte_pieces_at_the_end_is_open_under_byte_fallback() {
        let pieces = [("\u{2581}a", 0.0, crate::spm::PieceType::Normal)];
        let m = crate::spm::tests::model(&pieces, true);
        let [a, x41, xe2] = ["\u{2581}a", "<0x41>", "<0xE2>"].map(|p| m.piece_to_id(p));
        assert_eq!(
            m.open_tail(&[x41, a, x41, xe2]),
            Ok(0),
            "sentencepiece's decode"
        );
        let m = m.with_hf_decoder(mistral());
        assert_eq!(m.open_tail(&[x41, a, x41, xe2]), Ok(2));
        assert_eq!(m.open_tail(&[x41, a]), Ok(0));
        assert_eq!(m.decode(&[a, x41, xe2]).unwrap(), "a\u{FFFD}\u{FFFD}");
        let metaspace = vec![Metaspace {
            replacement: '\u{2581}',
            prepend: true,
        }];
        let m = m.with_hf_decoder(HfDecoder::new(Some(metaspace)).unwrap());
        assert_eq!(
            m.open_tail(&[a, x41]),
            Ok(0),
            "no ByteFallback: <0x41> is text"
        );
        assert!(m.open_tail(&[99_999]).is_err());
    }
}
