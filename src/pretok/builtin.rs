//! Hand-written pre-tokenizers for the built-in patterns: gpt2, cl100k, o200k, and
//! the open models' variants of the last two (Llama 3, Qwen2 and Qwen3.5 of cl100k,
//! Mistral's Tekken of o200k), which differ in a rule or two each: the same functions,
//! with those rules as const parameters.
//!
//! Each `*_piece_end(text, i)` returns where the piece starting at `i` ends — exactly
//! where the pattern's regex match would end, alternative by alternative, with the
//! regex's backtracking worked out by hand (comments show each alternative). This runs
//! several times faster than the regex engine. The character classes come from
//! `regex-syntax`'s own Unicode tables — the crate the regex engine compiles the
//! patterns with — so both always agree on what `\p{L}` or `\s` is.
//!
//! Exactness is checked by differential tests against the regex (`fancy-regex`) on
//! generated text, here and in the Python tests (against Python's `regex`).

use std::sync::OnceLock;

use regex_syntax::hir::{Class, HirKind};

use super::blocks::{self, CharClass, Simd};
use super::patterns::{
    CL100K_PATTERN, GPT2_PATTERN, LLAMA3_PATTERN, O200K_PATTERN, QWEN2_PATTERN, QWEN3_5_PATTERN,
    TEKKEN_PATTERN,
};

/// Lu, Lt
const UPPER: u8 = 1;
/// Ll
const LOWER: u8 = 2;
/// Lm, Lo
const MODIFIER_OR_OTHER: u8 = 4;
/// M (marks)
const MARK: u8 = 8;
/// N
const NUM: u8 = 16;
/// White_Space (`\s`)
const WS: u8 = 32;
const LETTER: u8 = UPPER | LOWER | MODIFIER_OR_OTHER;

/// A range of ASCII bytes, `(b | fold) - low <= span` (wrapping, unsigned): one test
/// for the scalar code and for 16 bytes at once in SIMD.
#[derive(Clone, Copy)]
struct AsciiClass {
    fold: u8,
    low: u8,
    span: u8,
}

impl AsciiClass {
    #[inline(always)]
    fn has(self, b: u8) -> bool {
        (b | self.fold).wrapping_sub(self.low) <= self.span
    }
}

/// `[A-Za-z]`: with bit 5 set, capitals are small letters; bytes >= 0x80 and the
/// ASCII bytes between the two cases land outside.
const LETTERS: AsciiClass = AsciiClass {
    fold: 0x20,
    low: b'a',
    span: 25,
};
const CAPITALS: AsciiClass = AsciiClass {
    fold: 0,
    low: b'A',
    span: 25,
};
const SMALL: AsciiClass = AsciiClass {
    fold: 0,
    low: b'a',
    span: 25,
};

/// Which built-in pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    Gpt2,
    Cl100k,
    O200k,
    /// cl100k's rules but for `\s++$` ([`LLAMA3_PATTERN`]).
    Llama3,
    /// Llama 3's, one digit a piece ([`QWEN2_PATTERN`]).
    Qwen2,
    /// Qwen2's, with marks as letters ([`QWEN3_5_PATTERN`]).
    Qwen35,
    /// o200k's with no contractions, one digit a piece ([`TEKKEN_PATTERN`]).
    Tekken,
}

/// Class bits of every code point, from regex-syntax's tables (built once, 1.1 MB).
fn table() -> &'static [u8] {
    static TABLE: OnceLock<Vec<u8>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = vec![0u8; 0x110000];
        for (class, bits) in [
            (r"[\p{Lu}\p{Lt}]", UPPER),
            (r"\p{Ll}", LOWER),
            (r"[\p{Lm}\p{Lo}]", MODIFIER_OR_OTHER),
            (r"\p{M}", MARK),
            (r"\p{N}", NUM),
            (r"\s", WS),
        ] {
            let hir = regex_syntax::parse(class).expect("valid class");
            let HirKind::Class(Class::Unicode(ranges)) = hir.kind() else {
                unreachable!("{class} is a Unicode class")
            };
            for r in ranges.ranges() {
                for class_bits in &mut t[r.start() as usize..=r.end() as usize] {
                    *class_bits |= bits;
                }
            }
        }
        t
    })
}

/// A cursor over the text's characters with their class bits.
struct Chars<'a> {
    text: &'a [u8],
    table: &'static [u8],
    /// The instructions runs and classes are found with ([`Simd::detected`]).
    simd: Simd,
}

