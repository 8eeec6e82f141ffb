//! SentencePiece's normalizer: the text rewriting applied before BPE, exactly as
//! `sentencepiece::normalizer::Normalizer::Normalize` does it.
//!
//! Left to right, each step takes the longest prefix that
//! 1. is a user-defined symbol (copied verbatim: user symbols escape
//!    normalization), else
//! 2. matches a rule of the precompiled character map (replaced), else
//! 3. is one character (copied; a byte that starts no valid UTF-8 character
//!    becomes U+FFFD).
//!
//! Around that: `remove_extra_whitespaces` drops leading and trailing spaces and
//! collapses runs (after rewriting, so a rule producing a space counts);
//! `add_dummy_prefix` puts one space in front (or, with
//! `treat_whitespace_as_suffix`, at the end) so a word is spelled the same at the
//! start of a text as after a space; `escape_whitespaces` writes every space as
//! `▁` (U+2581). Empty input stays empty (no dummy prefix).
//!
//! ```text
//! identity, dummy prefix, keep spaces:      "Hi  you" -> "▁Hi▁▁you"
//! nmt_nfkc, dummy prefix, remove extra:  "  Hi  you " -> "▁Hi▁you"
//! ```

use aho_corasick::{AhoCorasick, Anchored, Input, MatchKind, StartKind};

use super::charsmap::CharsMap;
use super::proto::NormalizerSpec;

/// The whitespace mark of escaped text.
pub const SPACE_SYMBOL: &str = "\u{2581}";

/// Where `mark` (a whole UTF-8 character, such as [`SPACE_SYMBOL`]) starts in
/// `text`: its first byte found with [`positions`], the rest compared byte by byte
/// (a slice comparison would call memcmp for three bytes at every mark).
pub fn marks<'a>(text: &'a [u8], mark: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    let is_mark = |i: usize| (mark.iter().enumerate()).all(|(k, &m)| text.get(i + k) == Some(&m));
    positions(mark[0], text).filter(move |&i| is_mark(i))
}

/// Where `byte` is in `text`, in order, as `memchr::memchr_iter` finds it. On
/// x86-64 by memchr's SSE2 searcher, which is part of the baseline and so is
/// inlined: spaces and marks come every few bytes, and the general entry
/// point's dispatch (to AVX2, for long texts) cost more than each search.
pub fn positions(byte: u8, text: &[u8]) -> impl Iterator<Item = usize> + '_ {
    #[cfg(target_arch = "x86_64")]
    let find = {
        let one = memchr::arch::x86_64::sse2::memchr::One::new(byte).expect("x86-64 has SSE2");
        move |hay: &[u8]| one.find(hay)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let find = move |hay: &[u8]| memchr::memchr(byte, hay);
    let mut at = 0;
    std::iter::from_fn(move || {
        let found = at + find(text.get(at..)?)?;
        at = found + 1;
        Some(found)
    })
}

/// Longest-prefix matching of user-defined symbols (sentencepiece's
/// `PrefixMatcher`).
#[derive(Debug, Clone)]
pub struct PrefixMatcher(AhoCorasick);

impl PrefixMatcher {
    /// `None` when there are no symbols to match.
    pub fn new(symbols: &[&str]) -> Option<PrefixMatcher> {
        if symbols.is_empty() {
            return None;
        }
        let ac = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .start_kind(StartKind::Both)
            .build(symbols)
            .expect("user-defined symbols make a valid automaton");
        Some(PrefixMatcher(ac))
    }

    /// The length of the longest symbol `text` starts with, if any.
    pub fn longest_prefix(&self, text: &[u8]) -> Option<usize> {
        let input = Input::new(text).anchored(Anchored::Yes);
        self.0.find(input).map(|m| m.end())
    }

    /// The first symbol in `text` (longest where several start at the same
    /// place) as a byte range: scanning left to right, as sentencepiece does.
    pub fn find(&self, text: &str) -> Option<(usize, usize)> {
        self.0.find(text).map(|m| (m.start(), m.end()))
    }
}

