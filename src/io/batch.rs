//! Encoding many texts at once on several threads (`encode_batch`).
//!
//! Workers take texts in turn (an atomic counter), each with its own cache kept across
//! its texts (warm from earlier calls), and send `(index, ids)` back; the calling
//! thread is one of the workers, and between its own texts receives finished texts in
//! text order as soon as the texts before them are done (one finished early waits as
//! the buffers it came in), so that what it does with them (building Python lists,
//! copying into one flat buffer) overlaps the encoding instead of following it.
//!
//! A long text is work for more than one thread: on several threads, a text of more
//! than two *units* (an eighth of the batch's bytes per thread, between 64 KB and
//! 1 MB) is cut at safe cuts ([`crate::io::chunking`], as file encoding cuts a file)
//! into parts of about a unit, the parts are encoded by whichever workers take them,
//! and the text is received whole, its parts' ids in order: the ids of encoding it
//! whole. A batch of a few unequal documents (a corpus of books, one shard batch)
//! then keeps every core busy to its end.
//!
//! Each text's ids are framed ([`Frame`]: BOS/EOS): the first part of a cut text
//! starts with the frame's `before`, its last part ends with `after`.
//!
//! Each text is first checked for disallowed special tokens, on its worker (a text cut
//! in parts: whole, before it is cut). A failing text stops the workers from taking
//! new texts; every text before it was already taken, so the error reported is always
//! that of the first failing text, whatever the timing.

use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};

use super::chunking::find_cut;
use crate::model::{check_disallowed, EncodeError, Frame, Model, SafeCuts};
use crate::pretok::SpecialMatcher;

/// Bytes of text one thread encodes between handing results over (see `encode_each`).
const GROUP_BYTES: usize = 1 << 16;

/// The smallest and largest part a long text of a batch is cut into (see the module
/// header).
pub(super) const MIN_UNIT: usize = 1 << 16;
pub(super) const MAX_UNIT: usize = 1 << 20;

/// A finished piece of work: its index in the plan, and its ids (with where each
/// text of a group ends) or the first text that failed and why.
pub type Done = (usize, Result<Encoded, (usize, EncodeError)>);

/// The ids of a piece of work; `ends`: where each text of a group of texts ends in
/// `ids` (empty for one text or a part of one).
pub struct Encoded {
    ids: Vec<u32>,
    ends: Vec<usize>,
}

/// Why a batch failed: a text did not encode (the first such text), or the receiver
/// gave up.
#[derive(Debug)]
pub enum BatchError<E> {
    Encode(EncodeError),
    Receive(E),
}

/// The special tokens of a batch: `allowed` are encoded as specials; finding any of
/// `disallowed` in a text is an error.
#[derive(Clone, Copy)]
pub struct Specials<'a> {
    pub allowed: &'a SpecialMatcher,
    pub disallowed: &'a SpecialMatcher,
}

/// Where a batch's worker threads come from.
#[derive(Clone, Copy)]
pub enum Workers<'p> {
    /// This many threads, started for the call and ended with it: nothing outlives a
    /// call, so a process that forks between calls loses no threads.
    Spawned(usize),
    /// The threads of a pool its owner keeps from batch to batch (a job of many
    /// batches: [`crate::py::documents::DocumentBatches`]). Starting threads for each
    /// block of a file cost a tenth of the encoding.
    Pool(&'p rayon::ThreadPool),
}