impl Chars<'_> {
    /// (class bits, char, byte length) of the character at `i`, or None at the end.
    #[inline(always)]
    fn at(&self, i: usize) -> Option<(u8, char, usize)> {
        let b = *self.text.get(i)?;
        if b < 0x80 {
            return Some((self.table[b as usize], b as char, 1));
        }
        // `text` came from a &str and `i` is a char boundary, so the lead byte gives
        // the length and its continuation bytes follow. Decoded here rather than by
        // `str::chars`, which also works out the length again from the code point:
        // two more branches a character on every non-ASCII character the windows
        // leave to this path (Thai, Devanagari, Chinese under o200k).
        let n = blocks::utf8_len(b);
        let cp = blocks::code_point(self.text, i, n);
        let class = self.table[cp as usize];
        // SAFETY: the bytes at `i` are one character of valid UTF-8 (see above), whose
        // code point is a char's.
        let c = unsafe { char::from_u32_unchecked(cp) };
        Some((class, c, n))
    }

    /// End of the run of characters whose class bits intersect `mask`, from `i`.
    #[inline(always)]
    fn run(&self, mut i: usize, mask: u8) -> usize {
        while let Some((cls, _, n)) = self.at(i) {
            if cls & mask == 0 {
                break;
            }
            i += n;
        }
        i
    }

    /// End of the run of characters for which `pred(class, char)` holds.
    #[inline(always)]
    fn run_by(&self, mut i: usize, pred: impl Fn(u8, char) -> bool) -> usize {
        while let Some((cls, c, n)) = self.at(i) {
            if !pred(cls, c) {
                break;
            }
            i += n;
        }
        i
    }

    /// End of the run of letters (`\p{L}`) from `i`: ASCII letters 16 bytes at a time
    /// ([`Chars::ascii_run`]), then, at a non-ASCII byte, character by character.
    #[inline(always)]
    fn letters(&self, i: usize) -> usize {
        self.letters_of(i, LETTER)
    }

    /// [`Chars::letters`] of the class `letter` (`\p{L}`, or Qwen3.5's `[\p{L}\p{M}]`).
    #[inline(always)]
    fn letters_of(&self, i: usize, letter: u8) -> usize {
        let k = self.ascii_run(i, LETTERS);
        if self.byte(k).is_some_and(|b| b >= 0x80) {
            self.run(k, letter)
        } else {
            k
        }
    }

    /// End of the run of ASCII bytes of `class` from `i`: 16 bytes at a time with
    /// SSE2 (every x86_64 CPU has it), whose mask's first zero is where the run stops,
    /// with no branch per byte to mispredict at the end of each word; else byte by
    /// byte (`BYTEPAIR_SCALAR`, other CPUs).
    #[inline(always)]
    fn ascii_run(&self, i: usize, class: AsciiClass) -> usize {
        #[cfg(target_arch = "x86_64")]
        if self.simd != Simd::Scalar {
            return self.ascii_run_sse2(i, class);
        }
        self.ascii_run_scalar(i, class)
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn ascii_run_sse2(&self, mut i: usize, class: AsciiClass) -> usize {
        use std::arch::x86_64::*;
        let AsciiClass { fold, low, span } = class;
        while i + 16 <= self.text.len() {
            // SAFETY: the 16 bytes at `i` are inside `text` (checked above); SSE2 is
            // part of x86_64.
            let stops = unsafe {
                let v = _mm_loadu_si128(self.text.as_ptr().add(i).cast::<__m128i>());
                // (b | fold) - low <= span, as unsigned bytes: `AsciiClass::has`.
                let x = _mm_sub_epi8(
                    _mm_or_si128(v, _mm_set1_epi8(fold as i8)),
                    _mm_set1_epi8(low as i8),
                );
                let inside = _mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(span as i8)), x);
                !(_mm_movemask_epi8(inside) as u32) & 0xFFFF
            };
            if stops != 0 {
                return i + stops.trailing_zeros() as usize;
            }
            i += 16;
        }
        self.ascii_run_scalar(i, class)
    }

    /// [`Chars::ascii_run`] a byte at a time: the scalar path, and every CPU's.
    #[inline(always)]
    fn ascii_run_scalar(&self, mut i: usize, class: AsciiClass) -> usize {
        while self.byte(i).is_some_and(|b| class.has(b)) {
            i += 1;
        }
        i
    }

    /// The commonest pieces, first: an ASCII letter, or a space and an ASCII letter,
    /// starts a piece that is the run of letters of the class `letter`
    /// (`[^\r\n\p{L}\p{N}]?+\p{L}++` of cl100k, ` ?\p{L}++` of gpt2, Qwen3.5's
    /// `[\p{L}\p{M}]+` words; none can be a contraction, which starts with `'`).
    /// Where the piece ends, or None for every other start.
    #[inline(always)]
    fn ascii_word(&self, i: usize, letter: u8) -> Option<usize> {
        self.ascii_word_start(i).map(|p| self.letters_of(p, letter))
    }

    /// Where the letters of a word starting at `i` start: at `i` for an ASCII letter,
    /// after it for a space before one; None for every other start.
    #[inline(always)]
    fn ascii_word_start(&self, i: usize) -> Option<usize> {
        let b = self.text[i];
        if b.is_ascii_alphabetic() {
            Some(i)
        } else if b == b' ' && self.byte(i + 1).is_some_and(|c| c.is_ascii_alphabetic()) {
            Some(i + 1)
        } else {
            None
        }
    }

    /// [`Chars::ascii_word`] for o200k, whose words split where case changes
    /// (`[^\r\n\p{L}\p{N}]?` `[\p{Lu}..]*[\p{Ll}..]+` or `[\p{Lu}..]+[\p{Ll}..]*`, then a
    /// contraction): an optional space, ASCII capitals, then ASCII small letters.
    /// None (the general code decides) when the word goes on into non-ASCII text or
    /// a `'` follows it.
    #[inline(always)]
    fn ascii_word_o200k(&self, i: usize) -> Option<usize> {
        let p = self.ascii_word_start(i)?;
        let q = self.ascii_run(p, CAPITALS);
        let end = match self.byte(q) {
            Some(c) if c.is_ascii_lowercase() => self.ascii_run(q, SMALL),
            _ => q,
        };
        match self.byte(end) {
            Some(c) if c >= 0x80 || c == b'\'' => None,
            _ => Some(end),
        }
    }

    #[inline(always)]
    fn is(&self, i: usize, mask: u8) -> bool {
        matches!(self.at(i), Some((cls, _, _)) if cls & mask != 0)
    }

    #[inline(always)]
    fn byte(&self, i: usize) -> Option<u8> {
        self.text.get(i).copied()
    }

    fn len(&self) -> usize {
        self.text.len()
    }
}

/// Not whitespace, not a letter, not a number: `[^\s\p{L}\p{N}]`.
#[inline(always)]
fn is_other(cls: u8) -> bool {
    is_other_of(cls, LETTER)
}

