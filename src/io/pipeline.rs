//! Blocks of texts encoded one after another on a pool's threads, pipelined: what a
//! shard folder's documents go through ([`crate::py::documents`]).
//!
//! Each block is planned into parts as [`crate::io::batch`] plans a batch (long texts
//! cut at safe cuts, short ones in groups) and its parts are queued as soon as it
//! arrives, behind the parts of the block before it; a block is handed over, in order,
//! once all its parts are done. At most two blocks are in flight, as in
//! [`crate::io::shards::encode_file`], so memory stays bounded.
//!
//! Encoding each block as a batch of its own (`encode_flat`) ended every block with
//! one worker idle while the other finished the last part, then gave the workers'
//! piece caches back and took them again, sharing what each had learned, with no
//! worker running. Here each worker keeps one cache for the whole stream, and the
//! caches go back together at its end.
//!
//! A block's ids are written `width` bytes each (little-endian uint16 or uint32: what
//! the shards hold), into a buffer of exactly their size, once the block is done.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use super::batch::{plan_parts, Part, Specials, Units, MAX_UNIT, MIN_UNIT};
use super::blocks::ReadError;
use super::shards::append_le;
use crate::model::{try_reserve, EncodeError, Model, WorkerCaches};
use crate::pages::advise_huge_pages;
use crate::pretok::SpecialMatcher;

/// Parts a block is cut into per thread (long texts only; short ones go in groups).
/// A batch cuts its texts finer (32 a thread, its tail finer still), so that no
/// thread idles at its end; with blocks pipelined no thread does, and on a 200 MB
/// shard run parts of 64 KB (the smallest, for 3 MB blocks) ran at 113-125 MB/s
/// against 123-141 with 4 a thread, in turn (2 a thread: no faster).
const PARTS_PER_THREAD: usize = 4;

/// A block's texts.
pub trait Texts: Send + Sync {
    fn count(&self) -> usize;
    fn text(&self, i: usize) -> &str;
    /// Whether text `i` begins its text: false for a later part of a longer one
    /// ([`Model::encode_part_cached`]).
    fn starts_text(&self, _i: usize) -> bool {
        true
    }
}

/// A block's ids, `width` bytes each, and the `count + 1` offsets (in ids) where each
/// text's ids start and the last ends.
pub struct FlatIds {
    pub bytes: Vec<u8>,
    pub offsets: Vec<u64>,
}

/// The ids of a part; for a group of texts, where each text ends in them.
struct PartIds {
    ids: Vec<u32>,
    ends: Vec<usize>,
}

/// A block in flight: its texts, its parts, the channels their ids come on (from the
/// first part not yet received), and the ids received so far.
struct InFlight<T> {
    texts: Arc<T>,
    parts: Vec<Part>,
    waiting: VecDeque<mpsc::Receiver<Result<PartIds, EncodeError>>>,
    got: Vec<PartIds>,
}