/// The length of the UTF-8 character `bytes` starts with, by sentencepiece's
/// rules (no overlong forms, no surrogates, nothing past U+10FFFF); `None` if
/// the first byte does not start a valid character.
pub fn utf8_char_len(bytes: &[u8]) -> Option<usize> {
    let first = *bytes.first()?;
    let len = match first {
        0x00..=0x7f => return Some(1),
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => return None,
    };
    std::str::from_utf8(bytes.get(..len)?).ok().map(|_| len)
}

/// The normalizer of one `NormalizerSpec`.
#[derive(Debug, Clone)]
pub struct Normalizer {
    charsmap: Option<CharsMap>,
    add_dummy_prefix: bool,
    remove_extra_whitespaces: bool,
    escape_whitespaces: bool,
    treat_whitespace_as_suffix: bool,
    user_defined: Option<PrefixMatcher>,
}

impl Normalizer {
    pub fn new(
        spec: &NormalizerSpec,
        treat_whitespace_as_suffix: bool,
        user_defined: Option<PrefixMatcher>,
    ) -> Result<Normalizer, String> {
        let blob = spec.precompiled_charsmap();
        let charsmap = if blob.is_empty() {
            None
        } else {
            Some(CharsMap::from_blob(blob)?)
        };
        Ok(Normalizer {
            charsmap,
            add_dummy_prefix: spec.add_dummy_prefix(),
            remove_extra_whitespaces: spec.remove_extra_whitespaces(),
            escape_whitespaces: spec.escape_whitespaces(),
            treat_whitespace_as_suffix,
            user_defined,
        })
    }

    /// True when normalizing only escapes spaces (and drops extra ones, adds the
    /// dummy prefix): no rules, no user-defined symbols.
    pub fn is_plain(&self) -> bool {
        self.charsmap.is_none() && self.user_defined.is_none() && self.escape_whitespaces
    }

    pub fn add_dummy_prefix(&self) -> bool {
        self.add_dummy_prefix
    }

    pub fn treat_whitespace_as_suffix(&self) -> bool {
        self.treat_whitespace_as_suffix
    }

    pub fn remove_extra_whitespaces(&self) -> bool {
        self.remove_extra_whitespaces
    }

