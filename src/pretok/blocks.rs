//! Piece starts of 64 bytes at once, for the built-in patterns: the bytes' classes
//! become bitmasks (one bit per byte), and the pattern's rules become shifts, ands
//! and adds on them, with no branch per piece to mispredict.
//!
//! A walker at a piece start hands its next 64 bytes to [`gpt2_starts`],
//! [`cl100k_starts`] or [`o200k_starts`], which return the piece starts that the 64
//! bytes decide: those before the last run of one class (it may go on past them),
//! before the first byte the masks do not classify (for gpt2, the first non-ASCII
//! whitespace; for cl100k, the first non-ASCII character but a letter; for o200k, but
//! a capital or small letter: [`Masks::with_chars`]), and 2 bytes short of either (a
//! contraction looks 2 bytes ahead).
//! The patterns look behind nothing, so where the pieces of `text[pos..]` start does
//! not depend on what comes before `pos`: bit 0 is a start, with nothing before it.
//! Every rule below is the piece-by-piece code of `builtin.rs` worked out for runs of
//! ASCII classes; both are checked against the regex engine.

/// The classes of 64 bytes, a bit per byte (bit `i`: byte `i`).
///
/// A classifier gives the ASCII classes of every byte of the window, and `known` at
/// the first byte >= 0x80; [`Masks::with_chars`] then decides how far the masks hold
/// and clears every bit from there on, before the starts are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Masks {
    /// `[A-Za-z]`: the ASCII `\p{L}` (with [`Masks::with_chars`], the bytes of non-ASCII
    /// letters too).
    letter: u64,
    /// `[0-9]`: the ASCII `\p{N}` (and, likewise, non-ASCII numbers).
    digit: u64,
    /// `[\t\n\x0B\x0C\r ]`: the ASCII `\s`.
    white: u64,
    /// `[\r\n]`
    newline: u64,
    /// ` `
    space: u64,
    /// `'`
    quote: u64,
    /// `[A-Z]` (with [`Masks::with_chars`], for o200k, `[\p{Lu}\p{Lt}]`)
    upper: u64,
    /// `/`
    slash: u64,
    /// Bytes >= 0xC0: the first byte of each non-ASCII character.
    lead: u64,
    /// How many bytes from the first the masks classify (64 if all): the ASCII bytes
    /// before the first non-ASCII one, or with [`Masks::with_chars`], every byte
    /// before the first character it leaves to the piece-at-a-time code.
    known: u32,
}

impl Masks {
    /// Whether the masks classify all 64 bytes.
    pub(super) fn all_known(&self) -> bool {
        self.known == 64
    }

    /// How many bytes from the first the masks classify (64 if all).
    pub(super) fn known_len(&self) -> usize {
        self.known as usize
    }

    /// The masks of the window's characters: a run of letters is a run of
    /// characters of one class (in gpt2 so are numbers and the rest; in o200k, a
    /// word is capitals then small letters), so a non-ASCII character is classified
    /// by setting its bytes' bits in `letter`, `upper` or `digit` (the rest: in
    /// none), from its code point's class by `class_of`. They hold up to the first
    /// character `class_of` gives no class (where a rule counts characters, and the
    /// masks count bytes: gpt2's whitespace, cl100k's and o200k's all but letters;
    /// o200k's letters of both its cases, `\p{Lm}`, `\p{Lo}` and `\p{M}`) or that
    /// does not end inside the window; the window must start at a character's first
    /// byte (a piece's start), so that every byte >= 0x80 in it belongs to a character
    /// whose first byte is in it too.
    ///
    /// One turn per non-ASCII character, no branch per byte: a window of Cyrillic or
    /// accented Latin words is decided as one of ASCII words is, where each of its
    /// pieces used to be found a character at a time.
    ///
    /// A window of ASCII bytes returns at once; the characters' loop is out of line
    /// (inlined, its registers cost o200k's English windows 18% of their speed).
    #[inline(always)]
    pub(super) fn with_chars(
        self,
        bytes: &[u8; 64],
        class_of: impl Fn(u32) -> Option<CharClass>,
    ) -> Masks {
        if self.known == 64 {
            return self;
        }
        self.classify_chars(bytes, class_of)
    }

