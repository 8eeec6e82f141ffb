//! Reading a UTF-8 file in blocks that start and end at safe cuts (`chunking`), so
//! each block can be pre-tokenized on its own — by training's counter and by file
//! encoding alike. Memory holds one block (plus the tail carried to the next one).

use std::fs::File;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

use super::chunking::{last_cut, TextCuts};
use crate::pretok::SpecialMatcher;

/// How invalid UTF-8 is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Utf8Errors {
    /// Invalid UTF-8 is an error naming the byte offset.
    Strict,
    /// Invalid sequences become U+FFFD, as Python's `errors="replace"`.
    Replace,
}

#[derive(Debug)]
pub enum ReadError {
    Io(std::io::Error),
    /// Writing the output failed (a full disk): the output's fault, not the input's.
    Write(std::io::Error),
    InvalidUtf8 {
        offset: u64,
        byte: u8,
    },
    /// A problem the block's consumer found (message).
    Other(String),
    /// The consumer asked to stop (e.g. Ctrl-C in a progress callback).
    Interrupted,
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) | ReadError::Write(e) => write!(f, "{e}"),
            ReadError::InvalidUtf8 { offset, byte } => write!(
                f,
                "invalid UTF-8 at byte offset {offset} (byte 0x{byte:02x}); \
                 fix the file or pass errors=\"replace\" (CLI: --errors replace)"
            ),
            ReadError::Other(e) => write!(f, "{e}"),
            ReadError::Interrupted => write!(f, "interrupted"),
        }
    }
}

/// Bytes read from the file per block, by default. With the reading overlapped
/// ([`for_each_part`]), blocks of 4 MB counted 200 MB of English in 354-387 ms at
/// 75 MB peak RSS, against 414-460 ms and 159 MB with 32 MB blocks (8 MB: 365-416 ms,
/// 87 MB; 2 MB: 356-380 ms, 68 MB): the block and its parts stay in the CPU's caches.
pub const BLOCK_BYTES: usize = 4 << 20;

/// Calls `f(text, offset)` for consecutive blocks of what `reader` reads (a file:
/// [`BlockReader::open`]), where `offset` is the offset of the block's first byte.
/// Blocks are cut at the edges of `specials` and at `cuts` (`chunking`); a block grows
/// until such a cut is found.
pub fn for_each_block(
    mut reader: BlockReader,
    specials: &SpecialMatcher,
    cuts: TextCuts,
    errors: Utf8Errors,
    block_bytes: usize,
    mut f: impl FnMut(&str, u64) -> Result<(), ReadError>,
) -> Result<(), ReadError> {
    while let Some((bytes, offset)) = reader.next_block(specials, cuts, block_bytes)? {
        f(&decode(&bytes, offset, errors)?, offset)?;
        reader.recycle(bytes);
    }
    Ok(())
}

/// [`for_each_block`] with the work on `pool`, while the calling thread reads on: each
/// block is cut into parts by `plan` (the parts' ends, in order), `work` runs on each
/// part on the pool's threads, and the calling thread reads and decodes the next block
/// meanwhile; `done(end)` is called in file order once all of a block's parts have run
/// (`end`: the file offset where the block ends). Two blocks are in memory at most,
/// and a block's buffer is read into again once its parts are done.
///
/// The first error in file order ends the reading and is returned: a part's (as
/// [`ReadError::Other`]), the file's (I/O, invalid UTF-8) or `done`'s. Reading on
/// the calling thread while the pool waited (one block at a time, as counting did)
/// left a core idle for the reading and for each block's last part.
#[allow(clippy::too_many_arguments)]
pub fn for_each_part(
    reader: BlockReader,
    specials: &SpecialMatcher,
    cuts: TextCuts,
    errors: Utf8Errors,
    block_bytes: usize,
    pool: &rayon::ThreadPool,
    mut plan: impl FnMut(&str) -> Vec<usize>,
    work: impl Fn(&str) -> Result<(), String> + Sync,
    done: impl FnMut(u64) -> Result<(), ReadError>,
) -> Result<(), ReadError> {
    let mut source = TextBlocks {
        reader,
        specials,
        cuts,
        errors,
        block_bytes,
    };
    let plan = |text: &String| {
        let mut a = 0;
        plan(text)
            .into_iter()
            .map(|b| (std::mem::replace(&mut a, b), b))
            .collect()
    };
    let work = |text: &String, (a, b): (usize, usize)| work(&text[a..b]);
    for_each_part_of(&mut source, pool, plan, work, done)
}