/// Encodes the blocks `next` gives (None: the end) on `pool`'s threads, allowing the
/// special tokens of `allowed` (the caller checks for forbidden ones), and hands each
/// to `deliver`, in order, with its ids `width` bytes each (2 or 4); a reading error
/// from `next`, or the first encoding error, is delivered in its block's turn and
/// ends the stream, as does `deliver` returning false. `reuse` may give a buffer
/// Python is done with, for a block's ids.
pub fn encode_blocks<M: Model, T: Texts + 'static>(
    model: &M,
    allowed: &SpecialMatcher,
    pool: &rayon::ThreadPool,
    width: usize,
    mut next: impl FnMut() -> Option<Result<T, ReadError>>,
    mut reuse: impl FnMut() -> Option<Vec<u8>>,
    mut deliver: impl FnMut(Result<(Arc<T>, FlatIds), ReadError>) -> bool,
) {
    assert!(width == 2 || width == 4, "ids are 2 or 4 bytes");
    let none = SpecialMatcher::new(&[]).expect("an empty matcher always builds");
    let specials = Specials {
        allowed,
        disallowed: &none,
    };
    let threads = pool.current_num_threads().max(1);
    let caches = WorkerCaches::new(model, pool);
    // Part id buffers the collector is done with, for the workers to fill again.
    let spare: Mutex<Vec<Vec<u32>>> = Mutex::new(Vec::new());
    let stopped = AtomicBool::new(false);
    let (caches, spare, stopped) = (&caches, &spare, &stopped);
    pool.in_place_scope(|s| {
        let mut flight: VecDeque<InFlight<T>> = VecDeque::new();
        let mut failure = None;
        while let Some(block) = next() {
            let texts = match block {
                Ok(texts) => Arc::new(texts),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            };
            let all: Vec<&str> = (0..texts.count()).map(|i| texts.text(i)).collect();
            let total: usize = all.iter().map(|t| t.len()).sum();
            let unit = (total / (threads * PARTS_PER_THREAD)).clamp(MIN_UNIT, MAX_UNIT);
            let parts = plan_parts(model, &all, specials, Units::even(unit));
            let mut waiting = VecDeque::with_capacity(parts.len());
            for part in &parts {
                let (tx, rx) = mpsc::sync_channel(1);
                let (texts, part) = (Arc::clone(&texts), part.clone());
                s.spawn(move |_| {
                    if stopped.load(Ordering::Relaxed) {
                        return; // the collector sees the channel close
                    }
                    let ids = spare.lock().expect("no panics while held").pop();
                    let done = caches
                        .with(|cache| encode_part(model, &*texts, &part, allowed, cache, ids));
                    // The receiver is gone only when the stream has stopped.
                    let _ = tx.send(done);
                });
                waiting.push_back(rx);
            }
            drop(all);
            flight.push_back(InFlight {
                texts,
                got: Vec::with_capacity(parts.len()),
                parts,
                waiting,
            });
            // Hand over what is done; wait only while an earlier block is unfinished.
            if !drain(&mut flight, 1, width, spare, &mut reuse, &mut deliver) {
                stopped.store(true, Ordering::Relaxed);
                return;
            }
        }
        if !drain(&mut flight, 0, width, spare, &mut reuse, &mut deliver) {
            stopped.store(true, Ordering::Relaxed);
            return;
        }
        if let Some(e) = failure {
            deliver(Err(e));
        }
    });
}

/// Encodes one part: a group of whole texts, or a piece of one.
fn encode_part<M: Model, T: Texts>(
    model: &M,
    texts: &T,
    part: &Part,
    allowed: &SpecialMatcher,
    cache: &mut M::Cache,
    ids: Option<Vec<u32>>,
) -> Result<PartIds, EncodeError> {
    let mut ids = ids.unwrap_or_default();
    ids.clear();
    let mut ends = Vec::new();
    if part.count > 1 {
        ends.reserve(part.count);
        for i in part.text..part.text + part.count {
            let starts = texts.starts_text(i);
            model.encode_part_cached(texts.text(i), starts, allowed, cache, &mut ids)?;
            ends.push(ids.len());
        }
    } else {
        let text = &texts.text(part.text)[part.start..part.end];
        let starts = part.start == 0 && texts.starts_text(part.text);
        model.encode_part_cached(text, starts, allowed, cache, &mut ids)?;
    }
    Ok(PartIds { ids, ends })
}