    /// [`Masks::with_chars`] of a window with a byte >= 0x80.
    #[inline(never)]
    fn classify_chars(
        mut self,
        bytes: &[u8; 64],
        class_of: impl Fn(u32) -> Option<CharClass>,
    ) -> Masks {
        let mut leads = self.lead;
        let mut known = 64;
        while leads != 0 {
            let at = leads.trailing_zeros() as usize;
            leads &= leads - 1;
            let len = utf8_len(bytes[at]);
            if at + len > 64 {
                known = at;
                break;
            }
            let cp = code_point(bytes, at, len);
            let char_bits = ((1u64 << len) - 1) << at;
            match class_of(cp) {
                Some(CharClass::Letter) => self.letter |= char_bits,
                Some(CharClass::Upper) => {
                    self.letter |= char_bits;
                    self.upper |= char_bits;
                }
                Some(CharClass::Number) => self.digit |= char_bits,
                Some(CharClass::Other) => {}
                None => {
                    known = at;
                    break;
                }
            }
        }
        self.known = known as u32;
        self.keep_known()
    }
}

/// The length of the UTF-8 character whose lead byte is `first` (not ASCII).
#[inline(always)]
pub(super) fn utf8_len(first: u8) -> usize {
    if first < 0xE0 {
        2
    } else if first < 0xF0 {
        3
    } else {
        4
    }
}

/// The code point of the UTF-8 character of `len` bytes ([`utf8_len`]) at `bytes[at]`,
/// whose continuation bytes follow (`bytes` holds valid UTF-8 there).
#[inline(always)]
pub(super) fn code_point(bytes: &[u8], at: usize, len: usize) -> u32 {
    let first = u32::from(bytes[at]);
    let cont = |k: usize| u32::from(bytes[at + k] & 0x3F);
    match len {
        2 => (first & 0x1F) << 6 | cont(1),
        3 => (first & 0x0F) << 12 | cont(1) << 6 | cont(2),
        _ => (first & 0x07) << 18 | cont(1) << 12 | cont(2) << 6 | cont(3),
    }
}

/// What [`Masks::with_chars`] makes of a non-ASCII character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CharClass {
    /// `\p{L}` (for o200k: `\p{Ll}`)
    Letter,
    /// `[\p{Lu}\p{Lt}]`, for o200k: a letter that is a capital too
    Upper,
    /// `\p{N}`
    Number,
    /// `[^\s\p{L}\p{N}]`
    Other,
}

/// A byte's classes, as the bits of [`Masks`]' fields: the scalar classifier's table.
const LETTER: u8 = 1;
const DIGIT: u8 = 2;
const WHITE: u8 = 4;
const NEWLINE: u8 = 8;
const SPACE: u8 = 16;
const QUOTE: u8 = 32;
const UPPER: u8 = 64;
const SLASH: u8 = 128;

const fn ascii_classes() -> [u8; 128] {
    let mut t = [0u8; 128];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        t[b] = if c.is_ascii_uppercase() {
            LETTER | UPPER
        } else if c.is_ascii_lowercase() {
            LETTER
        } else if c.is_ascii_digit() {
            DIGIT
        } else if c == b' ' {
            WHITE | SPACE
        } else if c == b'\n' || c == b'\r' {
            WHITE | NEWLINE
        } else if c == b'\t' || c == 0x0B || c == 0x0C {
            WHITE
        } else if c == b'\'' {
            QUOTE
        } else if c == b'/' {
            SLASH
        } else {
            0
        };
        b += 1;
    }
    t
}

const CLASSES: [u8; 128] = ascii_classes();

/// Which instructions find the classes of 64 bytes (and, through the walker compiled
/// for them, the starts): the widest this CPU has ([`Simd::detected`]). Every level
/// gives the same masks; the tests compare each with the scalar code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Simd {
    /// A byte at a time: other CPUs, or `BYTEPAIR_SCALAR`.
    Scalar,
    /// 16 bytes at a time: every x86_64 CPU.
    Sse2,
    /// 32 bytes at a time, with BMI1/BMI2/LZCNT for the bit scans.
    ///
    /// (An AVX-512 BW path, each class a mask register of all 64 bytes, ran 10%
    /// slower than this one on the Xeon we measured, whose clock drops while 512-bit
    /// instructions run: removed.)
    Avx2,
}