/// Blocks of any kind, read one at a time for [`for_each_part_of`].
pub trait BlockSource {
    type Block: Send + Sync;
    /// The next block and the file offset where it ends, or None at the end.
    fn next_block(&mut self) -> Result<Option<(Self::Block, u64)>, ReadError>;
    /// A block whose parts are all done, to read a later one into its buffers.
    fn recycle(&mut self, _block: Self::Block) {}
}

/// A UTF-8 file's blocks, cut at safe cuts ([`BlockReader`]), decoded.
struct TextBlocks<'a> {
    reader: BlockReader,
    specials: &'a SpecialMatcher,
    cuts: TextCuts,
    errors: Utf8Errors,
    block_bytes: usize,
}

impl BlockSource for TextBlocks<'_> {
    type Block = String;

    fn next_block(&mut self) -> Result<Option<(String, u64)>, ReadError> {
        let next = self
            .reader
            .next_block(self.specials, self.cuts, self.block_bytes)?;
        let Some((bytes, offset)) = next else {
            return Ok(None);
        };
        let text = decode_block(bytes, offset, self.errors)?;
        let end = offset + text.len() as u64;
        Ok(Some((text, end)))
    }

    fn recycle(&mut self, text: String) {
        self.reader.recycle(text.into_bytes());
    }
}

/// [`for_each_part`] over any [`BlockSource`]: `plan` gives a block's parts (any
/// description of them: ranges, lists of ranges), `work` runs on each on the pool's
/// threads while the calling thread reads the next block, and `done(end)` follows each
/// block's last part, in order. Errors as [`for_each_part`]'s.
pub fn for_each_part_of<S: BlockSource, P: Send>(
    source: &mut S,
    pool: &rayon::ThreadPool,
    mut plan: impl FnMut(&S::Block) -> Vec<P>,
    work: impl Fn(&S::Block, P) -> Result<(), String> + Sync,
    mut done: impl FnMut(u64) -> Result<(), ReadError>,
) -> Result<(), ReadError> {
    /// A block whose parts were handed to the pool.
    struct InFlight<B> {
        block: Arc<B>,
        parts: Vec<mpsc::Receiver<Result<(), String>>>,
        end: u64,
    }
    let stopped = AtomicBool::new(false);
    let (work, stopped) = (&work, &stopped);
    // Waits for a block's parts; its buffers go back to the source.
    let mut finish = |flight: InFlight<S::Block>, source: &mut S| -> Result<(), ReadError> {
        for part in &flight.parts {
            match part.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(ReadError::Other(e)),
                // Closed unsent: the part panicked (the scope raises it again).
                Err(_) => return Err(ReadError::Other("a worker thread panicked".into())),
            }
        }
        if let Ok(block) = Arc::try_unwrap(flight.block) {
            source.recycle(block);
        }
        done(flight.end)
    };
    pool.in_place_scope(|s| {
        let mut flight: Option<InFlight<S::Block>> = None;
        let read = loop {
            let (block, end) = match source.next_block() {
                Ok(Some(next)) => next,
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            };
            let block = Arc::new(block);
            let mut parts = Vec::new();
            for part in plan(&block) {
                let (tx, rx) = mpsc::sync_channel(1);
                let block = Arc::clone(&block);
                s.spawn(move |_| {
                    if !stopped.load(Ordering::Relaxed) {
                        let result = work(&block, part);
                        // Let go of the block first, so that its buffer can be reused.
                        drop(block);
                        // The receiver is gone only when the reading has stopped.
                        let _ = tx.send(result);
                    }
                });
                parts.push(rx);
            }
            let before = flight.replace(InFlight { block, parts, end });
            if let Some(Err(e)) = before.map(|b| finish(b, source)) {
                stopped.store(true, Ordering::Relaxed);
                return Err(e);
            }
        };
        // The block before a reading error comes first, as it would have one at a time.
        let last = flight.map_or(Ok(()), |b| finish(b, source));
        let result = last.and(read);
        if result.is_err() {
            stopped.store(true, Ordering::Relaxed);
        }
        result
    })
}

/// What a reader reads: a file, or the bytes of one another library decompresses
/// (`py::chunks`). Read in large pieces only ([`read_more`]).
pub type Input = Box<dyn Read + Send>;