impl Workers<'_> {
    fn count(self) -> usize {
        match self {
            Workers::Spawned(n) => n,
            Workers::Pool(pool) => pool.current_num_threads(),
        }
    }

    /// Runs `work` on `n` threads, each with its own sender of `tx`, while `collect`
    /// runs on this thread (it sees the end of the messages once every worker is
    /// done); returns what `collect` returns.
    fn run<T: Send, R>(
        self,
        n: usize,
        tx: mpsc::Sender<T>,
        work: impl Fn(mpsc::Sender<T>) + Sync,
        collect: impl FnOnce() -> R,
    ) -> R {
        let work = &work;
        match self {
            Workers::Spawned(_) => std::thread::scope(|s| {
                for _ in 0..n {
                    let tx = tx.clone();
                    s.spawn(move || work(tx));
                }
                drop(tx);
                collect()
            }),
            Workers::Pool(pool) => pool.in_place_scope(|s| {
                for _ in 0..n {
                    let tx = tx.clone();
                    s.spawn(move |_| work(tx));
                }
                drop(tx);
                collect()
            }),
        }
    }
}

/// Checks one text and appends its ids to `out`, framed.
fn encode_into<M: Model>(
    model: &M,
    text: &str,
    specials: Specials,
    frame: &Frame,
    cache: &mut M::Cache,
    out: &mut Vec<u32>,
) -> Result<(), EncodeError> {
    check_disallowed(text, specials.disallowed)?;
    frame.around(out, |out| {
        model.encode_cached(text, specials.allowed, cache, out)
    })
}

/// Encodes every text on the `threads` workers, each framed by `frame`; `receive(index, ids)` runs on the calling
/// thread for each text, in text order, as soon as it and the texts before it are done. Every wait for the next finished
/// text goes through `wait(next)`, which must call `next` and return its result (the
/// bindings release the GIL there): `next` may encode a piece of work on the calling
/// thread (one of the workers) before it returns; with one thread, it encodes a group
/// of texts itself (and returns None), whose results are then received in order.
pub fn encode_each<M: Model, E>(
    model: &M,
    texts: &[&str],
    specials: Specials,
    frame: &Frame,
    threads: Workers,
    wait: impl FnMut(&mut (dyn FnMut() -> Option<Done> + Send)) -> Option<Done>,
    mut receive: impl FnMut(usize, &[u32]) -> Result<(), E>,
) -> Result<(), BatchError<E>> {
    encode_each_in_parts(
        model,
        texts,
        specials,
        frame,
        threads,
        wait,
        |i, parts| match parts {
            [ids] => receive(i, ids),
            parts => receive(i, &parts.concat()),
        },
    )
}