impl Simd {
    /// Every level, narrowest first.
    pub const ALL: [Simd; 3] = [Simd::Scalar, Simd::Sse2, Simd::Avx2];

    /// The name `BYTEPAIR_SIMD` takes and [`Simd::detected`] reports.
    pub fn name(self) -> &'static str {
        match self {
            Simd::Scalar => "scalar",
            Simd::Sse2 => "sse2",
            Simd::Avx2 => "avx2",
        }
    }

    /// Whether this CPU runs this level's instructions.
    pub fn available(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            match self {
                Simd::Scalar | Simd::Sse2 => true,
                Simd::Avx2 => {
                    has!("avx2") && has!("bmi1") && has!("bmi2") && has!("lzcnt") && has!("popcnt")
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self == Simd::Scalar
        }
    }

    /// The widest level this CPU has, asked once per process. The environment caps
    /// it when first asked: `BYTEPAIR_SCALAR` (set to anything but `0` or empty)
    /// forces the scalar code, and `BYTEPAIR_SIMD=scalar|sse2|avx2` takes at
    /// most that level (to test or time a narrower path on a wider CPU).
    pub fn detected() -> Simd {
        static LEVEL: std::sync::OnceLock<Simd> = std::sync::OnceLock::new();
        *LEVEL.get_or_init(|| {
            let scalar = std::env::var("BYTEPAIR_SCALAR").is_ok_and(|v| !v.is_empty() && v != "0");
            let cap = std::env::var("BYTEPAIR_SIMD")
                .ok()
                .and_then(|v| Simd::ALL.into_iter().find(|l| l.name() == v.trim()))
                .unwrap_or(Simd::Avx2);
            if scalar {
                return Simd::Scalar;
            }
            Simd::ALL
                .into_iter()
                .filter(|&l| l <= cap && l.available())
                .max()
                .unwrap_or(Simd::Scalar)
        })
    }
}

/// A way to find the classes of 64 bytes; the walker is compiled once for each.
pub(super) trait Classify {
    fn classify(bytes: &[u8; 64]) -> Masks;
}

/// [`Simd::Scalar`]
pub(super) struct Scalar;
/// [`Simd::Sse2`]
#[cfg(target_arch = "x86_64")]
pub(super) struct Sse2;
/// [`Simd::Avx2`]: only inside code compiled for AVX2 that checked the CPU has it.
#[cfg(target_arch = "x86_64")]
pub(super) struct Avx2;

impl Classify for Scalar {
    #[inline(always)]
    fn classify(bytes: &[u8; 64]) -> Masks {
        classify_scalar(bytes)
    }
}

#[cfg(target_arch = "x86_64")]
impl Classify for Sse2 {
    #[inline(always)]
    fn classify(bytes: &[u8; 64]) -> Masks {
        classify_sse2(bytes)
    }
}

#[cfg(target_arch = "x86_64")]
impl Classify for Avx2 {
    #[inline(always)]
    fn classify(bytes: &[u8; 64]) -> Masks {
        // SAFETY: `Avx2` is used only by the walker compiled for AVX2, which runs
        // only where `Simd::Avx2.available()`.
        unsafe { classify_avx2(bytes) }
    }
}

/// The masks of `bytes` at `level`, which this CPU must have (the tests' entry).
#[cfg(test)]
fn classify(bytes: &[u8; 64], level: Simd) -> Masks {
    assert!(level.available(), "{level:?} is not on this CPU");
    match level {
        Simd::Scalar => Scalar::classify(bytes),
        #[cfg(target_arch = "x86_64")]
        Simd::Sse2 => Sse2::classify(bytes),
        #[cfg(target_arch = "x86_64")]
        Simd::Avx2 => Avx2::classify(bytes),
        #[cfg(not(target_arch = "x86_64"))]
        _ => unreachable!(),
    }
}

fn classify_scalar(bytes: &[u8; 64]) -> Masks {
    let mut m = Masks {
        letter: 0,
        digit: 0,
        white: 0,
        newline: 0,
        space: 0,
        quote: 0,
        upper: 0,
        slash: 0,
        lead: 0,
        known: 64,
    };
    for (i, &b) in bytes.iter().enumerate() {
        if b >= 0x80 {
            m.known = m.known.min(i as u32);
            m.lead |= u64::from(b >= 0xC0) << i;
            continue;
        }
        let c = CLASSES[b as usize];
        let bit = |class: u8| u64::from(c & class != 0) << i;
        m.letter |= bit(LETTER);
        m.digit |= bit(DIGIT);
        m.white |= bit(WHITE);
        m.newline |= bit(NEWLINE);
        m.space |= bit(SPACE);
        m.quote |= bit(QUOTE);
        m.upper |= bit(UPPER);
        m.slash |= bit(SLASH);
    }
    m
}

