//! Encoding whole files into shards of token ids for LM training: little-endian
//! uint16 (vocabularies up to 65,536 ids) or uint32, as `np.fromfile` reads them.
//!
//! The file is read in blocks cut only at safe points (`blocks`), each block is split
//! at safe points again and its parts are encoded on all threads, then written in
//! order — so the ids equal encoding the whole file at once, in bounded memory.
//! A model that has no safe cuts (`SafeCuts::Nowhere`: a SentencePiece model whose
//! words cannot be cut apart, `spm::seam`) reads the whole file as one block and
//! encodes it as one text: exact, but held in memory. A part after the first is
//! encoded as the rest of the file ([`Model::encode_part_cached`]).
//! Reading and writing overlap the encoding.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{mpsc, Arc};

use super::batch::write_le;
use super::blocks::{for_each_block, BlockReader, ReadError, Utf8Errors};
use super::chunking::{split_evenly, TextCuts};
use crate::model::{Frame, Model, SafeCuts, WorkerCaches};
use crate::pretok::SpecialMatcher;

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

/// The error naming the first of `forbidden` in `text` (a block of a file, starting at
/// byte `offset`), if there is one.
pub fn check_forbidden(
    forbidden: &SpecialMatcher,
    text: &str,
    offset: u64,
) -> Result<(), ReadError> {
    match forbidden.find_first(text.as_bytes()) {
        None => Ok(()),
        Some((start, _, i)) => Err(refused(
            &forbidden.tokens()[i],
            format_args!("at byte offset {}", offset + start as u64),
        )),
    }
}

/// The error for a special token a file's text may not hold, found `at` (a byte
/// offset, a line).
pub fn refused(token: &str, at: std::fmt::Arguments) -> ReadError {
    ReadError::Other(format!(
        "the special token '{token}' {at} is not allowed here: allow it \
         (allowed_special, CLI --specials allow) or encode it as text \
         (disallowed_special=(), CLI --specials text)"
    ))
}

/// Bytes read per block when encoding a file: small enough that reading the next
/// block and writing the last one overlap the encoding from the start of the file.
pub const ENCODE_BLOCK_BYTES: usize = 4 << 20;

/// A part of a block being encoded: its ids arrive on `ids`; `block_end` (the file
/// offset where the block ends) marks the last part of a block.
struct Pending {
    ids: mpsc::Receiver<Result<Vec<u32>, String>>,
    block_end: Option<u64>,
}

/// Encodes the file `reader` reads into `out` as `width`-byte ids (2 or 4). Returns
/// the number of tokens written. `progress(bytes_done)` after each block; false stops.
/// The file is one text: `frame` goes around the whole of it.
///
/// A pipeline: this thread reads a block, hands its parts to the pool's workers and,
/// while they encode, reads the next block and writes finished parts in file order.
/// At most two blocks are in flight, so memory stays bounded.
#[allow(clippy::too_many_arguments)]
pub fn encode_file<M: Model>(
    enc: &M,
    reader: BlockReader,
    out: &mut impl Write,
    width: usize,
    specials: Specials,
    frame: &Frame,
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
    let no_cuts = SpecialMatcher::new(&[]).expect("an empty matcher always builds");
    let (cut_at, text_cuts) = match enc.safe_cuts() {
        SafeCuts::AtSpecials { text } => (cut_at, text),
        SafeCuts::Nowhere => (&no_cuts, TextCuts::None),
    };
    let threads = pool.current_num_threads().max(1);
    let min_part = (block_bytes / 16).max(1 << 16);
    let caches = &WorkerCaches::new(enc, pool);
    let mut writer = Writer {
        out,
        width,
        bytes: Vec::new(),
        written: 0,
    };
    writer.write(&frame.before)?;
    let mut pending: VecDeque<Pending> = VecDeque::new();
    pool.in_place_scope(|s| {
        for_each_block(
            reader,
            cut_at,
            text_cuts,
            errors,
            block_bytes,
            |text, offset| {
                check_forbidden(forbidden, text, offset)?;
                let parts = if threads == 1 {
                    1
                } else {
                    (threads * 4).min(text.len() / min_part).max(1)
                };
                let matches = allowed.find_all(text.as_bytes());
                let cuts = split_evenly(
                    text.as_bytes(),
                    text.len(),
                    parts,
                    &matches,
                    text_cuts,
                    allowed,
                );
                // Owned, so that it can be encoded while the next block is read.
                let text: Arc<str> = Arc::from(text);
                let mut a = 0;
                for b in cuts {
                    let (tx, rx) = mpsc::sync_channel(1);
                    let text = Arc::clone(&text);
                    s.spawn(move |_| {
                        // The receiver is gone only when encoding has already failed.
                        let mut ids = Vec::with_capacity((b - a) / 3);
                        let starts = offset == 0 && a == 0;
                        let done = caches.with(|cache| {
                            enc.encode_part_cached(&text[a..b], starts, allowed, cache, &mut ids)
                        });
                        let _ = tx.send(done.map(|()| ids).map_err(|e| e.to_string()));
                    });
                    pending.push_back(Pending {
                        ids: rx,
                        block_end: None,
                    });
                    a = b;
                }
                if let Some(last) = pending.back_mut() {
                    last.block_end = Some(offset + text.len() as u64);
                }
                // Write what is done; wait only while an earlier block is unfinished.
                writer.drain(&mut pending, 1, &mut progress)
            },
        )?;
        writer.drain(&mut pending, 0, &mut progress)
    })?;
    writer.write(&frame.after)?;
    writer.out.flush().map_err(ReadError::Write)?;
    Ok(writer.written)
}