/// Hands over the finished blocks at the front of `flight`, in order, waiting for
/// unfinished parts while more than `blocks_left` blocks are in flight. False when
/// the stream ends: a block failed (its error was delivered) or `deliver` said stop.
fn drain<T>(
    flight: &mut VecDeque<InFlight<T>>,
    blocks_left: usize,
    width: usize,
    spare: &Mutex<Vec<Vec<u32>>>,
    reuse: &mut impl FnMut() -> Option<Vec<u8>>,
    deliver: &mut impl FnMut(Result<(Arc<T>, FlatIds), ReadError>) -> bool,
) -> bool {
    loop {
        let in_flight = flight.len();
        let Some(front) = flight.front_mut() else {
            return true;
        };
        if let Some(rx) = front.waiting.front() {
            let received = if in_flight > blocks_left {
                rx.recv().ok()
            } else {
                match rx.try_recv() {
                    Ok(done) => Some(done),
                    Err(mpsc::TryRecvError::Empty) => return true,
                    Err(mpsc::TryRecvError::Disconnected) => None,
                }
            };
            // A part whose sender is gone was skipped: only after a stop.
            let Some(done) = received else { return false };
            front.waiting.pop_front();
            match done {
                Ok(ids) => front.got.push(ids),
                Err(e) => {
                    deliver(Err(ReadError::Other(e.to_string())));
                    return false;
                }
            }
            continue;
        }
        let block = flight.pop_front().expect("the front exists");
        let flat = flatten(&block.parts, &block.got, width, reuse());
        let mut spare = spare.lock().expect("no panics while held");
        spare.extend(block.got.into_iter().map(|p| p.ids).take(SPARE_IDS));
        spare.truncate(SPARE_IDS);
        drop(spare);
        let ok = match flat {
            Ok(flat) => deliver(Ok((block.texts, flat))),
            Err(e) => {
                deliver(Err(e));
                false
            }
        };
        if !ok {
            return false;
        }
    }
}

/// Part id buffers kept for the workers to fill again.
const SPARE_IDS: usize = 64;