/// [`encode_each`], each text's ids received as the ids of its parts, in order (one
/// part, unless the text was cut): a caller that copies them somewhere anyway (one
/// flat buffer) need not have them joined first.
pub fn encode_each_in_parts<M: Model, E>(
    model: &M,
    texts: &[&str],
    specials: Specials,
    frame: &Frame,
    threads: Workers,
    mut wait: impl FnMut(&mut (dyn FnMut() -> Option<Done> + Send)) -> Option<Done>,
    mut receive: impl FnMut(usize, &[&[u32]]) -> Result<(), E>,
) -> Result<(), BatchError<E>> {
    let workers = threads.count().max(1).min(texts.len());
    if workers <= 1 {
        // One thread: texts are encoded a group at a time inside one `wait` (without
        // the GIL), then received. One `wait` per text cost more than encoding a short
        // text (a line of a SentencePiece corpus) itself. A group's ids go into one
        // buffer, kept from group to group: a vector per text was a malloc and a free
        // per line, and a realloc whenever a line had more ids than guessed.
        return model.with_cache(|cache| {
            let mut flat: Vec<u32> = Vec::new();
            let mut ends: Vec<usize> = Vec::new();
            let mut start = 0;
            while start < texts.len() {
                let end = group_end(texts, start);
                flat.clear();
                ends.clear();
                let mut failure = None;
                wait(&mut || {
                    for &text in &texts[start..end] {
                        if let Err(e) = encode_into(model, text, specials, frame, cache, &mut flat)
                        {
                            failure = Some(e); // the texts after it are never received
                            break;
                        }
                        ends.push(flat.len());
                    }
                    None
                });
                let mut from = 0;
                for (k, &to) in ends.iter().enumerate() {
                    receive(start + k, &[&flat[from..to]]).map_err(BatchError::Receive)?;
                    from = to;
                }
                if let Some(e) = failure {
                    return Err(BatchError::Encode(e));
                }
                start = end;
            }
            Ok(())
        });
    }
    let total: usize = texts.iter().map(|t| t.len()).sum();
    let parts = &plan_parts(model, texts, specials, unit(total, workers));
    let taken = &AtomicUsize::new(0);
    let stop = || taken.store(parts.len(), Ordering::Relaxed);
    // Id buffers the calling thread is done with, for the workers to fill again: a
    // fresh buffer per part made the kernel map and zero new pages for every part.
    let spare: &Mutex<Vec<Vec<u32>>> = &Mutex::new(Vec::new());
    // One too small is dropped, not grown: realloc would copy its old bytes.
    let reuse = |capacity: usize| {
        let ids = spare.lock().expect("no panics while held").pop();
        match ids.filter(|ids| ids.capacity() >= capacity) {
            Some(mut ids) => {
                ids.clear();
                ids
            }
            None => Vec::with_capacity(capacity),
        }
    };
    let recycle = |ids: Vec<u32>| spare.lock().expect("no panics while held").push(ids);
    // Each worker's cache, given back with the others' at the end: each learns
    // what the others merged ([`Model::give_back_caches`]).
    let used: Mutex<Vec<M::Cache>> = Mutex::new(Vec::with_capacity(workers));
    let (tx, mut rx) = mpsc::channel::<Done>();
    // One piece of work: its ids, or the first of its texts that failed and why.
    let encode_part =
        |part: &Part, cache: &mut M::Cache| -> Result<Encoded, (usize, EncodeError)> {
            if part.count > 1 {
                // A group of short whole texts: one message for all of them.
                let group = &texts[part.text..part.text + part.count];
                let bytes: usize = group.iter().map(|t| t.len()).sum();
                let mut ids = reuse(bytes / 3);
                let mut ends = Vec::with_capacity(group.len());
                for (n, &text) in group.iter().enumerate() {
                    if let Err(e) = encode_into(model, text, specials, frame, cache, &mut ids) {
                        stop();
                        return Err((part.text + n, e));
                    }
                    ends.push(ids.len());
                }
                return Ok(Encoded { ids, ends });
            }
            let text = &texts[part.text][part.start..part.end];
            let mut ids = reuse(text.len() / 3);
            let done = if part.whole {
                encode_into(model, text, specials, frame, cache, &mut ids)
            } else {
                // The frame around the whole text: before its first part, after its last.
                if part.nth == 0 {
                    ids.extend_from_slice(&frame.before);
                }
                let done = model.encode_cached(text, specials.allowed, cache, &mut ids);
                if part.nth + 1 == part.of {
                    ids.extend_from_slice(&frame.after);
                }
                done
            };
            match done {
                Ok(()) => Ok(Encoded {
                    ids,
                    ends: Vec::new(),
                }),
                Err(e) => {
                    stop();
                    Err((part.text, e))
                }
            }
        };
    // The next piece of work nobody has taken, encoded with `cache`.
    let encode_next = |cache: &mut M::Cache| -> Option<Done> {
        let k = taken.fetch_add(1, Ordering::Relaxed);
        parts.get(k).map(|part| (k, encode_part(part, cache)))
    };
    let work = |tx: mpsc::Sender<Done>| {
        let mut owned = model.take_cache();
        while let Some(done) = encode_next(&mut owned) {
            if tx.send(done).is_err() {
                break;
            }
        }
        used.lock().unwrap_or_else(|e| e.into_inner()).push(owned);
    };
    // This thread is one of the workers too, between receiving finished work: a third
    // thread on two cores took a core from a worker each time it woke up to place a
    // text's ids (0.9 ms of a 15 ms call, per worker), and the second worker
    // started up to 2 ms late now and then.
    let result = threads.run(workers - 1, tx, work, || {
        let rx = &mut rx;
        let used = &used;
        let mut mine = Some(model.take_cache());
        let mut next = move || {
            if let Ok(done) = rx.try_recv() {
                return Some(done);
            }
            if let Some(done) = mine.as_mut().and_then(&encode_next) {
                return Some(done);
            }
            // Nothing left to take: this thread's cache goes with the others', and
            // it waits for the other workers' last pieces.
            if let Some(cache) = mine.take() {
                used.lock().unwrap_or_else(|e| e.into_inner()).push(cache);
            }
            rx.recv().ok()
        };
        let mut first_failure: Option<(usize, EncodeError)> = None;
        let mut refused = None;
        // The parts so far of the cut text being received (they come in turn).
        let mut cut: Vec<Vec<u32>> = Vec::new();
        // Parts finished before a part ahead of them: received in order, so a text
        // that finishes early waits as its parts' buffers (no copy of it is made).
        let mut waiting: BTreeMap<usize, Encoded> = BTreeMap::new();
        let mut in_turn = 0;
        while let Some((k, done)) = wait(&mut next) {
            match done {
                Err((failed, e)) => {
                    if first_failure.as_ref().is_none_or(|f| failed < f.0) {
                        first_failure = Some((failed, e));
                    }
                    continue;
                }
                Ok(encoded) => waiting.insert(k, encoded),
            };
            while let Some(encoded) = waiting.remove(&in_turn) {
                let part = &parts[in_turn];
                in_turn += 1;
                let i = part.text;
                match encoded {
                    group if part.count > 1 && first_failure.is_none() && refused.is_none() => {
                        let mut from = 0;
                        for (n, &to) in group.ends.iter().enumerate() {
                            if let Err(e) = receive(i + n, &[&group.ids[from..to]]) {
                                stop();
                                refused = Some(e);
                                break;
                            }
                            from = to;
                        }
                        recycle(group.ids);
                    }
                    Encoded { ids, .. } if first_failure.is_none() && refused.is_none() => {
                        debug_assert_eq!(cut.len(), part.nth, "a text's parts come in turn");
                        cut.push(ids);
                        if part.nth + 1 == part.of {
                            let slices: Vec<&[u32]> = cut.iter().map(Vec::as_slice).collect();
                            if let Err(e) = receive(i, &slices) {
                                stop();
                                refused = Some(e);
                            }
                            cut.drain(..).for_each(recycle);
                        }
                    }
                    _ => {} // failed already: only draining the workers
                }
            }
        }
        match (first_failure, refused) {
            (Some((_, e)), _) => Err(BatchError::Encode(e)),
            (None, Some(e)) => Err(BatchError::Receive(e)),
            (None, None) => Ok(()),
        }
    });
    model.give_back_caches(used.into_inner().unwrap_or_else(|e| e.into_inner()));
    result
}