impl Masks {
    /// The masks with no bits at or past `known` (past it they are no classes the
    /// starts may rely on). `lead` is left as it is.
    #[inline(always)]
    fn keep_known(mut self) -> Masks {
        let keep = low_bits(self.known);
        self.letter &= keep;
        self.digit &= keep;
        self.white &= keep;
        self.newline &= keep;
        self.space &= keep;
        self.quote &= keep;
        self.upper &= keep;
        self.slash &= keep;
        self
    }
}

/// The classes of the bytes of the vector `v`, one mask each in the order of
/// [`Masks`]' fields (`lead` too), then the bytes >= 0x80: the SSE2 and AVX2
/// classifiers are this with the intrinsics of their width, 16 or 32 bytes at a time.
#[cfg(target_arch = "x86_64")]
macro_rules! lane_masks {
    ($v:expr, $set1:ident, $sub:ident, $or:ident, $cmpeq:ident, $min:ident, $movemask:ident) => {{
        let v = $v;
        let eq = |c: u8| $cmpeq(v, $set1(c as i8));
        // x <= span, as unsigned bytes (x is b - base: b in base..=base + span).
        let within = |x, span: u8| $cmpeq($min(x, $set1(span as i8)), x);
        let space = eq(b' ');
        [
            within($sub($or(v, $set1(0x20)), $set1(b'a' as i8)), 25),
            within($sub(v, $set1(b'0' as i8)), 9),
            $or(within($sub(v, $set1(9)), 4), space),
            $or(eq(b'\n'), eq(b'\r')),
            space,
            eq(b'\''),
            within($sub(v, $set1(b'A' as i8)), 25),
            eq(b'/'),
            within($sub(v, $set1(0xC0u8 as i8)), 63),
            v,
        ]
        .map(|x| $movemask(x) as u32 as u64)
    }};
}