/// A block's ids, `width` bytes each, from its parts' (in order), with each text's
/// offset; into `reuse` when it is big enough (a buffer too small is dropped, not
/// grown: realloc would copy its old bytes into fresh pages).
fn flatten(
    parts: &[Part],
    got: &[PartIds],
    width: usize,
    reuse: Option<Vec<u8>>,
) -> Result<FlatIds, ReadError> {
    let total: usize = got.iter().map(|p| p.ids.len()).sum();
    let mut bytes = reuse
        .filter(|b| b.capacity() >= total * width)
        .unwrap_or_default();
    bytes.clear();
    if bytes.capacity() < total * width {
        let want = total * width;
        try_reserve(&mut bytes, want + want / 8).map_err(|e| ReadError::Other(e.to_string()))?;
        advise_huge_pages(bytes.spare_capacity_mut());
    }
    let mut offsets = vec![0u64];
    let mut written = 0u64;
    for (part, got) in parts.iter().zip(got) {
        if part.count > 1 {
            offsets.extend(got.ends.iter().map(|&end| written + end as u64));
        }
        written += got.ids.len() as u64;
        if part.count == 1 && part.nth + 1 == part.of {
            offsets.push(written);
        }
        append_le(&mut bytes, &got.ids, width)?;
    }
    Ok(FlatIds { bytes, offsets })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpe::encoder::tests::minbpe_encoder;
    use crate::bpe::Encoder;
    use crate::io::test_pool as pool;
    use crate::pretok::GPT2_PATTERN;

    struct Block(Vec<String>);

    /// A delivered block's ids and offsets, or its error.
    type Delivered = Result<(Vec<u32>, Vec<u64>), String>;

    impl Texts for Block {
        fn count(&self) -> usize {
            self.0.len()
        }

        fn text(&self, i: usize) -> &str {
            &self.0[i]
        }
    }

    /// Blocks of short texts (with special tokens), long ones (cut into parts), empty
    /// ones, and a block of no texts.
    fn blocks() -> Vec<Vec<String>> {
        let mut blocks: Vec<Vec<String>> = (0..6)
            .map(|b| {
                let mut texts: Vec<String> = (0..(b * 5) % 9)
                    .map(|i| "aaab daaab ".repeat((i + b) % 7) + &"ac<|e|> ".repeat(i % 3))
                    .collect();
                if b % 2 == 1 {
                    texts.push("daaab.\nac aab ".repeat(30_000));
                }
                texts.push(String::new());
                texts
            })
            .collect();
        blocks.insert(3, Vec::new());
        blocks
    }

    /// What `encode_blocks` delivers: each block's ids and offsets, or its error.
    /// Block `fail_at` is a reading error; `deliver` says stop after `stop_after`.
    fn run(
        e: &Encoder,
        threads: usize,
        width: usize,
        fail_at: Option<usize>,
        stop_after: Option<usize>,
    ) -> Vec<Delivered> {
        let mut queue = blocks().into_iter().enumerate();
        let mut got = Vec::new();
        encode_blocks(
            e,
            e.all_specials(),
            &pool(threads),
            width,
            || {
                queue.next().map(|(k, texts)| match fail_at {
                    Some(at) if at == k => Err(ReadError::Other(format!("block {k} is bad"))),
                    _ => Ok(Block(texts)),
                })
            },
            || Some(Vec::with_capacity(16)),
            |block| {
                got.push(block.map_err(|e| e.to_string()).map(|(texts, flat)| {
                    assert_eq!(flat.offsets.len(), texts.count() + 1);
                    let ids = flat
                        .bytes
                        .chunks_exact(width)
                        .map(|b| match *b {
                            [lo, hi] => u32::from(u16::from_le_bytes([lo, hi])),
                            [a, b, c, d] => u32::from_le_bytes([a, b, c, d]),
                            _ => unreachable!(),
                        })
                        .collect();
                    (ids, flat.offsets)
                }));
                stop_after.is_none_or(|n| got.len() < n)
            },
        );
        got
    }

    /// The ids and offsets of each block, each text encoded whole.
    fn expected(e: &Encoder) -> Vec<Delivered> {
        blocks()
            .iter()
            .map(|texts| {
                let mut ids = Vec::new();
                let mut offsets = vec![0];
                for t in texts {
                    ids.extend(e.encode(t, e.all_specials()).unwrap());
                    offsets.push(ids.len() as u64);
                }
                Ok((ids, offsets))
            })
            .collect()
    }

    #[test]
    fn blocks_come_in_order_as_each_text_whole_on_any_threads_and_width() {
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        let want = expected(&e);
        for threads in [1, 2, 3] {
            for width in [2, 4] {
                assert_eq!(
                    run(&e, threads, width, None, None),
                    want,
                    "{threads} threads"
                );
            }
        }
    }

    #[test]
    fn a_reading_error_comes_after_the_blocks_before_it_and_ends_the_stream() {
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        let mut want = expected(&e);
        want.truncate(4);
        want.push(Err("block 4 is bad".into()));
        for threads in [1, 2] {
            assert_eq!(run(&e, threads, 4, Some(4), None), want);
        }
    }

    #[test]
    fn the_stream_stops_when_the_receiver_says_so() {
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        let mut want = expected(&e);
        want.truncate(2);
        for threads in [1, 2] {
            assert_eq!(run(&e, threads, 4, None, Some(2)), want);
        }
    }

    #[test]
    fn an_id_past_uint16_is_an_error_naming_it_in_a_two_byte_stream() {
        let part = Part {
            text: 0,
            start: 0,
            end: 3,
            nth: 0,
            of: 1,
            whole: true,
            count: 1,
        };
        let got = [PartIds {
            ids: vec![5, 70_000],
            ends: Vec::new(),
        }];
        let e = flatten(std::slice::from_ref(&part), &got, 2, None)
            .err()
            .unwrap();
        assert!(e.to_string().contains("token id 70000"), "{e}");
        let flat = flatten(&[part], &got, 4, None).unwrap();
        assert_eq!(flat.offsets, [0, 2]);
        assert_eq!(flat.bytes, [5, 0, 0, 0, 0x70, 0x11, 1, 0]);
    }
}