/// A piece of work for one thread: `texts[text][start..end]`, part `nth` of the `of`
/// parts its text is cut into. `whole`: the text is not cut, and its worker checks it
/// for disallowed special tokens (a cut text is checked before it is cut). `count`:
/// how many whole texts from `text` on this piece is (more than one: a group of short
/// texts, sent back in one message: a message per short text cost more than encoding
/// it, and two threads were no faster than one on a batch of lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Part {
    pub(super) text: usize,
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) nth: usize,
    pub(super) of: usize,
    pub(super) whole: bool,
    pub(super) count: usize,
}

/// The part size of a batch of `total` bytes on `workers` threads: about 32 parts a
/// thread, between [`MIN_UNIT`] and [`MAX_UNIT`].
fn unit(total: usize, workers: usize) -> usize {
    (total / (workers * 32)).clamp(MIN_UNIT, MAX_UNIT)
}

/// The work of a batch, in text order: each text whole, or cut in parts of about
/// `unit` bytes at safe cuts when it is longer than two units and the model allows
/// cuts. A cut text with a disallowed special token is not cut: its worker finds the
/// token, so the error is the first failing text's, as for any text. Short whole texts
/// go in groups ([`group_end`], as the one-thread path groups them).
pub(super) fn plan_parts<M: Model>(
    model: &M,
    texts: &[&str],
    specials: Specials,
    unit: usize,
) -> Vec<Part> {
    let text_cuts = match model.safe_cuts() {
        SafeCuts::AtSpecials { text } => Some(text),
        SafeCuts::Nowhere => None,
    };
    let mut parts = Vec::new();
    let mut i = 0;
    while i < texts.len() {
        let text = texts[i];
        let Some(text_cuts) = text_cuts.filter(|_| {
            text.len() > 2 * unit && check_disallowed(text, specials.disallowed).is_ok()
        }) else {
            // Whole, with the short texts after it (a group of up to GROUP_BYTES: a
            // text that long, never cut, since a unit is at least MIN_UNIT).
            let end = group_end(texts, i);
            parts.push(Part {
                text: i,
                start: 0,
                end: text.len(),
                nth: 0,
                of: 1,
                whole: true,
                count: end - i,
            });
            i = end;
            continue;
        };
        let buf = text.as_bytes();
        let matches = specials.allowed.find_all(buf);
        let mut cuts = vec![0];
        let (mut lo, mut hi) = (0, unit);
        // The last cut in each unit; a unit without one grows the part by a unit. The
        // last part is between one and two units long (or longer, without cuts).
        while hi + unit < buf.len() {
            if let Some(cut) = find_cut(buf, lo, hi, &matches, text_cuts, specials.allowed) {
                cuts.push(cut);
                lo = cut;
                hi = cut + unit;
            } else {
                lo = hi;
                hi += unit;
            }
        }
        cuts.push(buf.len());
        let of = cuts.len() - 1;
        for (nth, pair) in cuts.windows(2).enumerate() {
            parts.push(Part {
                text: i,
                start: pair[0],
                end: pair[1],
                nth,
                of,
                whole: of == 1,
                count: 1,
            });
        }
        i += 1;
    }
    parts
}

