//! Counting pre-tokens: the map step of training.
//!
//! Training only needs how often each distinct pre-token occurs, so this is where
//! the corpus is read. Counts from separate chunks add up (a map-reduce), which is
//! what lets a file be read in blocks and counted on several threads — with a
//! result that does not depend on the number of threads or the block size, because
//! blocks are cut only at safe points (`chunking`).

use std::fs::File;
use std::io::Read;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::chunking::{find_cut, split_evenly};
use crate::pretokenize::{for_each_unit, PreTokenizer, SpecialMatcher, Unit};

/// Distinct pre-token bytes → number of occurrences.
pub type Counts = FxHashMap<Vec<u8>, u64>;

/// How the corpus is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Utf8Errors {
    /// Invalid UTF-8 is an error naming the byte offset.
    Strict,
    /// Invalid sequences become U+FFFD, as Python's `errors="replace"`.
    Replace,
}

#[derive(Debug)]
pub enum CountError {
    Io(std::io::Error),
    InvalidUtf8 {
        offset: u64,
        byte: u8,
    },
    Pattern(String),
    /// The progress callback asked to stop (e.g. Ctrl-C).
    Interrupted,
}

impl std::fmt::Display for CountError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CountError::Io(e) => write!(f, "{e}"),
            CountError::InvalidUtf8 { offset, byte } => write!(
                f,
                "invalid UTF-8 at byte offset {offset} (byte 0x{byte:02x}); \
                 fix the file or pass errors=\"replace\" (CLI: --errors replace)"
            ),
            CountError::Pattern(e) => write!(f, "{e}"),
            CountError::Interrupted => write!(f, "interrupted"),
        }
    }
}

/// Adds the pre-tokens of `text` to `counts` (keys borrowed from `text`).
pub fn count_text<'t>(
    text: &'t str,
    specials: &SpecialMatcher,
    pre: &PreTokenizer,
    counts: &mut FxHashMap<&'t [u8], u64>,
) -> Result<(), String> {
    let bytes = text.as_bytes();
    for_each_unit(text, specials, pre, |u| {
        if let Unit::Piece { start, end } = u {
            *counts.entry(&bytes[start..end]).or_insert(0) += 1;
        }
    })
}

/// Adds borrowed counts into the owned table.
fn absorb(total: &mut Counts, part: FxHashMap<&[u8], u64>) {
    for (k, v) in part {
        match total.get_mut(k) {
            Some(c) => *c += v,
            None => {
                total.insert(k.to_vec(), v);
            }
        }
    }
}

/// Counts a block of text that starts and ends at safe cuts, splitting it across
/// the threads of `pool` in parts of at least `min_part` bytes.
fn count_block(
    text: &str,
    specials: &SpecialMatcher,
    pre: &PreTokenizer,
    pool: &rayon::ThreadPool,
    min_part: usize,
    total: &mut Counts,
) -> Result<(), String> {
    let threads = pool.current_num_threads().max(1);
    let bytes = text.as_bytes();
    // A few parts per thread keeps the threads busy when parts differ in cost.
    let parts = if threads == 1 {
        1
    } else {
        (threads * 4).min(bytes.len() / min_part.max(1)).max(1)
    };
    let matches = specials.find_all(bytes);
    let cuts = split_evenly(
        bytes,
        bytes.len(),
        parts,
        &matches,
        pre.newline_cuts_are_safe(),
    );
    let mut bounds = Vec::with_capacity(cuts.len());
    let mut prev = 0;
    for c in cuts {
        bounds.push((prev, c));
        prev = c;
    }
    let part_counts: Vec<Result<FxHashMap<&[u8], u64>, String>> = pool.install(|| {
        bounds
            .par_iter()
            .map(|&(a, b)| {
                let mut m = FxHashMap::default();
                count_text(&text[a..b], specials, pre, &mut m)?;
                Ok(m)
            })
            .collect()
    });
    for part in part_counts {
        absorb(total, part?);
    }
    Ok(())
}

/// Bytes read from the file per block, by default.
pub const BLOCK_BYTES: usize = 32 << 20;

