//! Text held as code points the way Python's strings hold it (PEP 393: one, two or
//! four bytes a code point, the narrowest that fits the string's largest), written as
//! UTF-8 for the encoder.
//!
//! The bindings hand a batch's strings to the core this way when CPython has no UTF-8
//! of them yet. CPython's own conversion (what taking a `&str` of a string does) runs
//! on one thread under the GIL before any encoding starts, at 1 GB/s of English held
//! in two bytes a character, and keeps its result inside each string for as long as
//! the string lives (a corpus held as strings grows by its UTF-8). This one runs on
//! the batch's threads, without the GIL, 16 code points at a time where they are
//! ASCII (4-5 GB/s on the same text), into memory the call owns.

use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::Mutex;

/// A string's code points, in the width Python keeps them.
#[derive(Debug, Clone, Copy)]
pub enum CodePoints<'a> {
    /// U+0000 to U+00FF.
    Latin1(&'a [u8]),
    /// U+0000 to U+FFFF (surrogates among them, which UTF-8 cannot hold).
    Ucs2(&'a [u16]),
    Ucs4(&'a [u32]),
}

/// The first code point UTF-8 has no form for, by its index: a surrogate (U+D800 to
/// U+DFFF), which a Python string may hold, alone or two in a row, as code points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Surrogate(pub usize);

/// Code points looked at together for the ASCII fast path.
const CHUNK: usize = 16;

/// Runs of texts a batch's conversion is cut into, a thread (see `convert`).
const RUNS_PER_THREAD: usize = 8;

/// Bytes of UTF-8 below which a batch is converted on the calling thread: starting
/// threads costs more than converting this much.
const ON_ONE_THREAD: usize = 1 << 20;

impl CodePoints<'_> {
    /// The most bytes their UTF-8 can take.
    pub fn max_utf8_len(&self) -> usize {
        match self {
            CodePoints::Latin1(s) => 2 * s.len(),
            CodePoints::Ucs2(s) => 3 * s.len(),
            CodePoints::Ucs4(s) => 4 * s.len(),
        }
    }

    /// Writes their UTF-8 at the start of `out`, which must have room for
    /// [`Self::max_utf8_len`] bytes, and returns how many bytes it wrote.
    pub fn write_utf8(&self, out: &mut [MaybeUninit<u8>]) -> Result<usize, Surrogate> {
        assert!(out.len() >= self.max_utf8_len(), "no room for the UTF-8");
        match self {
            CodePoints::Latin1(s) => write_utf8(s, out),
            CodePoints::Ucs2(s) => write_utf8(s, out),
            CodePoints::Ucs4(s) => write_utf8(s, out),
        }
    }
}

/// [`CodePoints::write_utf8`] of one width: a chunk of ASCII code points is narrowed
/// with no branch per code point (the compiler makes it a few vector instructions),
/// any other chunk is written a code point at a time. `out` has room for the most
/// bytes a code point of `T`'s width takes, for each (checked by the caller), so no
/// write needs a bounds check.
fn write_utf8<T: Copy + Into<u32>>(
    src: &[T],
    out: &mut [MaybeUninit<u8>],
) -> Result<usize, Surrogate> {
    let room = out.len();
    let out = out.as_mut_ptr().cast::<u8>();
    let mut k = 0;
    let mut chunks = src.chunks_exact(CHUNK);
    let mut i = 0;
    for chunk in &mut chunks {
        let chunk: &[T; CHUNK] = chunk.try_into().expect("chunks_exact");
        if chunk.iter().fold(0u32, |any, &c| any | c.into()) < 0x80 {
            debug_assert!(k + CHUNK <= room);
            // SAFETY: ASCII code points are a byte each: the first `i + CHUNK` code
            // points take at most as many bytes as their room, which `out` has.
            let dst = unsafe { std::slice::from_raw_parts_mut(out.add(k), CHUNK) };
            for (d, &c) in dst.iter_mut().zip(chunk) {
                *d = c.into() as u8;
            }
            k += CHUNK;
        } else {
            for (j, &c) in chunk.iter().enumerate() {
                // SAFETY: as below.
                k = unsafe { write_one(c.into(), i + j, out, k) }?;
            }
        }
        i += CHUNK;
    }
    for (j, &c) in chunks.remainder().iter().enumerate() {
        // SAFETY: each code point takes at most the room it has in `out` (the
        // caller's check), so writing it at `k`, where the ones before it end, stays
        // inside `out`.
        k = unsafe { write_one(c.into(), i + j, out, k) }?;
    }
    debug_assert!(k <= room);
    Ok(k)
}

/// Writes code point `c` (index `i`) as UTF-8 at `out + k`; returns where it ends.
///
/// # Safety
/// `out + k` must have room for the bytes `c` takes.
#[inline(always)]
unsafe fn write_one(c: u32, i: usize, out: *mut u8, k: usize) -> Result<usize, Surrogate> {
    let at = out.add(k);
    if c < 0x80 {
        *at = c as u8;
        Ok(k + 1)
    } else if c < 0x800 {
        *at = 0xC0 | (c >> 6) as u8;
        *at.add(1) = 0x80 | (c & 0x3F) as u8;
        Ok(k + 2)
    } else if c < 0x10000 {
        if c & 0xF800 == 0xD800 {
            return Err(Surrogate(i));
        }
        *at = 0xE0 | (c >> 12) as u8;
        *at.add(1) = 0x80 | ((c >> 6) & 0x3F) as u8;
        *at.add(2) = 0x80 | (c & 0x3F) as u8;
        Ok(k + 3)
    } else {
        debug_assert!(c <= 0x10_FFFF);
        *at = 0xF0 | (c >> 18) as u8;
        *at.add(1) = 0x80 | ((c >> 12) & 0x3F) as u8;
        *at.add(2) = 0x80 | ((c >> 6) & 0x3F) as u8;
        *at.add(3) = 0x80 | (c & 0x3F) as u8;
        Ok(k + 4)
    }
}

/// The UTF-8 of many strings, in one buffer: [`Utf8Texts::get`] gives each.
#[derive(Debug, Default)]
pub struct Utf8Texts {
    /// Length 0: only its allocation is used (see `convert`).
    bytes: Vec<u8>,
    ranges: Vec<Range<usize>>,
}

impl Utf8Texts {
    /// The room [`Utf8Texts::convert`] needs for `texts`.
    pub fn room(texts: &[CodePoints<'_>]) -> usize {
        texts.iter().map(CodePoints::max_utf8_len).sum()
    }

    /// Converts every text into `bytes` (emptied; it must have [`Utf8Texts::room`]
    /// for them: a buffer an earlier batch wrote in, whose pages cost no zeroing), on
    /// up to `threads` threads (on this one for less than a megabyte), which take runs
    /// of texts as they come free. Fails with the first text holding a surrogate, by
    /// its index in `texts`, and the surrogate's.
    pub fn convert(
        texts: &[CodePoints<'_>],
        threads: usize,
        mut bytes: Vec<u8>,
    ) -> Result<Self, (usize, Surrogate)> {
        let room: Vec<usize> = texts.iter().map(CodePoints::max_utf8_len).collect();
        let total: usize = room.iter().sum();
        bytes.clear();
        assert!(
            bytes.capacity() >= total,
            "no room for the UTF-8 of the texts"
        );
        let threads = if total < ON_ONE_THREAD {
            1
        } else {
            threads.clamp(1, texts.len().max(1))
        };
        // Runs of texts of about equal room, a few a thread, taken by whichever thread
        // is free: room is no measure of work (a code point outside ASCII costs
        // several times one inside it), and one run a thread left a thread of two
        // waiting two thirds of the time on multilingual text.
        let wanted = threads * RUNS_PER_THREAD;
        let mut runs = Vec::with_capacity(wanted);
        let (mut start, mut filled) = (0, 0);
        for (i, &r) in room.iter().enumerate() {
            filled += r;
            if runs.len() + 1 < wanted && filled * wanted >= total * (runs.len() + 1) {
                runs.push(start..i + 1);
                start = i + 1;
            }
        }
        runs.push(start..texts.len());
        // Each run writes its texts one after another into its own part of the buffer.
        let part_room: Vec<usize> = runs
            .iter()
            .map(|run| room[run.clone()].iter().sum())
            .collect();
        let mut work = Vec::with_capacity(runs.len());
        let mut rest = &mut bytes.spare_capacity_mut()[..total];
        for (r, run) in runs.iter().enumerate() {
            let (part, after) = rest.split_at_mut(part_room[r]);
            work.push((r, run.clone(), part));
            rest = after;
        }
        let work = Mutex::new(work.into_iter());
        let results = Mutex::new((0..runs.len()).map(|_| None).collect::<Vec<_>>());
        let convert_runs = || loop {
            let Some((r, run, part)) = work.lock().unwrap_or_else(|e| e.into_inner()).next() else {
                return;
            };
            let mut ends = Vec::with_capacity(run.len());
            let mut at = 0;
            let result = run
                .into_iter()
                .try_for_each(|i| {
                    at += texts[i].write_utf8(&mut part[at..]).map_err(|s| (i, s))?;
                    ends.push(at);
                    Ok(())
                })
                .map(|()| ends);
            results.lock().unwrap_or_else(|e| e.into_inner())[r] = Some(result);
        };
        std::thread::scope(|s| {
            for _ in 1..threads {
                s.spawn(convert_runs);
            }
            convert_runs();
        });
        let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
        let results = results.into_iter().map(|r| r.expect("every run converted"));
        let mut ranges = Vec::with_capacity(texts.len());
        let mut base = 0;
        let mut first_error = None;
        for (&part_room, result) in part_room.iter().zip(results) {
            match result {
                Ok(ends) => {
                    let mut from = base;
                    for end in ends {
                        ranges.push(from..base + end);
                        from = base + end;
                    }
                }
                // Runs are in text order: the first failing run has the first failure.
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
            base += part_room;
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        // The buffer keeps length 0: the parts' room past what their texts took was
        // never written, and `get` reads only the ranges, which were.
        Ok(Self { bytes, ranges })
    }

    /// The UTF-8 of text `i`.
    pub fn get(&self, i: usize) -> &str {
        let range = self.ranges[i].clone();
        assert!(range.end <= self.bytes.capacity());
        // SAFETY: the range lies in the buffer's allocation and every byte of it was
        // written by `write_utf8` (see `convert`), which writes the UTF-8 of code
        // points `char::from_u32` accepted, and nothing else.
        unsafe {
            let bytes =
                std::slice::from_raw_parts(self.bytes.as_ptr().add(range.start), range.len());
            debug_assert!(std::str::from_utf8(bytes).is_ok());
            std::str::from_utf8_unchecked(bytes)
        }
    }

    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// The buffer, for another batch to convert into.
    pub fn into_buffer(self) -> Vec<u8> {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        /// A code point below `top`, often ASCII, often at a boundary of UTF-8's forms.
        fn code_point(&mut self, top: u32) -> u32 {
            const EDGES: [u32; 10] = [
                0, 0x7F, 0x80, 0xFF, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFF, 0x10000,
            ];
            match self.next() % 4 {
                0 | 1 => (self.next() % 0x80) as u32,
                2 => EDGES[(self.next() % 10) as usize].min(top - 1),
                _ => loop {
                    let c = (self.next() % top as u64) as u32;
                    if !(0xD800..0xE000).contains(&c) {
                        break c;
                    }
                },
            }
        }
    }

    fn utf8_of(points: CodePoints) -> Result<String, Surrogate> {
        let mut out = Vec::with_capacity(points.max_utf8_len());
        let n = points.write_utf8(out.spare_capacity_mut())?;
        unsafe { out.set_len(n) };
        Ok(String::from_utf8(out).expect("valid UTF-8"))
    }

    #[test]
    fn every_width_writes_what_rust_writes_of_the_same_code_points() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for len in [0, 1, 15, 16, 17, 31, 32, 33, 100, 1000] {
            for _ in 0..50 {
                let latin1: Vec<u8> = (0..len).map(|_| rng.code_point(0x100) as u8).collect();
                let ucs2: Vec<u16> = (0..len).map(|_| rng.code_point(0x10000) as u16).collect();
                let ucs4: Vec<u32> = (0..len).map(|_| rng.code_point(0x11_0000)).collect();
                let want = |cs: &mut dyn Iterator<Item = u32>| -> String {
                    cs.map(|c| char::from_u32(c).unwrap()).collect()
                };
                assert_eq!(
                    utf8_of(CodePoints::Latin1(&latin1)).unwrap(),
                    want(&mut latin1.iter().map(|&c| c as u32))
                );
                assert_eq!(
                    utf8_of(CodePoints::Ucs2(&ucs2)).unwrap(),
                    want(&mut ucs2.iter().map(|&c| c as u32))
                );
                assert_eq!(
                    utf8_of(CodePoints::Ucs4(&ucs4)).unwrap(),
                    want(&mut ucs4.iter().copied())
                );
            }
        }
    }

    #[test]
    fn a_surrogate_is_refused_by_its_index_in_any_chunk_and_width() {
        for at in [0, 5, 15, 16, 40] {
            for surrogate in [0xD800u32, 0xDBFF, 0xDC00, 0xDFFF] {
                let mut ucs2 = vec![b'a' as u16; 50];
                ucs2[at] = surrogate as u16;
                assert_eq!(utf8_of(CodePoints::Ucs2(&ucs2)), Err(Surrogate(at)));
                let mut ucs4 = vec!['é' as u32; 50];
                ucs4[at] = surrogate;
                assert_eq!(utf8_of(CodePoints::Ucs4(&ucs4)), Err(Surrogate(at)));
            }
        }
        // A high and a low surrogate in a row are two code points, not one character.
        let pair = [0xD83Du16, 0xDE00];
        assert_eq!(utf8_of(CodePoints::Ucs2(&pair)), Err(Surrogate(0)));
    }

    #[test]
    fn many_texts_convert_alike_on_any_number_of_threads() {
        let mut rng = Rng(42);
        // Big enough for threads (past ON_ONE_THREAD), of every width and some empty.
        let mut owned: Vec<(Vec<u8>, Vec<u16>, Vec<u32>)> = Vec::new();
        for i in 0..60 {
            let len = if i % 7 == 0 {
                0
            } else {
                (rng.next() % 30_000) as usize
            };
            owned.push((
                (0..len).map(|_| rng.code_point(0x100) as u8).collect(),
                (0..len).map(|_| rng.code_point(0x10000) as u16).collect(),
                (0..len).map(|_| rng.code_point(0x11_0000)).collect(),
            ));
        }
        let texts: Vec<CodePoints> = owned
            .iter()
            .enumerate()
            .map(|(i, (a, b, c))| match i % 3 {
                0 => CodePoints::Latin1(a),
                1 => CodePoints::Ucs2(b),
                _ => CodePoints::Ucs4(c),
            })
            .collect();
        assert!(texts.iter().map(CodePoints::max_utf8_len).sum::<usize>() > ON_ONE_THREAD);
        let want: Vec<String> = texts.iter().map(|&t| utf8_of(t).unwrap()).collect();
        for threads in [1, 2, 3, 8] {
            let room = Vec::with_capacity(Utf8Texts::room(&texts));
            let got = Utf8Texts::convert(&texts, threads, room).unwrap();
            assert_eq!(got.len(), texts.len());
            for (i, w) in want.iter().enumerate() {
                assert_eq!(got.get(i), w, "text {i} on {threads} threads");
            }
        }
        assert!(Utf8Texts::convert(&[], 2, Vec::new()).unwrap().is_empty());
    }

    #[test]
    fn the_first_text_with_a_surrogate_is_named_whatever_the_threads() {
        let big = vec![b'x' as u16; 200_000];
        let mut bad = big.clone();
        bad[1234] = 0xDC00;
        let texts = [
            CodePoints::Ucs2(&big),
            CodePoints::Ucs2(&big),
            CodePoints::Ucs2(&bad),
            CodePoints::Ucs2(&big),
            CodePoints::Ucs2(&bad),
        ];
        for threads in [1, 2, 4] {
            let room = Vec::with_capacity(Utf8Texts::room(&texts));
            assert_eq!(
                Utf8Texts::convert(&texts, threads, room).unwrap_err(),
                (2, Surrogate(1234))
            );
        }
    }
}