/// Neither whitespace, a number, nor of the class `letter`.
#[inline(always)]
fn is_other_of(cls: u8, letter: u8) -> bool {
    cls & (WS | letter | NUM) == 0
}

/// `ſ`, the one non-ASCII letter a contraction's `(?i:...)` matches: it folds to `s`
/// (`K` U+212A folds to `k`, which no contraction has).
const LONG_S: char = '\u{17F}';

/// `(?i:...)` letters: ASCII either case, plus the Unicode simple case folds the regex
/// engine also accepts ([`LONG_S`]).
fn ci(c: Option<char>, lower: char) -> bool {
    match c {
        Some(c) => c.to_ascii_lowercase() == lower || (lower == 's' && c == LONG_S),
        None => false,
    }
}

impl Chars<'_> {
    /// End of `\p{N}{1,N}` from `i` (a number character): `\p{N}{1,3}`, or `\p{N}`.
    fn up_to_digits<const N: usize>(&self, mut i: usize) -> usize {
        for _ in 0..N {
            match self.at(i) {
                Some((k, _, m)) if k & NUM != 0 => i += m,
                _ => break,
            }
        }
        i
    }

    fn char_at(&self, i: usize) -> Option<char> {
        self.at(i).map(|(_, c, _)| c)
    }

    /// Length of a contraction at `i`: `'(?:[sdmt]|ll|ve|re)`, case-insensitive or not.
    #[inline(always)]
    fn contraction(&self, i: usize, case_insensitive: bool) -> Option<usize> {
        if self.byte(i) != Some(b'\'') {
            return None;
        }
        self.contraction_after_quote(i, case_insensitive)
    }

    fn contraction_after_quote(&self, i: usize, case_insensitive: bool) -> Option<usize> {
        let eq = |j: usize, ch: char| {
            if case_insensitive {
                ci(self.char_at(j), ch)
            } else {
                self.byte(j) == Some(ch as u8)
            }
        };
        let width = |j: usize| self.at(j).map_or(0, |(_, _, n)| n);
        let a = i + 1;
        if eq(a, 's') || eq(a, 'd') || eq(a, 'm') || eq(a, 't') {
            return Some(1 + width(a));
        }
        for (x, y) in [('l', 'l'), ('v', 'e'), ('r', 'e')] {
            if eq(a, x) && eq(a + width(a), y) {
                return Some(1 + width(a) + width(a + width(a)));
            }
        }
        None
    }

    /// The whitespace run from `i` (a whitespace char) and the `\s+(?!\S)` / `\s` tail:
    /// the run to the end of text, or all but its last char, or (length 1) that char.
    fn whitespace_tail(&self, i: usize, run_end: usize) -> usize {
        if run_end == self.len() {
            return run_end; // \s++$ (or \s+(?!\S) at the end)
        }
        let last = self.last_char_start(i, run_end);
        if last > i {
            last // \s+(?!\S): leave the last space to the next piece
        } else {
            run_end // \s
        }
    }

    /// Start of the last character in `[i, end)`.
    fn last_char_start(&self, i: usize, end: usize) -> usize {
        let mut k = end - 1;
        while k > i && (self.text[k] & 0xC0) == 0x80 {
            k -= 1;
        }
        k
    }

    /// End of the last `\r` or `\n` in `[i, end)`, if any.
    fn last_newline_end(&self, i: usize, end: usize) -> Option<usize> {
        self.text[i..end]
            .iter()
            .rposition(|&b| b == b'\r' || b == b'\n')
            .map(|k| i + k + 1)
    }
}

/// gpt2 / r50k / p50k:
/// `'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s`
fn gpt2_piece_end(t: &Chars, i: usize) -> usize {
    if let Some(end) = t.ascii_word(i, LETTER) {
        return end;
    }
    if let Some(n) = t.contraction(i, false) {
        return i + n;
    }
    let (cls, c, _) = t.at(i).expect("i < len");
    // ` ?X++` for X in L, N, other: an optional space, then a run of one class.
    let (start, head) = if c == ' ' {
        match t.at(i + 1) {
            Some((next, _, _)) if next & WS == 0 => (i + 1, next),
            _ => (i, cls),
        }
    } else {
        (i, cls)
    };
    if head & WS == 0 {
        return if head & LETTER != 0 {
            t.letters(start)
        } else if head & NUM != 0 {
            t.run(start, NUM)
        } else {
            t.run_by(start, |cls, _| is_other(cls))
        };
    }
    t.whitespace_tail(i, t.run(i, WS))
}

/// gpt2's windows ([`PieceWalker::fill_by_blocks`]): its non-ASCII letters, numbers
/// and others classified too, from their code points' class bits
/// ([`blocks::Masks::with_chars`]); non-ASCII whitespace is left to [`gpt2_piece_end`].
#[inline(always)]
fn gpt2_window(window: &[u8; 64], masks: blocks::Masks, table: &[u8]) -> blocks::Masks {
    masks.with_chars(window, |cp| {
        let cls = table[cp as usize];
        if cls & WS != 0 {
            None
        } else if cls & LETTER != 0 {
            Some(CharClass::Letter)
        } else if cls & NUM != 0 {
            Some(CharClass::Number)
        } else {
            Some(CharClass::Other)
        }
    })
}

/// cl100k's windows: its non-ASCII letters classified too; any other non-ASCII
/// character stops the masks (a number: `\p{N}{1,3}` counts characters, the masks
/// count bytes; an other: it may be the one character before letters, of two to
/// four bytes). So does [`LONG_S`]: `'ſ` is a contraction.
#[inline(always)]
fn cl100k_window(window: &[u8; 64], masks: blocks::Masks, table: &[u8]) -> blocks::Masks {
    masks.with_chars(window, |cp| {
        (cp != LONG_S as u32 && table[cp as usize] & LETTER != 0).then_some(CharClass::Letter)
    })
}