/// The file at `path`, to read.
pub fn open_input(path: &str) -> Result<Input, ReadError> {
    Ok(Box::new(File::open(path).map_err(ReadError::Io)?))
}

/// A file read in blocks cut at safe cuts, one block per call ([`for_each_block`]
/// with the caller in charge of the loop).
pub struct BlockReader {
    file: Input,
    /// Read and not yet handed out: the start of the next block.
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    offset: u64,
    eof: bool,
    /// A block handed back ([`BlockReader::recycle`]): the next one is read into it.
    spare: Vec<u8>,
}

impl BlockReader {
    pub fn open(path: &str) -> Result<Self, ReadError> {
        Ok(Self::new(open_input(path)?))
    }

    /// A reader of `input`'s bytes; offsets count from its first byte.
    pub fn new(input: Input) -> Self {
        Self {
            file: input,
            buf: Vec::new(),
            offset: 0,
            eof: false,
            spare: Vec::new(),
        }
    }

    /// The next block's bytes (not yet checked as UTF-8: [`decode_block`]) and its
    /// file offset, or None at the end of the file. Cut at the edges of `specials`
    /// and at `cuts`, after about `block_bytes` (a block grows until such a cut).
    pub fn next_block(
        &mut self,
        specials: &SpecialMatcher,
        cuts: TextCuts,
        block_bytes: usize,
    ) -> Result<Option<(Vec<u8>, u64)>, ReadError> {
        loop {
            if self.eof && self.buf.is_empty() {
                return Ok(None);
            }
            let buf = &mut self.buf;
            if !self.eof {
                self.eof = read_more(&mut self.file, buf, block_bytes.max(1))?;
            }
            let cut = if self.eof {
                buf.len()
            } else {
                // Leave room for the longest special token and one byte of look-ahead.
                let hi = buf.len().saturating_sub(specials.max_len() + 1);
                match last_cut(buf, hi, cuts, specials) {
                    Some(c) => c,
                    None => continue, // no safe cut yet: read more
                }
            };
            let mut rest = std::mem::take(&mut self.spare);
            rest.clear();
            rest.extend_from_slice(&buf[cut..]);
            buf.truncate(cut);
            let block = std::mem::replace(buf, rest);
            let offset = self.offset;
            self.offset += cut as u64;
            return Ok(Some((block, offset)));
        }
    }

    /// Takes back a block's buffer, to read a later block into: a new buffer per block
    /// made the kernel map and zero fresh pages for every block (blocks of megabytes are
    /// past the size malloc keeps for reuse), a tenth of counting's time.
    pub fn recycle(&mut self, block: Vec<u8>) {
        if block.capacity() > self.spare.capacity() {
            self.spare = block;
        }
    }

    /// True once the whole file has been read and handed out.
    pub fn at_end(&self) -> bool {
        self.eof && self.buf.is_empty()
    }
}

/// Appends up to `want` more bytes of `file` to `buf`, read into its spare room as it
/// is (zeroing it first, to read into a slice, cost the reader thread a tenth of its
/// time); true when the file ended first (a short read is its end).
pub fn read_more(file: &mut impl Read, buf: &mut Vec<u8>, want: usize) -> Result<bool, ReadError> {
    buf.reserve(want);
    let got = file
        .take(want as u64)
        .read_to_end(buf)
        .map_err(ReadError::Io)?;
    Ok(got < want)
}

/// A block's bytes as text ([`Utf8Errors`]); an error names the file offset.
/// Valid text is checked once and kept in its buffer (checking it, then making the
/// `String` with a second check, was a tenth of a shard run's reading thread).
pub fn decode_block(bytes: Vec<u8>, offset: u64, errors: Utf8Errors) -> Result<String, ReadError> {
    if valid_utf8(&bytes) {
        // SAFETY: just checked to be UTF-8.
        return Ok(unsafe { String::from_utf8_unchecked(bytes) });
    }
    Ok(decode_checked(&bytes, offset, errors)?.into_owned())
}