impl Masks {
    /// The masks of 64 bytes from the lanes' masks put together (`lane_masks`' order).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn from_lanes(m: [u64; 10]) -> Masks {
        let [letter, digit, white, newline, space, quote, upper, slash, lead, high] = m;
        Masks {
            letter,
            digit,
            white,
            newline,
            space,
            quote,
            upper,
            slash,
            lead,
            known: high.trailing_zeros(),
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn classify_sse2(bytes: &[u8; 64]) -> Masks {
    use std::arch::x86_64::*;
    let mut m = [0u64; 10];
    for chunk in 0..4 {
        // SAFETY: the 16 bytes at `16 * chunk` are inside `bytes`; SSE2 is part of
        // x86_64.
        let lanes = unsafe {
            let v = _mm_loadu_si128(bytes.as_ptr().add(16 * chunk).cast::<__m128i>());
            lane_masks!(
                v,
                _mm_set1_epi8,
                _mm_sub_epi8,
                _mm_or_si128,
                _mm_cmpeq_epi8,
                _mm_min_epu8,
                _mm_movemask_epi8
            )
        };
        for (all, part) in m.iter_mut().zip(lanes) {
            *all |= part << (16 * chunk);
        }
    }
    Masks::from_lanes(m)
}

/// [`classify_sse2`] 32 bytes at a time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn classify_avx2(bytes: &[u8; 64]) -> Masks {
    use std::arch::x86_64::*;
    let mut m = [0u64; 10];
    for half in 0..2 {
        // SAFETY: the 32 bytes at `32 * half` are inside `bytes`.
        let v = unsafe { _mm256_loadu_si256(bytes.as_ptr().add(32 * half).cast::<__m256i>()) };
        let lanes = lane_masks!(
            v,
            _mm256_set1_epi8,
            _mm256_sub_epi8,
            _mm256_or_si256,
            _mm256_cmpeq_epi8,
            _mm256_min_epu8,
            _mm256_movemask_epi8
        );
        for (all, part) in m.iter_mut().zip(lanes) {
            *all |= part << (32 * half);
        }
    }
    Masks::from_lanes(m)
}

/// The bits below `n` (all 64 for 64).
#[inline(always)]
fn low_bits(n: u32) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// Bit `i` alone (none for 64: a contraction may end right after the window).
#[inline(always)]
fn bit(i: usize) -> u64 {
    1u64.checked_shl(i as u32).unwrap_or(0)
}

/// Bit `i` holds bit `i - 1`: "the byte before is". Bit 0 gets 0: nothing is before
/// the first byte.
#[inline(always)]
fn before(x: u64) -> u64 {
    x << 1
}

/// Bit `i` holds bit `i + 1`: "the byte after is".
#[inline(always)]
fn after(x: u64) -> u64 {
    x >> 1
}

/// The bits of `mask` from each bit of `seeds` (a subset of `mask`) to the end of its
/// run: adding the seeds to the mask carries from each through the run's ones, and
/// the bits a carry came into are the sum's bits that neither operand explains.
#[inline(always)]
fn runs_from(mask: u64, seeds: u64) -> u64 {
    ((mask.wrapping_add(seeds) ^ mask ^ seeds) & mask) | seeds
}

/// The starts that the 64 bytes decide, given all of them: below the start of the
/// run of one class that holds the last byte the masks classify (letters, digits,
/// whitespace or others: it may go on past them) and 2 bytes short of that byte;
/// never bit 0 (the walker's own position).
#[inline(always)]
fn decided(starts: u64, m: &Masks, others: u64) -> u64 {
    let known = m.known;
    if known < 3 {
        return 0;
    }
    let last = known - 1;
    let class = [m.letter, m.digit, m.white, others]
        .into_iter()
        .find(|x| x >> last & 1 == 1)
        .unwrap_or(0);
    let below = !class & low_bits(last);
    let run_start = if below == 0 {
        0
    } else {
        64 - below.leading_zeros()
    };
    starts & low_bits(run_start.min(known - 2)) & !1
}

/// The length of the contraction at `i` (a `'`): `'(?:[sdmt]|ll|ve|re)`, of either
/// case if `any_case`; 0 if none. Reads at most `bytes[i + 2]`.
#[inline(always)]
fn contraction(bytes: &[u8; 64], i: usize, any_case: bool) -> usize {
    let fold = |b: u8| if any_case { b.to_ascii_lowercase() } else { b };
    let a = fold(bytes[i + 1]);
    let b = fold(bytes[i + 2]);
    match (a, b) {
        (b's' | b'd' | b'm' | b't', _) => 2,
        (b'l', b'l') | (b'v', b'e') | (b'r', b'e') => 3,
        _ => 0,
    }
}

/// gpt2 / r50k / p50k:
/// `'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s`
///
/// A run of letters, digits or others is one piece, from the space before it if
/// there is one; a run of whitespace is all but its last character, then that one
/// (which the next run takes if it is a space); a `'` that starts a piece may start
/// a contraction instead.
#[inline(always)]
pub(super) fn gpt2_starts(bytes: &[u8; 64], m: &Masks) -> u64 {
    let valid = low_bits(m.known);
    let (letter, digit, white, space) = (m.letter, m.digit, m.white, m.space);
    let others = valid & !(letter | digit | white);
    let run_starts = |x: u64| x & !before(x);
    let runs = run_starts(letter) | run_starts(digit) | run_starts(others);
    let attached = space & after(valid & !white);
    let mut starts = 1 | (runs & !before(attached)) | attached;
    starts |= run_starts(white) | (white & !after(white));
    // A `'` that starts a piece and a contraction: the letters after the contraction
    // (if any are left) start the next piece.
    let mut quotes = m.quote & run_starts(others) & after(letter) & !before(space) & low_bits(62);
    while quotes != 0 {
        let i = quotes.trailing_zeros() as usize;
        quotes &= quotes - 1;
        let n = contraction(bytes, i, false);
        if n > 0 {
            starts &= !(1 << (i + 1));
            starts |= bit(i + n) & letter;
        }
    }
    decided(starts, m, others)
}

/// cl100k_base:
/// `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s+`
///
/// Llama 3's pattern decides the same starts in a window (it differs only at the end of
/// the text, which no window decides), and Qwen2's too but for digits (`DIGITS` 1:
/// each digit a piece).
#[inline(always)]
pub(super) fn cl100k_starts<const DIGITS: usize>(bytes: &[u8; 64], m: &Masks) -> u64 {
    let valid = low_bits(m.known);
    let (letter, digit, white, newline, space) = (m.letter, m.digit, m.white, m.newline, m.space);
    let others = valid & !(letter | digit | white);
    let run_starts = |x: u64| x & !before(x);
    let other_starts = run_starts(others);
    // `[^\r\n\p{L}\p{N}]?+\p{L}++`: the byte before a run of letters starts its piece
    // if it is whitespace but \r or \n (the last of its run: always a start), or a
    // lone other byte that starts a piece (no space before it: a space takes it).
    let joins =
        (white & !newline & after(letter)) | (other_starts & after(letter) & !before(space));
    let mut starts = 1 | (run_starts(letter) & !before(joins)) | joins;
    // ` ?[^\s\p{L}\p{N}]++`: a run of others, from the space before it if any.
    let attached = space & after(other_starts);
    starts |= (other_starts & !before(space)) | attached;
    // `\p{N}{1,3}+`: every third digit of a run starts a piece (`\p{N}`: each).
    starts |= digit_starts::<DIGITS>(digit);
    // `[\r\n]*+` after others: the \r and \n right after a run of others are its.
    let taken = runs_from(newline, newline & before(others));
    let white = white & !taken;
    // A run of whitespace: `\s*[\r\n]` to its last \r or \n, then the rest; of the
    // rest, all but the last byte (`\s+(?!\S)`), then the last byte (its own piece
    // or the start of the next).
    let blank = white & !newline;
    let rest_ends = blank & !after(white);
    let rest = runs_from(blank.reverse_bits(), rest_ends.reverse_bits()).reverse_bits();
    starts |= run_starts(white) | (rest & before(newline)) | (blank & !after(white));
    // A lone `'` that starts a piece before letters: a contraction, then the letters
    // left (if any) start a piece.
    let mut quotes = m.quote & joins & low_bits(62);
    while quotes != 0 {
        let i = quotes.trailing_zeros() as usize;
        quotes &= quotes - 1;
        let n = contraction(bytes, i, true);
        if n > 0 {
            starts |= bit(i + n) & letter;
        }
    }
    decided(starts, m, others)
}

/// o200k_base:
/// `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
/// `|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
/// `|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
///
/// cl100k's rules, but for three: a run of letters is words of capitals then small
/// letters (a capital after a small letter starts one); a contraction after a word
/// is the word's; others take the \r, \n and `/` after them.
///
/// Tekken's pattern: the same without `CONTRACTIONS` (a `'` after a word is an
/// other), and `DIGITS` 1.
#[inline(always)]
pub(super) fn o200k_starts<const CONTRACTIONS: bool, const DIGITS: usize>(
    bytes: &[u8; 64],
    m: &Masks,
) -> u64 {
    let valid = low_bits(m.known);
    let (letter, digit, white, newline, space) = (m.letter, m.digit, m.white, m.newline, m.space);
    let raw_others = valid & !(letter | digit | white);
    // `[\r\n/]*` after others: a run of \r, \n and `/` from a \r or \n right after
    // others (a `/` there is one of the others).
    let taken = runs_from(newline | m.slash, newline & before(raw_others));
    let others = raw_others & !taken;
    let white = white & !taken;
    let run_starts = |x: u64| x & !before(x);
    let other_starts = run_starts(others);
    let joins =
        (white & !newline & after(letter)) | (other_starts & after(letter) & !before(space));
    let words = run_starts(letter) | (m.upper & before(letter & !m.upper));
    let mut starts = 1 | (words & !before(joins)) | joins;
    let attached = space & after(other_starts);
    starts |= (other_starts & !before(space)) | attached;
    starts |= digit_starts::<DIGITS>(digit);
    let blank = white & !newline;
    let rest_ends = blank & !after(white);
    let rest = runs_from(blank.reverse_bits(), rest_ends.reverse_bits()).reverse_bits();
    starts |= run_starts(white) | (rest & before(newline)) | (blank & !after(white));
    // A contraction after a word is the word's: it starts nothing, and the letters
    // after it (if any) start a piece.
    // (Not after another contraction: a word takes one.)
    let contractions = if CONTRACTIONS { m.quote } else { 0 };
    let mut quotes = contractions & before(letter) & after(letter) & low_bits(62);
    let mut contraction_end = usize::MAX;
    while quotes != 0 {
        let i = quotes.trailing_zeros() as usize;
        quotes &= quotes - 1;
        let n = if i == contraction_end {
            0
        } else {
            contraction(bytes, i, true)
        };
        if n > 0 {
            contraction_end = i + n;
            starts &= !(((1 << n) - 1) << i);
            starts |= bit(i + n) & letter;
        }
    }
    decided(starts, m, raw_others)
}

/// The starts in runs of `digit`: `\p{N}{1,3}` (`DIGITS` 3) starts a piece at every
/// third digit of a run, `\p{N}` (1) at every digit.
#[inline(always)]
fn digit_starts<const DIGITS: usize>(digit: u64) -> u64 {
    const { assert!(DIGITS == 1 || DIGITS == 3) };
    if DIGITS == 1 {
        return digit;
    }
    let mut starts = digit & !before(digit);
    if digit & before(digit) & before(before(digit)) & before(before(before(digit))) != 0 {
        starts |= digit_thirds(digit);
    }
    starts
}

/// Every third digit of each run of digits, from its fourth on.
#[cold]
fn digit_thirds(digit: u64) -> u64 {
    let mut starts = 0;
    let mut runs = digit & !before(digit);
    while runs != 0 {
        let first = runs.trailing_zeros();
        runs &= runs - 1;
        let len = (!(digit >> first)).trailing_zeros();
        let mut k = first + 3;
        while k < first + len {
            starts |= 1 << k;
            k += 3;
        }
    }
    starts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_from_fills_each_run_from_its_seeds_to_its_end() {
        let fill = |mask: u64, seeds: u64| {
            (0..64)
                .filter(|&i| {
                    mask >> i & 1 == 1
                        && (0..=i)
                            .rev()
                            .take_while(|&j| mask >> j & 1 == 1)
                            .any(|j| seeds >> j & 1 == 1)
                })
                .fold(0u64, |acc, i| acc | 1 << i)
        };
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..20_000 {
            let mut next = || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state
            };
            let mask = next() | next();
            let seeds = mask & next() & next() & next();
            assert_eq!(
                runs_from(mask, seeds),
                fill(mask, seeds),
                "{mask:b} {seeds:b}"
            );
        }
    }