/// Counts the pre-tokens of a whole file, reading it in blocks cut at safe points.
/// `progress(bytes_read)` is called after each block; returning false stops.
pub fn count_file(
    path: &str,
    specials: &SpecialMatcher,
    pre: &PreTokenizer,
    errors: Utf8Errors,
    pool: &rayon::ThreadPool,
    block_bytes: usize,
    mut progress: impl FnMut(u64) -> bool,
) -> Result<Counts, CountError> {
    let mut file = File::open(path).map_err(CountError::Io)?;
    let mut total = Counts::default();
    let mut buf: Vec<u8> = Vec::new();
    let mut offset: u64 = 0; // file offset of buf[0]
    let mut eof = false;
    let newline_cuts = pre.newline_cuts_are_safe();
    while !eof {
        let old = buf.len();
        buf.resize(old + block_bytes.max(1), 0);
        let mut filled = old;
        while filled < buf.len() {
            let n = file.read(&mut buf[filled..]).map_err(CountError::Io)?;
            if n == 0 {
                eof = true;
                break;
            }
            filled += n;
        }
        buf.truncate(filled);
        let cut = if eof {
            buf.len()
        } else {
            // Leave room for the longest special token and one byte of look-ahead.
            let hi = buf.len().saturating_sub(specials.max_len() + 1);
            let matches = specials.find_all(&buf);
            match find_cut(&buf, 0, hi, &matches, newline_cuts) {
                Some(c) => c,
                None => continue, // no safe cut yet: read more
            }
        };
        let text = decode(&buf[..cut], offset, errors)?;
        let min_part = (block_bytes / 16).max(1);
        count_block(&text, specials, pre, pool, min_part, &mut total)
            .map_err(CountError::Pattern)?;
        if !progress(offset + cut as u64) {
            return Err(CountError::Interrupted);
        }
        buf.drain(..cut);
        offset += cut as u64;
    }
    Ok(total)
}

/// UTF-8 decoding of one block, with the error offset relative to the file.
fn decode(
    bytes: &[u8],
    offset: u64,
    errors: Utf8Errors,
) -> Result<std::borrow::Cow<'_, str>, CountError> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(std::borrow::Cow::Borrowed(s)),
        Err(e) => match errors {
            Utf8Errors::Replace => Ok(String::from_utf8_lossy(bytes)),
            Utf8Errors::Strict => Err(CountError::InvalidUtf8 {
                offset: offset + e.valid_up_to() as u64,
                byte: bytes[e.valid_up_to()],
            }),
        },
    }
}

/// Counts in-memory documents; each document is pre-tokenized on its own (no piece
/// crosses from one document to the next).
pub fn count_documents(
    docs: &[String],
    specials: &SpecialMatcher,
    pre: &PreTokenizer,
    pool: &rayon::ThreadPool,
    total: &mut Counts,
) -> Result<(), String> {
    let threads = pool.current_num_threads().max(1);
    let per = docs.len().div_ceil(threads * 4).max(1);
    let parts: Vec<Result<FxHashMap<&[u8], u64>, String>> = pool.install(|| {
        docs.par_chunks(per)
            .map(|group| {
                let mut m = FxHashMap::default();
                for d in group {
                    count_text(d, specials, pre, &mut m)?;
                }
                Ok(m)
            })
            .collect()
    });
    for part in parts {
        absorb(total, part?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pretokenize::GPT2_PATTERN;

    fn pool(n: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .unwrap()
    }

    #[test]
    fn counts_pieces_and_skips_specials() {
        let specials = SpecialMatcher::new(&["<|e|>".into()]).unwrap();
        let pre = PreTokenizer::new(Some(GPT2_PATTERN)).unwrap();
        let mut total = Counts::default();
        count_documents(&["a a<|e|>a".into()], &specials, &pre, &pool(1), &mut total).unwrap();
        assert_eq!(total.get(b"a".as_slice()), Some(&2));
        assert_eq!(total.get(b" a".as_slice()), Some(&1));
        assert_eq!(total.len(), 2);
    }

    #[test]
    fn file_counts_do_not_depend_on_threads() {
        let dir = std::env::temp_dir().join(format!("bytepair-count-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.txt");
        let line = "The cat sat.\nOn 12345 mats, don't   you\n\n see?<|e|>";
        std::fs::write(&path, line.repeat(5_000)).unwrap();
        let specials = SpecialMatcher::new(&["<|e|>".into()]).unwrap();
        let pre = PreTokenizer::new(Some(GPT2_PATTERN)).unwrap();
        let p = path.to_str().unwrap();
        let one = count_file(
            p,
            &specials,
            &pre,
            Utf8Errors::Strict,
            &pool(1),
            BLOCK_BYTES,
            |_| true,
        )
        .unwrap();
        let two = count_file(
            p,
            &specials,
            &pre,
            Utf8Errors::Strict,
            &pool(2),
            1000,
            |_| true,
        )
        .unwrap();
        assert_eq!(one, two);
        assert_eq!(one.get(b" cat".as_slice()), Some(&5_000));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn invalid_utf8_names_the_offset() {
        let dir = std::env::temp_dir().join(format!("bytepair-utf8-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.txt");
        std::fs::write(&path, b"hello \xff world").unwrap();
        let specials = SpecialMatcher::new(&[]).unwrap();
        let pre = PreTokenizer::new(Some(GPT2_PATTERN)).unwrap();
        let err = count_file(
            path.to_str().unwrap(),
            &specials,
            &pre,
            Utf8Errors::Strict,
            &pool(1),
            BLOCK_BYTES,
            |_| true,
        )
        .unwrap_err();
        assert!(matches!(
            err,
            CountError::InvalidUtf8 {
                offset: 6,
                byte: 0xff
            }
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