/// Whether `bytes` are UTF-8: `simdutf8`'s check, the same answer as the standard
/// library's with SIMD (AVX2 or SSE4.2, found at run time): 15x as fast on
/// multilingual text, where the standard check took 0.6 GB/s, and 2x on English.
/// With the SIMD paths off (`BYTEPAIR_SCALAR`, [`crate::pretok::Simd`]), the standard
/// check; `std::str::from_utf8` also finds where invalid text goes wrong.
pub fn valid_utf8(bytes: &[u8]) -> bool {
    if crate::pretok::Simd::detected() == crate::pretok::Simd::Scalar {
        return std::str::from_utf8(bytes).is_ok();
    }
    simdutf8::basic::from_utf8(bytes).is_ok()
}

/// UTF-8 decoding of one block, with the error offset relative to the file.
fn decode(
    bytes: &[u8],
    offset: u64,
    errors: Utf8Errors,
) -> Result<std::borrow::Cow<'_, str>, ReadError> {
    if valid_utf8(bytes) {
        // SAFETY: just checked to be UTF-8.
        return Ok(std::borrow::Cow::Borrowed(unsafe {
            std::str::from_utf8_unchecked(bytes)
        }));
    }
    decode_checked(bytes, offset, errors)
}

/// [`decode`] by the standard check, which says where invalid text goes wrong: for
/// bytes [`valid_utf8`] refused (checking them with SIMD again would find nothing new).
fn decode_checked(
    bytes: &[u8],
    offset: u64,
    errors: Utf8Errors,
) -> Result<std::borrow::Cow<'_, str>, ReadError> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(std::borrow::Cow::Borrowed(s)),
        Err(e) => match errors {
            Utf8Errors::Replace => Ok(String::from_utf8_lossy(bytes)),
            Utf8Errors::Strict => Err(ReadError::InvalidUtf8 {
                offset: offset + e.valid_up_to() as u64,
                byte: bytes[e.valid_up_to()],
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::io::test_pool as pool;

    #[test]
    fn the_simd_utf8_check_answers_as_the_standard_one() {
        // Valid text of every length of UTF-8 sequence, cut anywhere and with one
        // byte changed anywhere: truncated sequences, stray continuation bytes,
        // overlong forms and surrogates' bytes among them.
        let text =
            "plain ASCII, é ß ñ, 日本語 中文, 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 😀 and more ASCII to cross a 64-byte lane"
                .repeat(3);
        let bytes = text.as_bytes();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..4000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let start = (state % bytes.len() as u64) as usize;
            let end = start + ((state >> 20) % (bytes.len() - start) as u64) as usize;
            let mut piece = bytes[start..end].to_vec();
            if !piece.is_empty() && state & 1 == 1 {
                let at = ((state >> 40) % piece.len() as u64) as usize;
                piece[at] = [0x80, 0xc0, 0xed, 0xf4, 0xff, 0xa0, 0x41][(state >> 8) as usize % 7];
            }
            let expected = std::str::from_utf8(&piece).is_ok();
            assert_eq!(valid_utf8(&piece), expected, "{piece:?}");
            // Each of simdutf8's SIMD paths this CPU has, whichever one valid_utf8 took.
            #[cfg(target_arch = "x86_64")]
            {
                use simdutf8::basic::imp::x86::{avx2, sse42};
                if is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU has AVX2.
                    assert_eq!(unsafe { avx2::validate_utf8(&piece) }.is_ok(), expected);
                }
                if is_x86_feature_detected!("sse4.2") {
                    // SAFETY: the CPU has SSE4.2.
                    assert_eq!(unsafe { sse42::validate_utf8(&piece) }.is_ok(), expected);
                }
            }
            let decoded = decode_block(piece.clone(), 0, Utf8Errors::Replace).unwrap();
            assert_eq!(decoded, String::from_utf8_lossy(&piece));
        }
        for surrogate in [
            &[0xed, 0xa0, 0x80][..],
            &[0xed, 0xbf, 0xbf],
            &[0xc0, 0xaf],
            &[0xf4, 0x90, 0x80, 0x80],
        ] {
            assert!(!valid_utf8(surrogate));
        }
    }

    /// A file of `contents` in a folder of its own, removed when dropped.
    struct TempFile(std::path::PathBuf);

    impl TempFile {
        fn new(name: &str, contents: &[u8]) -> TempFile {
            let dir = std::env::temp_dir().join(format!("bytepair-{name}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("f.txt"), contents).unwrap();
            TempFile(dir)
        }

        fn path(&self) -> String {
            self.0.join("f.txt").to_str().unwrap().to_string()
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Cuts a block into three parts at lines (fewer if it has fewer lines).
    fn thirds(text: &str) -> Vec<usize> {
        let mut ends: Vec<usize> = (1..3)
            .filter_map(|k| {
                let at = text.len() * k / 3;
                text[at..].find('\n').map(|i| at + i + 1)
            })
            .filter(|&e| e < text.len())
            .collect();
        ends.dedup();
        ends.push(text.len());
        ends
    }

    fn run(
        file: &TempFile,
        block: usize,
        threads: usize,
        work: impl Fn(&str) -> Result<(), String> + Sync,
        mut done: impl FnMut(u64) -> Result<(), ReadError>,
    ) -> Result<(), ReadError> {
        let none = SpecialMatcher::new(&[]).unwrap();
        for_each_part(
            BlockReader::open(&file.path())?,
            &none,
            TextCuts::Newlines,
            Utf8Errors::Strict,
            block,
            &pool(threads),
            thirds,
            work,
            &mut done,
        )
    }

    #[test]
    fn every_line_reaches_one_part_and_blocks_finish_in_file_order() {
        let text: String = (0..2_000)
            .map(|i| format!("line {i} of the file\n"))
            .collect();
        let file = TempFile::new("parts", text.as_bytes());
        for (block, threads) in [(100, 1), (100, 2), (4096, 2), (1 << 20, 2)] {
            let seen = Mutex::new(Vec::new());
            let mut ends = Vec::new();
            run(
                &file,
                block,
                threads,
                |part| {
                    assert!(part.ends_with('\n'), "parts end at lines");
                    seen.lock().unwrap().extend(part.lines().map(String::from));
                    Ok(())
                },
                |end| {
                    ends.push(end);
                    Ok(())
                },
            )
            .unwrap();
            let mut seen = seen.into_inner().unwrap();
            seen.sort();
            let mut want: Vec<String> = text.lines().map(String::from).collect();
            want.sort();
            assert_eq!(seen, want, "block {block}, {threads} threads");
            assert!(ends.windows(2).all(|w| w[0] < w[1]), "{ends:?}");
            assert_eq!(ends.last(), Some(&(text.len() as u64)));
            if block == 100 {
                assert!(ends.len() > 100, "small blocks: many of them");
            }
        }
    }

    #[test]
    fn the_first_error_in_file_order_is_the_one_returned() {
        let mut bytes: Vec<u8> = (0..400)
            .flat_map(|i| format!("ok {i}\n").into_bytes())
            .collect();
        let bad_at = bytes.len();
        bytes.extend_from_slice(b"bad \xff\n");
        bytes.extend((0..400).flat_map(|i| format!("ok {i}\n").into_bytes()));
        let file = TempFile::new("parts-bad", &bytes);
        // The invalid byte, named by its offset, once the blocks before it are done.
        let mut ends = Vec::new();
        let err = run(
            &file,
            64,
            2,
            |_| Ok(()),
            |end| {
                ends.push(end);
                Ok(())
            },
        )
        .unwrap_err();
        assert!(
            matches!(err, ReadError::InvalidUtf8 { offset, byte: 0xff } if offset == bad_at as u64 + 4),
            "{err:?}"
        );
        assert!(ends
            .last()
            .is_some_and(|&e| e <= bad_at as u64 && e > bad_at as u64 - 80));
        // A part's error in an earlier block comes before it.
        let err = run(
            &file,
            64,
            2,
            |part| match part.contains("ok 7\n") {
                true => Err("seven".into()),
                false => Ok(()),
            },
            |_| Ok(()),
        )
        .unwrap_err();
        assert!(
            matches!(&err, ReadError::Other(m) if m == "seven"),
            "{err:?}"
        );
    }

    #[test]
    fn done_stops_the_reading() {
        let text = "a line\n".repeat(1_000);
        let file = TempFile::new("parts-stop", text.as_bytes());
        let parts = Mutex::new(0usize);
        let mut calls = 0;
        let err = run(
            &file,
            64,
            2,
            |_| {
                *parts.lock().unwrap() += 1;
                Ok(())
            },
            |_| {
                calls += 1;
                Err(ReadError::Interrupted)
            },
        )
        .unwrap_err();
        assert!(matches!(err, ReadError::Interrupted));
        assert_eq!(calls, 1, "nothing is reported after a stop");
        // The first block and at most the one read meanwhile: not the whole file.
        assert!(*parts.lock().unwrap() <= 6, "{}", parts.lock().unwrap());
    }
}