/// o200k's windows: its non-ASCII capitals (`\p{Lu}`, `\p{Lt}`) and small letters
/// (`\p{Ll}`, but [`LONG_S`], as in cl100k) classified too, which its words take as
/// they take ASCII ones; any other non-ASCII character stops the masks (`\p{Lm}`,
/// `\p{Lo}` and `\p{M}` are in both of a word's parts, which only the regex's
/// backtracking sorts out).
#[inline(always)]
fn o200k_window(window: &[u8; 64], masks: blocks::Masks, table: &[u8]) -> blocks::Masks {
    masks.with_chars(window, |cp| {
        let cls = table[cp as usize];
        if cls & UPPER != 0 {
            Some(CharClass::Upper)
        } else if cls & LOWER != 0 && cp != LONG_S as u32 {
            Some(CharClass::Letter)
        } else {
            None
        }
    })
}

/// cl100k_base:
/// `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s`
///
/// and its variants: without `WHOLE_TAIL` (`\s++$`), Llama 3's pattern, which ends
/// with `\s*[\r\n]+|\s+(?!\S)|\s+` (a run of whitespace at the end of the text
/// is cut after its last \r or \n, as inside the text; its quantifiers are not
/// possessive, but no alternative gives anything back to what follows it); with
/// `DIGITS` 1 too, Qwen2's (`\p{N}`); with `MARKS` too, Qwen3.5's, whose words are
/// `[\p{L}\p{M}]+` and whose others `[^\s\p{L}\p{M}\p{N}]` (a mark before letters
/// is a prefix or a letter of the word: the same piece either way).
fn cl100k_piece_end<const WHOLE_TAIL: bool, const DIGITS: usize, const MARKS: bool>(
    t: &Chars,
    i: usize,
) -> usize {
    let letter = if MARKS { LETTER | MARK } else { LETTER };
    if let Some(end) = t.ascii_word(i, letter) {
        return end;
    }
    if let Some(n) = t.contraction(i, true) {
        return i + n;
    }
    let (cls, c, n) = t.at(i).expect("i < len");
    // [^\r\n\p{L}\p{N}]?+\p{L}++ (the prefix is possessive: taken if it can be)
    if cls & letter != 0 {
        return t.letters_of(i, letter);
    }
    if cls & NUM == 0 && c != '\r' && c != '\n' && t.is(i + n, letter) {
        return t.letters_of(i + n, letter);
    }
    // \p{N}{1,3}+ (\p{N})
    if cls & NUM != 0 {
        return t.up_to_digits::<DIGITS>(i);
    }
    //  ?[^\s\p{L}\p{N}]++[\r\n]*+
    let start = if c == ' ' { i + 1 } else { i };
    if matches!(t.at(start), Some((k, _, _)) if is_other_of(k, letter)) {
        let j = t.run_by(start, |k, _| is_other_of(k, letter));
        return t.run_by(j, |_, ch| ch == '\r' || ch == '\n');
    }
    // whitespace: \s++$ | \s*[\r\n] | \s+(?!\S) | \s
    let run_end = t.run(i, WS);
    if WHOLE_TAIL && run_end == t.len() {
        return run_end;
    }
    if let Some(end) = t.last_newline_end(i, run_end) {
        return end;
    }
    t.whitespace_tail(i, run_end)
}

/// o200k_base:
/// `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
/// `|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
/// `|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
///
/// and Tekken's: without `CONTRACTIONS` (the `(?i:'s|...)?` after a word) and with
/// `DIGITS` 1 (`\p{N}`).
fn o200k_piece_end<const CONTRACTIONS: bool, const DIGITS: usize>(t: &Chars, i: usize) -> usize {
    const U: u8 = UPPER | MODIFIER_OR_OTHER | MARK; // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
    const W: u8 = LOWER | MODIFIER_OR_OTHER | MARK; // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
    if let Some(end) = t.ascii_word_o200k(i) {
        return end;
    }
    let (cls, c, n) = t.at(i).expect("i < len");
    let can_prefix = cls & (LETTER | NUM) == 0 && c != '\r' && c != '\n';
    let suffix = |e: usize| {
        if CONTRACTIONS {
            e + t.contraction(e, true).unwrap_or(0)
        } else {
            e
        }
    };
    // First alternative, with the prefix and then without it (the `?` is greedy).
    let starts: &[usize] = if can_prefix { &[i + n, i] } else { &[i] };
    for &p in starts {
        // U* is greedy: it takes the whole run, then gives back characters until W+
        // can match. W+ then runs as far as it can.
        let q = t.run(p, U);
        if t.is(q, LOWER) {
            return suffix(t.run(q, W));
        }
        // Backtrack into the U run: the last character in [p, q) that is also W.
        let mut k = q;
        while k > p {
            let s = t.last_char_start(p, k);
            if t.is(s, W) {
                // W+ takes this character; the next one is Lu/Lt (or ends the U run and
                // is not W), so the match ends right after it.
                return suffix(k);
            }
            k = s;
        }
    }
    // Second alternative: U+ then W*.
    for &p in starts {
        let q = t.run(p, U);
        if q > p {
            return suffix(t.run(q, W));
        }
    }
    // \p{N}{1,3} (\p{N})
    if cls & NUM != 0 {
        return t.up_to_digits::<DIGITS>(i);
    }
    //  ?[^\s\p{L}\p{N}]+[\r\n/]*
    let start = if c == ' ' { i + 1 } else { i };
    if matches!(t.at(start), Some((k, _, _)) if is_other(k)) {
        let j = t.run_by(start, |k, _| is_other(k));
        return t.run_by(j, |_, ch| ch == '\r' || ch == '\n' || ch == '/');
    }
    // \s*[\r\n]+ | \s+(?!\S) | \s+
    let run_end = t.run(i, WS);
    if let Some(end) = t.last_newline_end(i, run_end) {
        return end;
    }
    if run_end == t.len() {
        return run_end;
    }
    let last = t.last_char_start(i, run_end);
    if last > i {
        last
    } else {
        run_end
    }
}