/// Writes encoded parts, in file order.
struct Writer<'a, W: Write> {
    out: &'a mut W,
    width: usize,
    bytes: Vec<u8>,
    written: u64,
}

impl<W: Write> Writer<'_, W> {
    /// Writes the finished parts at the front of `pending`, waiting for unfinished
    /// ones while more than `blocks_left` blocks are in flight.
    fn drain(
        &mut self,
        pending: &mut VecDeque<Pending>,
        blocks_left: usize,
        progress: &mut impl FnMut(u64) -> bool,
    ) -> Result<(), ReadError> {
        while let Some(front) = pending.front() {
            let blocks = pending.iter().filter(|p| p.block_end.is_some()).count();
            let ids = if blocks > blocks_left {
                front.ids.recv().expect("every part sends its ids")
            } else {
                match front.ids.try_recv() {
                    Ok(ids) => ids,
                    Err(_) => return Ok(()),
                }
            };
            let done = pending.pop_front().expect("front exists").block_end;
            self.write(&ids.map_err(ReadError::Other)?)?;
            if let Some(end) = done {
                if !progress(end) {
                    return Err(ReadError::Interrupted);
                }
            }
        }
        Ok(())
    }

    fn write(&mut self, ids: &[u32]) -> Result<(), ReadError> {
        self.bytes.clear();
        append_le(&mut self.bytes, ids, self.width)?;
        self.out.write_all(&self.bytes).map_err(ReadError::Write)?;
        self.written += ids.len() as u64;
        Ok(())
    }
}

/// Appends `ids` to `out` the way a shard holds them: little-endian integers `width`
/// bytes wide (2 or 4). At width 2 an id past uint16 is an error naming it, and `out`
/// is left as it was.
pub(super) fn append_le(out: &mut Vec<u8>, ids: &[u32], width: usize) -> Result<(), ReadError> {
    debug_assert!(
        width == 2 || width == 4,
        "a shard's ids are 2 or 4 bytes wide"
    );
    if width == 2 {
        if let Some(&id) = ids.iter().find(|&&id| id > u32::from(u16::MAX)) {
            return Err(ReadError::Other(format!(
                "token id {id} does not fit in uint16"
            )));
        }
    }
    let (at, n) = (out.len(), ids.len() * width);
    out.reserve(n);
    let dst = &mut out.spare_capacity_mut()[..n];
    if width == 4 {
        write_le(dst, ids);
    } else {
        for (d, &id) in dst.chunks_exact_mut(2).zip(ids) {
            let [lo, hi] = (id as u16).to_le_bytes();
            d[0].write(lo);
            d[1].write(hi);
        }
    }
    // SAFETY: the `n` bytes after `at` were just written.
    unsafe { out.set_len(at + n) };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_append_as_little_endian_at_either_width() {
        let ids = [0u32, 1, 258, 65_535];
        let mut out = vec![9u8];
        append_le(&mut out, &ids, 2).unwrap();
        assert_eq!(out, [9, 0, 0, 1, 0, 2, 1, 255, 255]);
        let mut out = Vec::new();
        append_le(&mut out, &[70_000, 1], 4).unwrap();
        assert_eq!(out, [0x70, 0x11, 0x01, 0, 1, 0, 0, 0]);
    }

    #[test]
    fn an_id_past_uint16_is_named_and_nothing_is_appended() {
        let mut out = vec![7u8];
        let err = append_le(&mut out, &[1, 65_536, 2], 2).unwrap_err();
        assert!(matches!(err, ReadError::Other(m) if m == "token id 65536 does not fit in uint16"));
        assert_eq!(out, [7]);
    }
}