/// The end of the group of texts that starts at `start`: the texts after it join while
/// all of them total at most [`GROUP_BYTES`] (a text that long or longer is alone).
fn group_end(texts: &[&str], start: usize) -> usize {
    let mut end = start + 1;
    let mut bytes = texts[start].len();
    while end < texts.len() && bytes + texts[end].len() <= GROUP_BYTES {
        bytes += texts[end].len();
        end += 1;
    }
    end
}

/// At least as many ids as `texts` encode to, framed (sizes [`encode_flat`]'s output).
pub fn most_ids<M: Model>(model: &M, texts: &[&str], frame: &Frame) -> usize {
    texts.iter().map(|t| model.most_ids(t) + frame.len()).sum()
}

/// Writes `ids` into the first `4 * ids.len()` bytes of `dst` as little-endian uint32:
/// one memcpy on a little-endian CPU.
pub(super) fn write_le(dst: &mut [MaybeUninit<u8>], ids: &[u32]) {
    let dst = &mut dst[..ids.len() * 4];
    #[cfg(target_endian = "little")]
    // SAFETY: `dst` is `4 * ids.len()` bytes, apart from `ids`; on a little-endian CPU
    // a u32's bytes in memory are its little-endian bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(
            ids.as_ptr().cast::<u8>(),
            dst.as_mut_ptr().cast::<u8>(),
            dst.len(),
        );
    }
    #[cfg(not(target_endian = "little"))]
    for (d, id) in dst.chunks_exact_mut(4).zip(ids) {
        for (d, b) in d.iter_mut().zip(id.to_le_bytes()) {
            d.write(b);
        }
    }
}