impl Builtin {
    /// Every built-in pattern, with its regex.
    pub const ALL: [(Builtin, &'static str); 7] = [
        (Builtin::Gpt2, GPT2_PATTERN),
        (Builtin::Cl100k, CL100K_PATTERN),
        (Builtin::O200k, O200K_PATTERN),
        (Builtin::Llama3, LLAMA3_PATTERN),
        (Builtin::Qwen2, QWEN2_PATTERN),
        (Builtin::Qwen35, QWEN3_5_PATTERN),
        (Builtin::Tekken, TEKKEN_PATTERN),
    ];

    /// The built-in pattern this regex string is, if any.
    pub fn from_pattern(pattern: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .find(|(_, p)| *p == pattern)
            .map(|&(b, _)| b)
    }

    /// A walker over the pieces of `text` from byte `from` (a char boundary where a
    /// piece starts), which hands them out a batch at a time ([`PieceWalker::fill`]).
    pub fn walker(self, text: &str, from: usize) -> PieceWalker<'_> {
        self.walker_with(text, from, Simd::detected())
    }

    /// [`Builtin::walker`], with the instructions of `simd`, which this CPU must have:
    /// [`Simd::detected`], or in tests a level checked [`Simd::available`].
    fn walker_with(self, text: &str, from: usize, simd: Simd) -> PieceWalker<'_> {
        debug_assert!(simd.available(), "{simd:?} is not on this CPU");
        PieceWalker {
            builtin: self,
            chars: Chars {
                text: text.as_bytes(),
                table: table(),
                simd,
            },
            pos: from,
        }
    }

    /// Calls `f(start, end)` for every piece of `text`.
    pub fn for_each_piece(self, text: &str, f: impl FnMut(usize, usize)) {
        self.walker(text, 0).for_each_piece(&mut [0; 64], f);
    }
}

/// Piece starts one 64-byte window can add at once: a buffer given to
/// [`PieceWalker::next_batch`] holds this many more than the batch it asks for.
pub const WINDOW_STARTS: usize = 64;

/// The pieces of a text a batch at a time: the first phase of the encoder's loop
/// (piece ends, then keys and prefetches, then lookups), with no call per piece.
pub struct PieceWalker<'a> {
    builtin: Builtin,
    chars: Chars<'a>,
    pos: usize,
}