    /// The rewritten first piece of `input` and how many bytes it consumed.
    fn normalize_prefix<'a>(&'a self, input: &'a [u8]) -> (&'a [u8], usize) {
        if let Some(len) = self
            .user_defined
            .as_ref()
            .and_then(|m| m.longest_prefix(input))
        {
            return (&input[..len], len);
        }
        if let Some((len, replacement)) =
            self.charsmap.as_ref().and_then(|m| m.longest_match(input))
        {
            return (replacement, len);
        }
        match utf8_char_len(input) {
            Some(len) => (&input[..len], len),
            None => ("\u{FFFD}".as_bytes(), 1),
        }
    }

    fn space(&self) -> &'static [u8] {
        if self.escape_whitespaces {
            SPACE_SYMBOL.as_bytes()
        } else {
            b" "
        }
    }

    /// Normalizes `input` as sentencepiece does.
    pub fn normalize(&self, input: &str) -> String {
        self.normalize_with(input, self.add_dummy_prefix)
    }

    /// [`Normalizer::normalize`], with the dummy prefix only when `dummy_prefix` (and
    /// the model adds one): text that continues after a special token gets none, as
    /// Hugging Face's `prepend_scheme: "first"` does.
    pub fn normalize_with(&self, input: &str, dummy_prefix: bool) -> String {
        let mut out = String::new();
        self.normalize_into(input, dummy_prefix, &mut out, None);
        out
    }

    /// [`Normalizer::normalize_with`] into `out` (its text replaced, its buffer
    /// kept). Given `marks`, a plain normalizer ([`Normalizer::is_plain`]) of
    /// input that holds no `▁` of its own also sets `marks` to where each `▁` of
    /// `out` starts, and returns true: they are the spaces it wrote, so the
    /// encoder need not search `out` for them again. Else returns false.
    pub fn normalize_into(
        &self,
        input: &str,
        dummy_prefix: bool,
        out: &mut String,
        marks: Option<&mut Vec<u32>>,
    ) -> bool {
        let dummy_prefix = dummy_prefix && self.add_dummy_prefix;
        let mut marks = marks.filter(|_| {
            // (Positions are u32: a space becomes three bytes.)
            self.is_plain()
                && input.len() < (u32::MAX / 4) as usize
                && memchr::memmem::find(input.as_bytes(), self.space()).is_none()
        });
        let known = marks.is_some();
        if let Some(marks) = marks.as_deref_mut() {
            marks.clear();
        }
        let mut bytes = std::mem::take(out).into_bytes();
        bytes.clear();
        let mut input = input.as_bytes();
        if self.remove_extra_whitespaces {
            input = self.skip_leading_spaces(input);
        }
        if input.is_empty() {
            *out = String::from_utf8(bytes).expect("empty");
            return known;
        }
        let space = self.space();
        bytes.reserve(input.len() + input.len() / 2 + 3);
        if dummy_prefix && !self.treat_whitespace_as_suffix {
            mark(&mut marks, &bytes);
            bytes.extend_from_slice(space);
        }
        self.rewrite_body(input, &mut bytes, marks.as_deref_mut());
        if self.remove_extra_whitespaces {
            while bytes.ends_with(space) {
                bytes.truncate(bytes.len() - space.len());
                if let Some(marks) = marks.as_deref_mut() {
                    marks.pop();
                }
            }
        }
        if dummy_prefix && self.treat_whitespace_as_suffix {
            mark(&mut marks, &bytes);
            bytes.extend_from_slice(space);
        }
        *out = if self.charsmap.is_none() {
            // SAFETY: without a charsmap `bytes` is whole characters of `input` (a
            // `&str`: user-defined symbols and characters end at character
            // boundaries) and the space marks, so it is UTF-8. Checking it again
            // was a twentieth of training time.
            unsafe { String::from_utf8_unchecked(bytes) }
        } else {
            // A charsmap could in principle hold replacements that are not UTF-8.
            String::from_utf8(bytes)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into())
        };
        known
    }

    /// Drops leading prefixes that normalize to exactly one space.
    fn skip_leading_spaces<'a>(&self, mut input: &'a [u8]) -> &'a [u8] {
        while !input.is_empty() {
            let (replacement, len) = self.normalize_prefix(input);
            if replacement != b" " {
                break;
            }
            input = &input[len..];
        }
        input
    }

    /// Rewrites every prefix in turn, escaping spaces and (when removing extra
    /// whitespace) dropping spaces that follow a space.
    /// `marks` (see [`Normalizer::normalize_into`]) only for a plain normalizer.
    fn rewrite_body(&self, mut input: &[u8], out: &mut Vec<u8>, marks: Option<&mut Vec<u32>>) {
        let space = self.space();
        if self.charsmap.is_none() && self.user_defined.is_none() {
            return self.copy_body(input, out, marks);
        }
        let mut is_prev_space = self.remove_extra_whitespaces;
        while !input.is_empty() {
            let (mut piece, len) = self.normalize_prefix(input);
            if is_prev_space {
                while let [b' ', rest @ ..] = piece {
                    piece = rest;
                }
            }
            if !piece.is_empty() {
                for &b in piece {
                    if b == b' ' {
                        out.extend_from_slice(space);
                    } else {
                        out.push(b);
                    }
                }
                is_prev_space = piece.ends_with(b" ");
            }
            input = &input[len..];
            if !self.remove_extra_whitespaces {
                is_prev_space = false;
            }
        }
    }
}