/// Encodes every text like [`encode_each`] and writes all their ids, in text order,
/// one after another into `out` as little-endian uint32. Returns the `texts.len() + 1`
/// offsets (in ids) where each text's ids start and the last ends.
///
/// `out` must hold 4 bytes per id [`most_ids`] allows. It may be
/// uninitialised: only the bytes before the last offset are written, so pages never
/// written cost no memory, and nothing is reallocated while the workers run (moving a
/// large buffer unmaps pages, which interrupts the other cores to flush their TLBs).
pub fn encode_flat<M: Model>(
    model: &M,
    texts: &[&str],
    specials: Specials,
    frame: &Frame,
    threads: Workers,
    out: &mut [MaybeUninit<u8>],
) -> Result<Vec<u64>, EncodeError> {
    assert!(
        out.len() >= most_ids(model, texts, frame) * 4,
        "the output holds 4 bytes per id the model may give"
    );
    let mut offsets = Vec::with_capacity(texts.len() + 1);
    offsets.push(0u64);
    let placed = encode_each_in_parts(
        model,
        texts,
        specials,
        frame,
        threads,
        |next| next(),
        |i, parts| {
            // In text order (`encode_each_in_parts` receives parts in turn): each
            // text's ids right after the last one's.
            debug_assert_eq!(i + 1, offsets.len(), "texts are received in order");
            let mut written = *offsets.last().expect("offsets start with 0") as usize;
            for ids in parts {
                write_le(&mut out[written * 4..], ids);
                written += ids.len();
            }
            offsets.push(written as u64);
            Ok::<(), std::convert::Infallible>(())
        },
    );
    match placed {
        Ok(()) => Ok(offsets),
        Err(BatchError::Encode(e)) => Err(e),
        Err(BatchError::Receive(never)) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpe::encoder::tests::minbpe_encoder;
    use crate::pretok::GPT2_PATTERN;

    /// Every special token allowed, none refused.
    fn allowing_all(e: &crate::bpe::Encoder) -> Specials<'_> {
        Specials {
            allowed: e.all_specials(),
            disallowed: e.no_specials(),
        }
    }

    /// The ids of each text encoded alone, whole.
    fn each_whole(e: &crate::bpe::Encoder, texts: &[&str]) -> Vec<Vec<u32>> {
        texts
            .iter()
            .map(|t| e.encode(t, e.all_specials()).unwrap())
            .collect()
    }

    fn texts() -> Vec<String> {
        (0..200)
            .map(|i| "aaab daaab ".repeat(i % 7) + &"ac ".repeat(i % 3))
            .collect()
    }

    /// A frame of a BOS and a two-id EOS.
    fn framing() -> Frame {
        Frame {
            before: vec![7],
            after: vec![8, 9],
        }
    }

    /// `ids` inside `frame`.
    fn framed(frame: &Frame, ids: &[u32]) -> Vec<u32> {
        [&frame.before[..], ids, &frame.after[..]].concat()
    }

    #[test]
    fn flat_output_is_every_text_in_order_whatever_the_threads_or_pool() {
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        let texts = texts();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let specials = allowing_all(&e);
        let frames = [Frame::default(), framing()];
        let pools: Vec<rayon::ThreadPool> = [1, 2, 3]
            .iter()
            .map(|&n| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n)
                    .build()
                    .unwrap()
            })
            .collect();
        let workers = [1, 2, 5]
            .map(Workers::Spawned)
            .into_iter()
            .chain(pools.iter().map(Workers::Pool));
        for (threads, frame) in workers.flat_map(|t| frames.iter().map(move |f| (t, f))) {
            let want: Vec<Vec<u32>> = each_whole(&e, &texts)
                .iter()
                .map(|w| framed(frame, w))
                .collect();
            let mut out = vec![MaybeUninit::new(0u8); most_ids(&e, &texts, frame) * 4];
            let offsets = encode_flat(&e, &texts, specials, frame, threads, &mut out).unwrap();
            assert_eq!(offsets.len(), texts.len() + 1);
            // SAFETY: every byte was initialised above.
            let bytes: Vec<u8> = out.iter().map(|b| unsafe { b.assume_init() }).collect();
            let ids: Vec<u32> = bytes[..*offsets.last().unwrap() as usize * 4]
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            for (i, w) in want.iter().enumerate() {
                assert_eq!(&ids[offsets[i] as usize..offsets[i + 1] as usize], w);
            }
        }
    }

    #[test]
    fn the_first_text_with_a_disallowed_token_is_the_error() {
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        let mut texts = texts();
        texts[150] += "<|e|>";
        texts[40] += "x<|e|>";
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let specials = Specials {
            allowed: e.no_specials(),
            disallowed: e.all_specials(),
        };
        for threads in [1, 3] {
            let mut got = Vec::new();
            let result = encode_each(
                &e,
                &texts,
                specials,
                &Frame::default(),
                Workers::Spawned(threads),
                |next| next(),
                |i, _| {
                    got.push(i);
                    Ok::<(), ()>(())
                },
            );
            assert!(matches!(
                result,
                Err(BatchError::Encode(EncodeError::Disallowed { ref token })) if token == "<|e|>"
            ));
            assert!(got.iter().all(|&i| i != 40 && i != 150));
            if threads == 1 {
                // In order, every text before the failing one, none after it.
                assert_eq!(got, (0..40).collect::<Vec<_>>());
            }
        }
    }

    /// Long texts with special tokens, newlines and spaces at odd places, and a run
    /// without any cut.
    fn long_texts() -> Vec<String> {
        let mut texts = Vec::new();
        for i in 0..4 {
            let mut t = String::new();
            for k in 0..(30_000 + 3_000 * i) {
                t += match (k * 7 + i) % 11 {
                    0 => "aaab<|e|>",
                    1 => "daaab.\nac ",
                    2 => "ab  ",
                    3 => "<|e|>",
                    4 => "x.\nb",
                    _ => "aab dac ",
                };
            }
            texts.push(t);
        }
        texts.push("a".repeat(200_000)); // no safe cut at all
        texts.push("short".into());
        texts
    }

    #[test]
    fn long_texts_are_cut_at_safe_cuts_into_parts_that_encode_as_the_whole() {
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        let texts = long_texts();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let specials = allowing_all(&e);
        for unit in [1000, 4096, MIN_UNIT] {
            let parts = plan_parts(&e, &texts, specials, unit);
            for (i, text) in texts.iter().enumerate() {
                let mine: Vec<&Part> = parts.iter().filter(|p| p.text == i).collect();
                assert_eq!(mine[0].start, 0);
                assert_eq!(mine.last().unwrap().end, text.len());
                assert!(mine.windows(2).all(|w| w[0].end == w[1].start));
                let mut ids = Vec::new();
                for (nth, part) in mine.iter().enumerate() {
                    assert_eq!(
                        (part.nth, part.of, part.whole),
                        (nth, mine.len(), mine.len() == 1)
                    );
                    ids.extend(
                        e.encode(&text[part.start..part.end], e.all_specials())
                            .unwrap(),
                    );
                }
                assert_eq!(
                    ids,
                    e.encode(text, e.all_specials()).unwrap(),
                    "text {i}, unit {unit}"
                );
                if text.len() > 2 * unit && i < 4 {
                    assert!(mine.len() > 1, "a long text with cuts is cut");
                }
            }
            let no_cuts = parts.iter().filter(|p| p.text == 4).count();
            assert_eq!(no_cuts, 1, "a run without a safe cut stays whole");
        }
    }

    #[test]
    fn a_batch_of_long_texts_gives_the_ids_of_each_whole_on_any_threads() {
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        let texts = long_texts();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let specials = allowing_all(&e);
        let want = each_whole(&e, &texts);
        let total: usize = texts.iter().map(|t| t.len()).sum();
        let unit = (total / (2 * 8)).clamp(MIN_UNIT, MAX_UNIT);
        let parts = plan_parts(&e, &texts, specials, unit);
        assert!(parts.len() >= texts.len() + 4, "the long texts are cut");
        for (threads, frame) in [(2, Frame::default()), (3, Frame::default()), (2, framing())] {
            let want: Vec<Vec<u32>> = want.iter().map(|w| framed(&frame, w)).collect();
            let mut got = vec![None; texts.len()];
            let mut order = Vec::new();
            encode_each(
                &e,
                &texts,
                specials,
                &frame,
                Workers::Spawned(threads),
                |next| next(),
                |i, ids| {
                    assert!(got[i].is_none(), "each text is received once");
                    got[i] = Some(ids.to_vec());
                    order.push(i);
                    Ok::<(), ()>(())
                },
            )
            .unwrap();
            assert_eq!(order, (0..texts.len()).collect::<Vec<_>>(), "in text order");
            let got: Vec<Vec<u32>> = got.into_iter().map(Option::unwrap).collect();
            assert_eq!(got, want, "{threads} threads, {frame:?}");
        }
    }

    #[test]
    fn a_long_text_with_a_disallowed_token_fails_whole_and_first() {
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        let mut texts = long_texts();
        texts[2] = texts[2].replace("<|e|>", "");
        texts[3] = texts[3].replace("<|e|>", "");
        let at = texts[2].len() / 2;
        texts[2].insert_str(at, "<|e|>");
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let specials = Specials {
            allowed: e.no_specials(),
            disallowed: e.all_specials(),
        };
        let parts = plan_parts(&e, &texts[2..4], specials, 4096);
        assert_eq!(parts.iter().filter(|p| p.text == 0).count(), 1, "not cut");
        assert!(parts.iter().filter(|p| p.text == 1).count() > 1, "cut");
        let result = encode_each(
            &e,
            &texts[2..4],
            specials,
            &Frame::default(),
            Workers::Spawned(2),
            |next| next(),
            |_, _| Ok::<(), ()>(()),
        );
        assert!(matches!(
            result,
            Err(BatchError::Encode(EncodeError::Disallowed { ref token })) if token == "<|e|>"
        ));
    }

    #[test]
    fn short_texts_go_to_the_threads_in_groups_each_text_once_in_order() {
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        let texts = texts();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let parts = plan_parts(&e, &texts, allowing_all(&e), MIN_UNIT);
        assert!(
            parts.len() < 10,
            "{} pieces of work for 200 short texts",
            parts.len()
        );
        let covered: Vec<usize> = parts
            .iter()
            .flat_map(|p| p.text..p.text + p.count)
            .collect();
        assert_eq!(covered, (0..texts.len()).collect::<Vec<_>>());
        // A text too long for a group stays alone between groups.
        let mut with_long = texts.clone();
        let long = "ab ".repeat(GROUP_BYTES / 3 + 10);
        with_long[100] = &long;
        let parts = plan_parts(&e, &with_long, allowing_all(&e), 4 * GROUP_BYTES);
        let alone = parts
            .iter()
            .find(|p| p.text == 100)
            .expect("text 100 starts a piece");
        assert_eq!(alone.count, 1);
        assert!(parts
            .iter()
            .all(|p| p.text > 100 || p.text + p.count <= 100 || p.text == 100));
    }

    #[test]
    fn one_thread_receives_each_text_alone_across_groups() {
        // Over three groups' worth of text, so the kept buffer is reused.
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        let texts: Vec<String> = (0..3 * GROUP_BYTES / 40)
            .map(|i| "aaab daaab ".repeat(i % 5) + &"ac ".repeat(i % 4))
            .collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let specials = allowing_all(&e);
        let mut got = Vec::new();
        encode_each(
            &e,
            &texts,
            specials,
            &Frame::default(),
            Workers::Spawned(1),
            |next| next(),
            |i, ids| {
                got.push((i, ids.to_vec()));
                Ok::<(), ()>(())
            },
        )
        .unwrap();
        let want: Vec<(usize, Vec<u32>)> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| (i, e.encode(t, e.all_specials()).unwrap()))
            .collect();
        assert_eq!(got, want);
    }
}