    #[test]
    fn every_simd_classifier_agrees_with_the_scalar_one_on_every_byte_at_every_place() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for round in 0..2_000 {
            let mut bytes = [0u8; 64];
            for b in bytes.iter_mut() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                // Mostly ASCII; now and then a byte >= 0x80.
                *b = if state.is_multiple_of(29) {
                    0x80 | (state >> 8) as u8
                } else {
                    (state >> 8) as u8 & 0x7F
                };
            }
            if round < 256 {
                bytes[round % 64] = round as u8;
            }
            let scalar = classify(&bytes, Simd::Scalar);
            for level in Simd::ALL.into_iter().filter(|l| l.available()) {
                assert_eq!(classify(&bytes, level), scalar, "{level:?} on {bytes:?}");
            }
        }
        for bytes in [[b'a'; 64], [0xFF; 64], [0x80; 64], [b' '; 64]] {
            for level in Simd::ALL.into_iter().filter(|l| l.available()) {
                assert_eq!(
                    classify(&bytes, level),
                    classify(&bytes, Simd::Scalar),
                    "{level:?} on {bytes:?}"
                );
            }
        }
    }

    #[test]
    fn the_ascii_classes_are_the_regex_engines() {
        for b in 0u8..128 {
            let c = CLASSES[b as usize];
            let s = (b as char).to_string();
            let is = |class: &str| {
                fancy_regex::Regex::new(class)
                    .unwrap()
                    .is_match(&s)
                    .unwrap()
            };
            assert_eq!(c & LETTER != 0, is(r"^\p{L}$"), "{b}");
            assert_eq!(c & DIGIT != 0, is(r"^\p{N}$"), "{b}");
            assert_eq!(c & WHITE != 0, is(r"^\s$"), "{b}");
        }
    }
}