impl Normalizer {
    /// [`Normalizer::rewrite_body`] without rules or user symbols (the
    /// `identity` normalizer of Llama and Mistral): every character is its own
    /// rewrite, so only spaces need a look, and we copy bytes. The input came
    /// from a `&str`, so every character is valid.
    fn copy_body(&self, input: &[u8], out: &mut Vec<u8>, mut marks: Option<&mut Vec<u32>>) {
        let space = self.space();
        let mut is_prev_space = self.remove_extra_whitespaces;
        let mut start = 0;
        for i in positions(b' ', input) {
            append(out, input, start, i);
            if i > start {
                is_prev_space = false;
            }
            if !(is_prev_space && self.remove_extra_whitespaces) {
                mark(&mut marks, out);
                out.extend_from_slice(space);
            }
            is_prev_space = true;
            start = i + 1;
        }
        out.extend_from_slice(&input[start..]);
    }
}

/// Appends `input[start..end]` to `out`. A run of up to 16 bytes (a word: most
/// runs are) is copied as one 16-byte move when `input` has 16 bytes from
/// `start`: two instructions, where `extend_from_slice` calls memcpy.
#[inline]
fn append(out: &mut Vec<u8>, input: &[u8], start: usize, end: usize) {
    let n = end - start;
    match input.get(start..start + 16) {
        Some(block) if n <= 16 => {
            out.reserve(16);
            let len = out.len();
            // SAFETY: `reserve` left room for 16 bytes past `len`; all 16 are
            // written, and only the first `n` (<= 16) become part of `out`.
            unsafe {
                std::ptr::copy_nonoverlapping(block.as_ptr(), out.as_mut_ptr().add(len), 16);
                out.set_len(len + n);
            }
        }
        _ => out.extend_from_slice(&input[start..end]),
    }
}