impl PieceWalker<'_> {
    /// The next batch of pieces: where the first starts, and how many ends the
    /// walker wrote into `ends`: at least `ends.len() - WINDOW_STARTS` but at the end
    /// of the text (a buffer of [`WINDOW_STARTS`] more than the batch leaves room for
    /// a window's starts at once); None at the end of the text.
    pub fn next_batch(&mut self, ends: &mut [usize]) -> Option<(usize, usize)> {
        let first = self.pos;
        let n = self.fill_to(ends, ends.len().saturating_sub(WINDOW_STARTS).max(1));
        (n > 0).then_some((first, n))
    }

    /// Writes the ends of the next pieces into `ends`, as many as fit; returns how
    /// many (0 at the end of the text).
    pub fn fill(&mut self, ends: &mut [usize]) -> usize {
        self.fill_to(ends, ends.len())
    }

    /// Writes the ends of the next pieces into `ends` until there are `stop` or more
    /// (at most `ends.len()`); returns how many (fewer only at the end of the text).
    fn fill_to(&mut self, ends: &mut [usize], stop: usize) -> usize {
        debug_assert!(stop <= ends.len());
        match self.chars.simd {
            Simd::Scalar => self.fill_with::<blocks::Scalar>(ends, stop),
            #[cfg(target_arch = "x86_64")]
            Simd::Sse2 => self.fill_with::<blocks::Sse2>(ends, stop),
            // SAFETY: a walker's level is one this CPU has (see `walker_with`).
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 => unsafe { self.fill_avx2(ends, stop) },
            #[cfg(not(target_arch = "x86_64"))]
            _ => self.fill_with::<blocks::Scalar>(ends, stop),
        }
    }

    /// [`PieceWalker::fill`] compiled for AVX2 (and the bit scans of BMI1/BMI2/LZCNT):
    /// the classes 32 bytes at a time, and one instruction for each bit scan.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
    fn fill_avx2(&mut self, ends: &mut [usize], stop: usize) -> usize {
        self.fill_with::<blocks::Avx2>(ends, stop)
    }

    #[inline(always)]
    fn fill_with<C: blocks::Classify>(&mut self, ends: &mut [usize], stop: usize) -> usize {
        // One arm a pattern, so that each inlines its own functions.
        match self.builtin {
            Builtin::Gpt2 => self.fill_by_blocks::<C>(
                ends,
                stop,
                gpt2_window,
                blocks::gpt2_starts,
                gpt2_piece_end,
            ),
            Builtin::Cl100k => self.fill_by_blocks::<C>(
                ends,
                stop,
                cl100k_window,
                blocks::cl100k_starts::<3>,
                cl100k_piece_end::<true, 3, false>,
            ),
            Builtin::O200k => self.fill_by_blocks::<C>(
                ends,
                stop,
                o200k_window,
                blocks::o200k_starts::<true, 3>,
                o200k_piece_end::<true, 3>,
            ),
            // The windows decide no start in the run of whitespace a text ends with
            // (a run holding a window's last byte may go on), the one place Llama
            // 3's pattern splits otherwise than cl100k's.
            Builtin::Llama3 => self.fill_by_blocks::<C>(
                ends,
                stop,
                cl100k_window,
                blocks::cl100k_starts::<3>,
                cl100k_piece_end::<false, 3, false>,
            ),
            Builtin::Qwen2 => self.fill_by_blocks::<C>(
                ends,
                stop,
                cl100k_window,
                blocks::cl100k_starts::<1>,
                cl100k_piece_end::<false, 1, false>,
            ),
            // Its windows stop at a mark, as cl100k's do at any non-ASCII character but
            // a letter: a mark is a letter of its words, and the run of letters it is in
            // is then decided a piece at a time.
            Builtin::Qwen35 => self.fill_by_blocks::<C>(
                ends,
                stop,
                cl100k_window,
                blocks::cl100k_starts::<1>,
                cl100k_piece_end::<false, 1, true>,
            ),
            Builtin::Tekken => self.fill_by_blocks::<C>(
                ends,
                stop,
                o200k_window,
                blocks::o200k_starts::<false, 1>,
                o200k_piece_end::<false, 1>,
            ),
        }
    }

    /// [`PieceWalker::fill`] 64 bytes at a time ([`blocks`]): the starts the next 64
    /// bytes decide, as bits, with no branch per piece (on English text, twice as
    /// fast as a piece at a time, whose branch on each piece's kind mispredicts).
    /// `window_masks` says how far the masks of each window hold ([`gpt2_window`],
    /// [`cl100k_window`], [`o200k_window`]). A piece at a time where windows decide
    /// little: from the first byte the masks do not classify until past it (for 64
    /// bytes when a window starts with one), through a window that decides nothing
    /// (a word of 60 letters), and in the text's last 64 bytes.
    #[inline(always)]
    fn fill_by_blocks<C: blocks::Classify>(
        &mut self,
        ends: &mut [usize],
        stop: usize,
        window_masks: fn(&[u8; 64], blocks::Masks, &[u8]) -> blocks::Masks,
        starts_of: fn(&[u8; 64], &blocks::Masks) -> u64,
        piece_end: fn(&Chars, usize) -> usize,
    ) -> usize {
        let text = self.chars.text;
        let table = self.chars.table;
        let len = text.len();
        let mut n = 0;
        let mut i = self.pos;
        while n < stop && i < len {
            // Where pieces are found one at a time up to: the text's last 64 bytes.
            let mut scalar_to = len;
            if i + 64 <= len {
                let at = i;
                let window: &[u8; 64] = text[at..at + 64].try_into().expect("64 bytes");
                let masks = window_masks(window, C::classify(window), table);
                let mut starts = starts_of(window, &masks);
                if let Some(room) = ends.get_mut(n..n + WINDOW_STARTS) {
                    // Room for every start of the window: written eight at a time,
                    // past the last one too (a start of `at + 64` where no bit is
                    // left; overwritten or never read), so that the loop's exit
                    // depends on the count in eights, not on each start.
                    let count = starts.count_ones() as usize;
                    let mut k = 0;
                    while k < count {
                        for end in &mut room[k..k + 8] {
                            *end = at + starts.trailing_zeros() as usize;
                            starts &= starts.wrapping_sub(1);
                        }
                        k += 8;
                    }
                    if count > 0 {
                        n += count;
                        i = ends[n - 1];
                    }
                } else {
                    while starts != 0 && n < ends.len() {
                        i = at + starts.trailing_zeros() as usize;
                        ends[n] = i;
                        n += 1;
                        starts &= starts - 1;
                    }
                }
                if masks.all_known() {
                    if i > at {
                        continue;
                    }
                    // Nothing decided (a word of 60 letters): the rest of these 64
                    // bytes.
                    scalar_to = at + 64;
                } else {
                    // A byte ahead the masks do not classify (in English, a curly
                    // quote; for gpt2, non-ASCII whitespace): a piece at a time only
                    // until past it, then windows again. (The rest of the window a
                    // piece at a time where few ASCII bytes come first, as in Cyrillic
                    // text after a space under cl100k before its windows classified
                    // letters, measured no better there: fewer instructions, more
                    // mispredicts.) Where the window's first byte is one (Chinese text
                    // under cl100k), its 64 bytes a piece at a time.
                    scalar_to = match masks.known_len() {
                        0 => at + 64,
                        known => at + known + 1,
                    };
                }
            }
            while n < stop && i < scalar_to {
                i = piece_end(&self.chars, i);
                ends[n] = i;
                n += 1;
            }
        }
        self.pos = i;
        n
    }

    /// Calls `f(start, end)` for every piece left, found `ends.len()` at a time.
    fn for_each_piece(mut self, ends: &mut [usize], mut f: impl FnMut(usize, usize)) {
        let mut start = self.pos;
        loop {
            let n = self.fill(ends);
            if n == 0 {
                return;
            }
            for &end in &ends[..n] {
                f(start, end);
                start = end;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pretok::PreTokenizer;

    /// Characters of every class the patterns distinguish, and the ones they name.
    const ALPHABET: &[&str] = &[
        "a", "b", "s", "t", "d", "m", "l", "v", "e", "r", "S", "T", "L", "V", "E", "R", "D", "M",
        "A", "Z", "\u{1C5}", "\u{2B0}", "中", "ก", "\u{301}", "\u{E31}", "é", "ß", "ſ", "\u{212A}",
        "1", "7", "²", "٣", "Ⅻ", " ", " ", " ", "\t", "\n", "\n", "\r", "\u{A0}", "\u{3000}",
        "\u{2028}", "\u{85}", "\u{1C}", "'", "'", ".", ",", "/", "!", "-", "😀", "\u{200D}", "_",
    ];

    fn regex_pieces(pre: &PreTokenizer, text: &str) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        pre.for_each_piece(text, |s, e| out.push((s, e))).unwrap();
        out
    }

    /// A xorshift generator from `state`: random text, the same on every run.
    fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }

    /// `Chars::at` decodes every character (after one ASCII byte and alone, where a
    /// text ends) to its class, itself and its length, as `str::chars` does. A
    /// character decoded wrong may keep its class (the pieces tests then pass), so
    /// every code point is checked here.
    #[test]
    fn every_character_decodes_to_its_class_and_length() {
        let table = table();
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            let text = format!("a{c}");
            let chars = Chars {
                text: text.as_bytes(),
                table,
                simd: Simd::Scalar,
            };
            let want = Some((table[c as usize], c, c.len_utf8()));
            assert_eq!(chars.at(1), want, "{c:?}");
            let alone = Chars {
                text: &text.as_bytes()[1..],
                ..chars
            };
            assert_eq!(alone.at(0), want, "{c:?}");
            assert_eq!(alone.at(c.len_utf8()), None);
        }
    }

    /// The pieces, found with SIMD instructions and without (both must agree), in
    /// batches of a few (so that batches end everywhere).
    fn builtin_pieces(b: Builtin, text: &str) -> Vec<(usize, usize)> {
        let walk = |simd: Simd, batch: usize| {
            let mut out = Vec::new();
            let walker = b.walker_with(text, 0, simd);
            walker.for_each_piece(&mut vec![0; batch], |s, e| out.push((s, e)));
            out
        };
        // Batches as the encoder and the counter ask for them: `next_batch` with
        // room for a window's starts at once (written eight at a time).
        let batches = |simd: Simd, room: usize| {
            let mut out = Vec::new();
            let mut walker = b.walker_with(text, 0, simd);
            let mut ends = vec![0; room];
            while let Some((mut start, n)) = walker.next_batch(&mut ends) {
                assert!(n >= room.saturating_sub(WINDOW_STARTS).max(1) || walker.pos == text.len());
                for &end in &ends[..n] {
                    out.push((start, end));
                    start = end;
                }
            }
            out
        };
        let scalar = walk(Simd::Scalar, 3);
        for level in Simd::ALL.iter().filter(|l| l.available()) {
            for (how, got) in [
                ("one a batch", walk(*level, 1)),
                ("200 a batch", walk(*level, 200)),
                ("next_batch, 64 + 64", batches(*level, 64 + WINDOW_STARTS)),
                ("next_batch, 5 + 64", batches(*level, 5 + WINDOW_STARTS)),
            ] {
                assert_eq!(
                    got, scalar,
                    "{b:?}: {level:?} ({how}) and scalar differ on {text:?}"
                );
            }
        }
        let mut whole = Vec::new();
        b.for_each_piece(text, |s, e| whole.push((s, e)));
        assert_eq!(
            whole, scalar,
            "{b:?}: batches of 64 and of 3 differ on {text:?}"
        );
        scalar
    }

    #[test]
    fn builtin_splits_equal_the_regex_on_random_text() {
        let mut next = xorshift(0x9E3779B97F4A7C15);
        for (b, pattern) in Builtin::ALL {
            let pre = PreTokenizer::regex_only(Some(pattern)).unwrap();
            for _ in 0..20_000 {
                let len = (next() % 24) as usize;
                let text: String = (0..len)
                    .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize])
                    .collect();
                assert_eq!(
                    builtin_pieces(b, &text),
                    regex_pieces(&pre, &text),
                    "{b:?} on {text:?}"
                );
            }
        }
    }

    /// Long texts, mostly ASCII: runs of letters longer than the 16 bytes the SIMD
    /// path reads at once, non-ASCII letters and other characters inside them and at
    /// every distance from a run's start and the text's end.
    #[test]
    fn long_runs_split_as_the_regex_does_with_simd_and_without() {
        let mut next = xorshift(0x2545F4914F6CDD1D);
        const RARE: &[&str] = &[
            "é", "中", "\u{301}", " ", "'", "s", "\n", "1", ".", "@", "[", "`", "{", "_", "\u{A0}",
            "Z", "ſ", "\r",
        ];
        for (b, pattern) in Builtin::ALL {
            let pre = PreTokenizer::regex_only(Some(pattern)).unwrap();
            for _ in 0..6_000 {
                let len = (next() % 160) as usize;
                let text: String = (0..len)
                    .map(|_| match next() % 10 {
                        0 => RARE[(next() % RARE.len() as u64) as usize].to_string(),
                        1 => " ".to_string(),
                        2 => char::from(b'A' + (next() % 26) as u8).to_string(),
                        _ => char::from(b'a' + (next() % 26) as u8).to_string(),
                    })
                    .collect();
                assert_eq!(
                    builtin_pieces(b, &text),
                    regex_pieces(&pre, &text),
                    "{b:?} on {text:?}"
                );
            }
        }
    }

    /// `rounds` texts a built-in pattern, of 64 to 400 bytes of `parts` drawn by
    /// `next` (of its ASCII parts alone in one round of every `ascii_every`), each
    /// split at every SIMD level as the regex engine splits it.
    fn parts_split_as_the_regex_does(
        next: &mut impl FnMut() -> u64,
        parts: &[&str],
        rounds: usize,
        ascii_every: Option<usize>,
    ) {
        for (b, pattern) in Builtin::ALL {
            let pre = PreTokenizer::regex_only(Some(pattern)).unwrap();
            for round in 0..rounds {
                let target = 64 + (next() % 337) as usize;
                let ascii_only = ascii_every.is_some_and(|k| round % k == 0);
                let mut text = String::new();
                while text.len() < target {
                    let part = parts[(next() % parts.len() as u64) as usize];
                    if !ascii_only || part.is_ascii() {
                        text.push_str(part);
                    }
                }
                assert_eq!(
                    builtin_pieces(b, &text),
                    regex_pieces(&pre, &text),
                    "{b:?} on {text:?}"
                );
            }
        }
    }

    /// Texts of 64 to 400 bytes, nearly all ASCII, that the block walker decides 64
    /// bytes at a time ([`blocks`]): every ASCII class the patterns tell apart,
    /// contractions of both cases, runs of digits, of whitespace with \r and \n
    /// inside, of others before letters and newlines, and a non-ASCII character now
    /// and then, at every place in a window.
    #[test]
    fn ascii_blocks_split_as_the_regex_does() {
        let mut next = xorshift(0x5851_F42D_4C95_7F2D);
        const PARTS: &[&str] = &[
            "a",
            "the",
            "Word",
            "s",
            "t",
            "ll",
            "ve",
            "re",
            "LL",
            "D",
            "'",
            "'",
            "'s",
            "'LL",
            "camelCase",
            "HTMLParser",
            "lL",
            "/",
            "//",
            ".\n/",
            "'m",
            "'Re",
            "'ve",
            "'x",
            " ",
            " ",
            " ",
            "  ",
            "\t",
            "\n",
            "\r\n",
            "\n\n",
            " \n ",
            "\x0B",
            "\x0C",
            "1",
            "12",
            "1234567",
            ".",
            ",",
            "(",
            "\"",
            "--",
            "...",
            "!?",
            "\0",
            "\x1C",
            "\x1F",
            "\x7F",
            "_",
            "é",
            "\u{A0}",
            "中",
            "\u{2019}",
            "ſ",
        ];
        // Some texts without non-ASCII at all, so that whole windows are ASCII.
        parts_split_as_the_regex_does(&mut next, PARTS, 20_000, Some(3));
    }

    /// Texts of 64 to 400 bytes of words in many scripts, which the built-in patterns'
    /// windows classify a character at a time ([`blocks::Masks::with_chars`]):
    /// letters of two, three and four bytes, marks inside and after words, non-ASCII
    /// numbers, symbols and punctuation, non-ASCII whitespace (which stops gpt2's
    /// masks; cl100k's stop at any of these, o200k's at all but capitals and small
    /// letters), `ſ` after `'` (their contraction), capitals and small letters in
    /// every order (o200k's words), and characters cut by a window's end, at every
    /// place in a window.
    #[test]
    fn multilingual_blocks_split_as_the_regex_does() {
        let mut next = xorshift(0x1405_7B7E_F767_814F);
        const PARTS: &[&str] = &[
            "слово",
            "Москва",
            "ёж",
            "αβγ",
            "Ωμέγα",
            "für",
            "Straße",
            "×",
            "÷",
            "ça",
            "ñ",
            "中文",
            "一个",
            "日本語",
            "ひらがな",
            "カタカナー",
            "한국어",
            "문장",
            "مرحبا",
            "\u{64E}",
            "हिन्दी",
            "ภาษาไทย",
            "\u{E31}",
            "a\u{301}",
            "\u{301}",
            "٣٤",
            "²",
            "Ⅻ",
            "𝐀𝐁",
            "😀",
            "👍🏽",
            "\u{200D}",
            "€",
            "—",
            "\u{2019}",
            "«",
            "»",
            "、",
            "。",
            "\u{A0}",
            "\u{3000}",
            "\u{2028}",
            "\u{85}",
            "\u{1680}",
            " ",
            " ",
            " ",
            "  ",
            "\n",
            "\r\n",
            "\t",
            "'s",
            "'",
            "a",
            "word",
            "12",
            ".",
            ",",
            "-",
            "ſ",
            "ǅ",
            "ΣΊΣΥΦΟΣ",
            "aБв",
            "ÉTÉ",
            "ﬁ",
            "ʰ",
        ];
        parts_split_as_the_regex_does(&mut next, PARTS, 10_000, None);
    }

    #[test]
    fn named_edge_cases_equal_the_regex() {
        let cases = [
            "don't",
            "DON'T",
            "we'LL",
            "it'ſ",
            "'s",
            "x'",
            "  foo",
            " \n foo",
            "a\u{A0}b",
            "12345",
            "foo.\n/bar",
            "ABCdef",
            "ABC",
            "\u{1C5}a",
            "a\u{301}\u{301}b",
            "\r\n\r\n",
            "x  ",
            "  ",
            " !",
            "!!!\n\n",
            "\u{2B0}\u{2B0}A",
            "A\u{2B0}B's",
            "\u{301}",
            " \u{301}a",
            "\t\tx",
            // Where Llama 3's and Qwen2's patterns part from cl100k's (a run of
            // whitespace ending the text, holding a newline), and Tekken's from
            // o200k's (contractions, digits).
            "a \n ",
            "x\r\t",
            "end.\n\n  ",
            "\n \n",
            " \r",
            "12345678",
            "don't stop",
            "IT'S",
            "1'st",
        ];
        for (b, pattern) in Builtin::ALL {
            let pre = PreTokenizer::regex_only(Some(pattern)).unwrap();
            for text in cases {
                assert_eq!(
                    builtin_pieces(b, text),
                    regex_pieces(&pre, text),
                    "{b:?} on {text:?}"
                );
            }
        }
    }
}
