//! Encoding whole files into shards of token ids for LM training: little-endian
//! uint16 (vocabularies up to 65,536 ids) or uint32, as `np.fromfile` reads them.
//!
//! The file is read in blocks cut only at safe points (`blocks`), each block is split
//! at safe points again and its parts are encoded on all threads, then written in
//! order — so the ids equal encoding the whole file at once, in bounded memory.

use std::io::Write;
use std::sync::Mutex;

use rayon::prelude::*;

use crate::blocks::{for_each_block, ReadError, Utf8Errors};
use crate::chunking::split_evenly;
use crate::encode::{Encoder, PieceCache};
use crate::pretokenize::SpecialMatcher;

/// What to do with special tokens found in the file.
pub struct Specials<'a> {
    /// Encoded as special tokens; other specials are plain text.
    pub allowed: &'a SpecialMatcher,
    /// Any of these in the text is an error (tiktoken's disallowed_special).
    pub forbidden: &'a SpecialMatcher,
    /// Both of the above: blocks are cut at their edges (cutting at a forbidden one
    /// is harmless, since finding it is an error anyway).
    pub cut_at: &'a SpecialMatcher,
}

/// Encodes the file at `path` into `out` as `width`-byte ids (2 or 4). Returns the
/// number of tokens written. `progress(bytes_read)` after each block; false stops.
#[allow(clippy::too_many_arguments)]
pub fn encode_file(
    enc: &Encoder,
    path: &str,
    out: &mut impl Write,
    width: usize,
    specials: Specials,
    errors: Utf8Errors,
    pool: &rayon::ThreadPool,
    block_bytes: usize,
    mut progress: impl FnMut(u64) -> bool,
) -> Result<u64, ReadError> {
    let Specials {
        allowed,
        forbidden,
        cut_at,
    } = specials;
    let newline_cuts = enc.pretokenizer().newline_cuts_are_safe();
    let threads = pool.current_num_threads().max(1);
    let min_part = (block_bytes / 16).max(1 << 16);
    // One piece cache per worker thread, kept warm across parts and blocks.
    let caches: Vec<Mutex<PieceCache>> = (0..threads).map(|_| Mutex::default()).collect();
    let mut written: u64 = 0;
    let mut bytes: Vec<u8> = Vec::new();
    for_each_block(
        path,
        cut_at,
        newline_cuts,
        errors,
        block_bytes,
        |text, offset| {
            if let Some(&(start, _, i)) = forbidden.find_all(text.as_bytes()).first() {
                return Err(ReadError::Other(format!(
                    "the special token '{}' at byte offset {} is not allowed here: allow it \
                     (allowed_special, CLI --specials allow) or encode it as text \
                     (disallowed_special=(), CLI --specials text)",
                    forbidden.tokens()[i],
                    offset + start as u64
                )));
            }
            let parts = if threads == 1 {
                1
            } else {
                (threads * 4).min(text.len() / min_part).max(1)
            };
            let matches = allowed.find_all(text.as_bytes());
            let cuts = split_evenly(text.as_bytes(), text.len(), parts, &matches, newline_cuts);
            let mut bounds = Vec::with_capacity(cuts.len());
            let mut prev = 0;
            for c in cuts {
                bounds.push((prev, c));
                prev = c;
            }
            let encoded: Vec<Result<Vec<u32>, String>> = pool.install(|| {
                bounds
                    .par_iter()
                    .map(|&(a, b)| {
                        let worker = rayon::current_thread_index().unwrap_or(0) % caches.len();
                        let mut cache = caches[worker].lock().expect("no panics while held");
                        enc.encode_cached(&text[a..b], allowed, &mut cache)
                    })
                    .collect()
            });
            for ids in encoded {
                let ids = ids.map_err(ReadError::Other)?;
                bytes.clear();
                if width == 2 {
                    for &id in &ids {
                        let id = u16::try_from(id).map_err(|_| {
                            ReadError::Other(format!("token id {id} does not fit in uint16"))
                        })?;
                        bytes.extend_from_slice(&id.to_le_bytes());
                    }
                } else {
                    for &id in &ids {
                        bytes.extend_from_slice(&id.to_le_bytes());
                    }
                }
                out.write_all(&bytes).map_err(ReadError::Io)?;
                written += ids.len() as u64;
            }
            if progress(offset + text.len() as u64) {
                Ok(())
            } else {
                Err(ReadError::Interrupted)
            }
        },
    )?;
    out.flush().map_err(ReadError::Io)?;
    Ok(written)
}