/// Notes in `marks` (when kept) that a mark starts at the end of `out`.
fn mark(marks: &mut Option<&mut Vec<u32>>, out: &[u8]) {
    if let Some(marks) = marks {
        marks.push(out.len() as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::Value;
    use super::*;

    fn normalizer(dummy: bool, remove_extra: bool, escape: bool, suffix: bool) -> Normalizer {
        let mut spec = NormalizerSpec::default();
        spec.0.set(3, Value::Varint(dummy as u64));
        spec.0.set(4, Value::Varint(remove_extra as u64));
        spec.0.set(5, Value::Varint(escape as u64));
        Normalizer::new(&spec, suffix, None).unwrap()
    }

    #[test]
    fn identity_escapes_every_space_and_adds_a_dummy_prefix() {
        let n = normalizer(true, false, true, false);
        assert_eq!(n.normalize("Hi  you "), "▁Hi▁▁you▁");
        assert_eq!(n.normalize(" "), "▁▁");
    }

    #[test]
    fn empty_input_stays_empty() {
        for dummy in [false, true] {
            for remove in [false, true] {
                assert_eq!(normalizer(dummy, remove, true, false).normalize(""), "");
            }
        }
    }

    #[test]
    fn removing_extra_whitespace_strips_and_collapses() {
        let n = normalizer(true, true, true, false);
        assert_eq!(n.normalize("  Hi   you  "), "▁Hi▁you");
        assert_eq!(n.normalize("   "), "");
        // Only ASCII spaces count: a tab is an ordinary character.
        assert_eq!(n.normalize("\t a"), "▁\t▁a");
    }

    #[test]
    fn words_of_every_length_are_copied_whole() {
        // Runs of 0-40 bytes between spaces, near the input's end and far from
        // it: both ways `append` copies.
        let n = normalizer(false, false, true, false);
        for len in 0..=40 {
            for tail in [0, 1, 15, 16, 17, 40] {
                let word: String = (0..len)
                    .map(|i| char::from(b'a' + (i % 26) as u8))
                    .collect();
                let text = format!("{word} {word}é {}", "x".repeat(tail));
                let want = text.replace(' ', SPACE_SYMBOL);
                assert_eq!(n.normalize(&text), want, "{len} {tail}");
            }
        }
    }

    #[test]
    fn positions_finds_every_byte_as_memchr_does() {
        // Texts around the 16-byte vector's length, matches at both ends.
        for len in [0, 1, 2, 15, 16, 17, 31, 32, 33, 100] {
            for gap in [1, 2, 5, 16, 17, 40, 1000] {
                let text: Vec<u8> = (0..len)
                    .map(|i| if i % gap == 0 { b' ' } else { b'x' })
                    .collect();
                let want: Vec<usize> = memchr::memchr_iter(b' ', &text).collect();
                assert_eq!(
                    positions(b' ', &text).collect::<Vec<_>>(),
                    want,
                    "{len} {gap}"
                );
                let mut last = text.clone();
                if let Some(end) = last.last_mut() {
                    *end = b' ';
                }
                let want: Vec<usize> = memchr::memchr_iter(b' ', &last).collect();
                assert_eq!(
                    positions(b' ', &last).collect::<Vec<_>>(),
                    want,
                    "{len} {gap}"
                );
            }
        }
    }

    #[test]
    fn a_plain_normalizer_tells_where_the_marks_it_wrote_are() {
        let texts = [
            "",
            " ",
            "   ",
            "a",
            "Hi  you ",
            "  Hi   you  ",
            "\t a ",
            "é b—c",
            " x  ",
        ];
        for (dummy, remove, suffix) in (0..8).map(|i| (i & 1 != 0, i & 2 != 0, i & 4 != 0)) {
            let n = normalizer(dummy, remove, true, suffix);
            for text in texts {
                let (mut out, mut at) = ("stale".to_string(), vec![7, 8]);
                assert!(n.normalize_into(text, true, &mut out, Some(&mut at)));
                assert_eq!(out, n.normalize(text));
                let found: Vec<u32> = marks(out.as_bytes(), SPACE_SYMBOL.as_bytes())
                    .map(|m| m as u32)
                    .collect();
                assert_eq!(at, found, "{text:?} dummy {dummy} remove {remove}");
            }
            // Marks of the input's own cannot be told from written ones.
            let mut out = String::new();
            assert!(!n.normalize_into("a▁b c", true, &mut out, Some(&mut vec![])));
            assert_eq!(out, n.normalize("a▁b c"));
        }
        let unescaped = normalizer(true, false, false, false);
        assert!(!unescaped.normalize_into("a b", true, &mut String::new(), Some(&mut vec![])));
    }

    #[test]
    fn whitespace_as_suffix_puts_the_dummy_space_at_the_end() {
        let n = normalizer(true, false, true, true);
        assert_eq!(n.normalize("a b"), "a▁b▁");
    }

    #[test]
    fn unescaped_spaces_stay_spaces() {
        let n = normalizer(false, false, false, false);
        assert_eq!(n.normalize("a b"), "a b");
    }

    #[test]
    fn user_defined_symbols_pass_through_unchanged() {
        let mut spec = NormalizerSpec::default();
        spec.0.set(3, Value::Varint(0));
        let n = Normalizer::new(&spec, false, PrefixMatcher::new(&["<x>", "<xy>"])).unwrap();
        assert_eq!(n.normalize("<xy>z"), "<xy>z");
    }

    #[test]
    fn utf8_lengths_follow_sentencepiece() {
        assert_eq!(utf8_char_len("é".as_bytes()), Some(2));
        assert_eq!(utf8_char_len("😀".as_bytes()), Some(4));
        assert_eq!(utf8_char_len(&[0xe2, 0x82]), None); // truncated
        assert_eq!(utf8_char_len(&[0xed, 0xa0, 0x80]), None); // surrogate
        assert_eq!(utf8_char_len(&[0xc0, 0x80]), None); // overlong
        assert_eq!(utf8_char_len(&[0x80]), None);
    }
}
