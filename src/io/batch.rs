//! Encoding many texts at once on several threads (`encode_batch`).
//!
//! Workers take texts in turn (an atomic counter), each with its own cache kept across
//! its texts (warm from earlier calls), and send `(index, ids)` back; the calling
//! thread is one of the workers, and between its own texts receives finished texts in
//! text order as soon as the texts before them are done (one finished early waits as
//! the buffers it came in), so that what it does with them (building Python lists)
//! overlaps the encoding instead of following it. Into one flat buffer
//! ([`encode_flat`]), nothing needs the calling thread: each worker places what it
//! encoded itself, in text order.
//!
//! A long text is work for more than one thread: on several threads, a text of more
//! than two *units* (a thirty-second of the batch's bytes per thread, between 64 KB
//! and 1 MB; a quarter of that over the batch's last two units a thread, so that the
//! workers end together: [`Units`]) is cut at safe cuts ([`crate::io::chunking`], as
//! file encoding cuts a file) into parts of about a unit, the parts are encoded by
//! whichever workers take them, and the text is received whole, its parts' ids in
//! order: the ids of encoding it whole. A batch of a few unequal documents (a corpus
//! of books, one shard batch) then keeps every core busy to its end.
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
pub type Done = (usize, Result<Encoded, Failure>);

/// A text that failed: its index, where in it (the refused token's offset, else where
/// the failing part starts), and why. The batch's error is the first failing text's,
/// and of a text cut in parts, its first refused token if it has one, as for the
/// text whole ([`Plan::first_failure`], [`Plan::settle`]).
pub type Failure = (usize, usize, EncodeError);

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
                let end = group_end(texts, start, GROUP_BYTES);
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
    let plan = &Plan::new(model, texts, specials, frame, workers);
    // Each worker's cache, given back with the others' at the end: each learns
    // what the others merged ([`Model::give_back_caches`]).
    let caches = &BatchCaches::new(model, workers);
    let used: Mutex<Vec<M::Cache>> = Mutex::new(Vec::with_capacity(workers));
    let (tx, mut rx) = mpsc::channel::<Done>();
    let work = |tx: mpsc::Sender<Done>| {
        let mut owned = caches.take();
        while let Some(done) = plan.encode_next(&mut owned) {
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
        let mut mine = Some(caches.take());
        let mut next = move || {
            if let Ok(done) = rx.try_recv() {
                return Some(done);
            }
            if let Some(done) = mine.as_mut().and_then(|cache| plan.encode_next(cache)) {
                return Some(done);
            }
            // Nothing left to take: this thread's cache goes with the others', and
            // it waits for the other workers' last pieces.
            if let Some(cache) = mine.take() {
                used.lock().unwrap_or_else(|e| e.into_inner()).push(cache);
            }
            rx.recv().ok()
        };
        let mut first_failure: Option<Failure> = None;
        let mut refused = None;
        // The parts so far of the cut text being received (they come in turn).
        let mut cut: Vec<Vec<u32>> = Vec::new();
        // Parts finished before a part ahead of them: received in order, so a text
        // that finishes early waits as its parts' buffers (no copy of it is made).
        let mut waiting: BTreeMap<usize, Encoded> = BTreeMap::new();
        let mut in_turn = 0;
        while let Some((k, done)) = wait(&mut next) {
            match done {
                Err(failed) => {
                    Plan::<M>::keep_first(&mut first_failure, failed);
                    continue;
                }
                Ok(encoded) => waiting.insert(k, encoded),
            };
            while let Some(encoded) = waiting.remove(&in_turn) {
                let part = &plan.parts[in_turn];
                in_turn += 1;
                let i = part.text;
                match encoded {
                    group if part.count > 1 && first_failure.is_none() && refused.is_none() => {
                        let mut from = 0;
                        for (n, &to) in group.ends.iter().enumerate() {
                            if let Err(e) = receive(i + n, &[&group.ids[from..to]]) {
                                plan.stop();
                                refused = Some(e);
                                break;
                            }
                            from = to;
                        }
                        plan.recycle(group.ids);
                    }
                    Encoded { ids, .. } if first_failure.is_none() && refused.is_none() => {
                        debug_assert_eq!(cut.len(), part.nth, "a text's parts come in turn");
                        cut.push(ids);
                        if part.nth + 1 == part.of {
                            let slices: Vec<&[u32]> = cut.iter().map(Vec::as_slice).collect();
                            if let Err(e) = receive(i, &slices) {
                                plan.stop();
                                refused = Some(e);
                            }
                            cut.drain(..).for_each(|ids| plan.recycle(ids));
                        }
                    }
                    _ => {} // failed already: only draining the workers
                }
            }
        }
        match (first_failure, refused) {
            (Some(failed), _) => Err(BatchError::Encode(plan.settle(failed))),
            (None, Some(e)) => Err(BatchError::Receive(e)),
            (None, None) => Ok(()),
        }
    });
    caches.give_back(used);
    result
}

/// The caches of a batch's workers ([`Model::take_caches`]), each taken by one.
struct BatchCaches<'a, M: Model> {
    model: &'a M,
    caches: Mutex<Vec<M::Cache>>,
}

impl<'a, M: Model> BatchCaches<'a, M> {
    fn new(model: &'a M, workers: usize) -> Self {
        Self {
            model,
            caches: Mutex::new(model.take_caches(workers)),
        }
    }

    /// A worker's cache (one from the pool, should a worker come past those taken).
    fn take(&self) -> M::Cache {
        let cache = self.caches.lock().unwrap_or_else(|e| e.into_inner()).pop();
        cache.unwrap_or_else(|| self.model.take_cache())
    }

    /// Gives the workers' caches back together ([`Model::give_back_caches`]), with
    /// any no worker took.
    fn give_back(&self, used: Mutex<Vec<M::Cache>>) {
        let mut used = used.into_inner().unwrap_or_else(|e| e.into_inner());
        used.append(&mut self.caches.lock().unwrap_or_else(|e| e.into_inner()));
        self.model.give_back_caches(used);
    }
}

/// What the workers of a multi-thread batch share: its parts, the next part nobody has
/// taken, and id buffers to fill again.
struct Plan<'a, M: Model> {
    model: &'a M,
    texts: &'a [&'a str],
    specials: Specials<'a>,
    frame: &'a Frame,
    parts: Vec<Part>,
    taken: AtomicUsize,
    /// Id buffers a part's ids were placed from, for the workers to fill again: a
    /// fresh buffer per part made the kernel map and zero new pages for every part.
    spare: Mutex<Vec<Vec<u32>>>,
}

impl<'a, M: Model> Plan<'a, M> {
    fn new(
        model: &'a M,
        texts: &'a [&'a str],
        specials: Specials<'a>,
        frame: &'a Frame,
        workers: usize,
    ) -> Self {
        let total: usize = texts.iter().map(|t| t.len()).sum();
        Self {
            model,
            texts,
            specials,
            frame,
            parts: plan_parts(model, texts, specials, Units::for_batch(total, workers)),
            taken: AtomicUsize::new(0),
            spare: Mutex::new(Vec::new()),
        }
    }

    /// No worker takes another part (a text failed).
    fn stop(&self) {
        self.taken.store(self.parts.len(), Ordering::Relaxed);
    }

    /// A spare buffer with room for `capacity` ids, or a new one. One too small is
    /// dropped, not grown: realloc would copy its old bytes.
    fn reuse(&self, capacity: usize) -> Vec<u32> {
        let ids = self.spare.lock().expect("no panics while held").pop();
        match ids.filter(|ids| ids.capacity() >= capacity) {
            Some(mut ids) => {
                ids.clear();
                ids
            }
            None => Vec::with_capacity(capacity),
        }
    }

    fn recycle(&self, ids: Vec<u32>) {
        self.spare.lock().expect("no panics while held").push(ids);
    }

    /// The next part nobody has taken, encoded with `cache`.
    fn encode_next(&self, cache: &mut M::Cache) -> Option<Done> {
        let k = self.taken.fetch_add(1, Ordering::Relaxed);
        self.parts
            .get(k)
            .map(|part| (k, self.encode_part(part, cache)))
    }

    /// One part's ids, or the first of its texts that failed and why (then no worker
    /// takes another part).
    fn encode_part(&self, part: &Part, cache: &mut M::Cache) -> Result<Encoded, Failure> {
        let (model, specials, frame) = (self.model, self.specials, self.frame);
        if part.count > 1 {
            // A group of short whole texts: one message for all of them.
            let group = &self.texts[part.text..part.text + part.count];
            let bytes: usize = group.iter().map(|t| t.len()).sum();
            let mut ids = self.reuse(bytes / 3);
            let mut ends = Vec::with_capacity(group.len());
            for (n, &text) in group.iter().enumerate() {
                if let Err(e) = encode_into(model, text, specials, frame, cache, &mut ids) {
                    self.stop();
                    return Err((part.text + n, 0, e));
                }
                ends.push(ids.len());
            }
            return Ok(Encoded { ids, ends });
        }
        let whole_text = self.texts[part.text];
        let text = &whole_text[part.start..part.end];
        if !part.whole {
            if let Some(at) = refused_in_part(whole_text, part, specials.disallowed) {
                self.stop();
                let token = specials.disallowed.tokens()[at.1].clone();
                return Err((part.text, at.0, EncodeError::Disallowed { token }));
            }
        }
        let mut ids = self.reuse(text.len() / 3);
        let done = if part.whole {
            encode_into(model, text, specials, frame, cache, &mut ids)
        } else {
            // The frame around the whole text: before its first part, after its last.
            if part.nth == 0 {
                ids.extend_from_slice(&frame.before);
            }
            let starts = part.start == 0;
            let done = model.encode_part_cached(text, starts, specials.allowed, cache, &mut ids);
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
                self.stop();
                Err((part.text, part.start, e))
            }
        }
    }

    /// Whether failure `a` is reported before `b`: an earlier text's; in the same
    /// text, a refused token before any other error, and the first refused token.
    fn first_failure(a: &Failure, b: &Failure) -> bool {
        let key = |f: &Failure| {
            let other = !matches!(f.2, EncodeError::Disallowed { .. });
            (f.0, other, f.1)
        };
        key(a) < key(b)
    }

    /// `failed` in `first` if it is reported before what `first` holds.
    fn keep_first(first: &mut Option<Failure>, failed: Failure) {
        if first
            .as_ref()
            .is_none_or(|f| Self::first_failure(&failed, f))
        {
            *first = Some(failed);
        }
    }

    /// The batch's error for its first failure: a text whole refuses its first
    /// disallowed token before anything else fails, and the part holding it may not
    /// have been taken once another part failed otherwise.
    fn settle(&self, (text, _, e): Failure) -> EncodeError {
        if matches!(e, EncodeError::Disallowed { .. }) {
            return e;
        }
        check_disallowed(self.texts[text], self.specials.disallowed)
            .err()
            .unwrap_or(e)
    }
}

/// The first disallowed special token starting inside a cut text's part, as `(offset
/// in the text, index of the token)`: looked for from the part's start to as far past
/// its end as a token reaches, so that a token across the cut after it is found, and
/// by this part alone (a token starting before the part's start was found by the
/// part before it, and the first one found this way is the text's first: no token
/// starts before it in the text). Each part of a text checks its own, on the workers,
/// instead of the whole text before it is cut, serially: 4% of a two-thread batch of
/// English books.
fn refused_in_part(text: &str, part: &Part, disallowed: &SpecialMatcher) -> Option<(usize, usize)> {
    if disallowed.is_empty() {
        return None;
    }
    let reach = (part.end + disallowed.max_len().saturating_sub(1)).min(text.len());
    let (start, _, index) = disallowed.find_first(&text.as_bytes()[part.start..reach])?;
    (part.start + start < part.end).then_some((part.start + start, index))
}

/// A piece of work for one thread: `texts[text][start..end]`, part `nth` of the `of`
/// parts its text is cut into. `whole`: the text is not cut, and its worker checks it
/// for disallowed special tokens (each part of a cut text checks its own stretch:
/// [`refused_in_part`]). `count`:
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

/// The smallest part of a batch's tail ([`Units::fine`]).
const MIN_FINE: usize = 16 << 10;

/// The sizes a batch is planned in: parts of about `unit` bytes, but finer ones
/// ([`Units::fine`], and groups of short texts no larger, nor larger than anywhere
/// else) for the texts that end past `tail_start` (a byte offset in the batch, its
/// texts one after another; `usize::MAX`: no tail).
///
/// Workers take parts in turn, so a batch ends when the last part taken is done: with
/// parts of a unit throughout (a whole text of up to two), the other worker waited for
/// it. A two-thread batch of 50 multilingual texts of 78 KB each kept its two cores
/// busy 95-96% of the time.
#[derive(Clone, Copy, Debug)]
pub(super) struct Units {
    pub(super) unit: usize,
    pub(super) tail_start: usize,
}

impl Units {
    /// Parts of about `unit` bytes throughout.
    pub(super) fn even(unit: usize) -> Self {
        Self {
            unit,
            tail_start: usize::MAX,
        }
    }

    /// A batch of `total` bytes on `workers` threads: its last two units a worker in
    /// fine parts (a part before them is at most two units: a whole text).
    fn for_batch(total: usize, workers: usize) -> Self {
        let unit = unit(total, workers);
        Self {
            unit,
            tail_start: total.saturating_sub(2 * workers * unit),
        }
    }

    /// The part size of the tail: a quarter of a unit, at least [`MIN_FINE`].
    fn fine(self) -> usize {
        (self.unit / 4).max(MIN_FINE)
    }
}

/// The work of a batch, in text order: each text whole, or cut in parts of about a
/// unit at safe cuts when it is longer than two units and the model allows cuts (each
/// part of a cut text then checks itself for disallowed special tokens:
/// [`refused_in_part`]). Short whole texts go in groups ([`group_end`], as the
/// one-thread path groups them). The texts that end in the batch's tail are planned in
/// fine units ([`Units`]), and no group of texts before it reaches into it.
pub(super) fn plan_parts<M: Model>(
    model: &M,
    texts: &[&str],
    specials: Specials,
    units: Units,
) -> Vec<Part> {
    let text_cuts = match model.safe_cuts() {
        SafeCuts::AtSpecials { text } => Some(text),
        SafeCuts::Nowhere => None,
    };
    let mut parts = Vec::new();
    let mut before = 0; // bytes of the texts before text `i`
    let mut i = 0;
    while i < texts.len() {
        let text = texts[i];
        // The unit of a part starting at `at` in this text.
        let unit_at = |at: usize| {
            if before + at >= units.tail_start {
                units.fine()
            } else {
                units.unit
            }
        };
        let in_tail = before + text.len() > units.tail_start;
        let (smallest, group_bytes) = if in_tail {
            (units.fine(), units.fine().min(GROUP_BYTES))
        } else {
            (units.unit, GROUP_BYTES.min(units.tail_start - before))
        };
        let Some(text_cuts) = text_cuts.filter(|_| text.len() > 2 * smallest) else {
            // Whole, with the short texts after it (a group of up to `group_bytes`,
            // which is less than two units: no text that long is cut).
            let end = group_end(texts, i, group_bytes);
            parts.push(Part {
                text: i,
                start: 0,
                end: text.len(),
                nth: 0,
                of: 1,
                whole: true,
                count: end - i,
            });
            before += texts[i..end].iter().map(|t| t.len()).sum::<usize>();
            i = end;
            continue;
        };
        let buf = text.as_bytes();
        let matches = specials.allowed.find_all(buf);
        let mut cuts = vec![0];
        let (mut lo, mut hi) = (0, unit_at(0));
        // The last cut in each unit; a unit without one grows the part by a unit. The
        // last part is between one and two units long (or longer, without cuts).
        while hi + unit_at(hi) < buf.len() {
            if let Some(cut) = find_cut(buf, lo, hi, &matches, text_cuts, specials.allowed) {
                cuts.push(cut);
                lo = cut;
                hi = cut + unit_at(cut);
            } else {
                lo = hi;
                hi += unit_at(hi);
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
        before += text.len();
        i += 1;
    }
    parts
}

/// The end of the group of texts that starts at `start`: the texts after it join while
/// all of them total at most `limit` bytes (a text that long or longer is alone).
fn group_end(texts: &[&str], start: usize, limit: usize) -> usize {
    let mut end = start + 1;
    let mut bytes = texts[start].len();
    while end < texts.len() && bytes + texts[end].len() <= limit {
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

/// [`write_le`] for a batch's flat output: `ids` of at least [`STREAM_BYTES`] go
/// around the caches on x86-64 (non-temporal stores), the rest through them.
///
/// A flat output is written once, far more of it than a core's cache holds, and
/// nothing reads it before the batch returns. Written through the caches, every line
/// of it is first read from memory (to own it), and it evicts the piece cache and the
/// rank table the encoding probes. Measured in the core (`core_batch`, gpt2, English,
/// three runs, builds in turn): the batch on two threads went from 0.92-0.93 to
/// 0.97-0.98 of the same batch placing nothing, and on one thread from 0.95-0.98 to
/// 0.99-1.00 of a loop of single encodes that writes no flat output.
fn place_le(dst: &mut [MaybeUninit<u8>], ids: &[u32]) {
    #[cfg(target_arch = "x86_64")]
    if ids.len() * 4 >= STREAM_BYTES {
        let dst = &mut dst[..ids.len() * 4];
        // SAFETY: `dst` holds `4 * ids.len()` bytes, apart from `ids`; x86-64 is
        // little-endian, so a u32's bytes in memory are its little-endian bytes.
        unsafe {
            stream_copy(
                ids.as_ptr().cast::<u8>(),
                dst.as_mut_ptr().cast::<u8>(),
                dst.len(),
            )
        };
        return;
    }
    write_le(dst, ids);
}

/// Copies of at least this many bytes into a flat output go around the caches
/// ([`place_le`]); a smaller batch's caller is likely to read its ids right away.
#[cfg(target_arch = "x86_64")]
const STREAM_BYTES: usize = 16 << 10;

/// Copies `len` bytes from `src` to `dst` with non-temporal stores, then fences them
/// (they are weakly ordered: another thread must see them once this returns).
///
/// # Safety
/// `src` and `dst` are valid for `len` bytes and do not overlap.
#[cfg(target_arch = "x86_64")]
unsafe fn stream_copy(src: *const u8, dst: *mut u8, len: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    // SAFETY: the caller's promise; SSE2 is part of x86_64.
    unsafe {
        let head = dst.align_offset(16).min(len);
        std::ptr::copy_nonoverlapping(src, dst, head);
        let mut i = head;
        while i + 64 <= len {
            let s = src.add(i).cast::<__m128i>();
            let d = dst.add(i).cast::<__m128i>();
            _mm_stream_si128(d, _mm_loadu_si128(s));
            _mm_stream_si128(d.add(1), _mm_loadu_si128(s.add(1)));
            _mm_stream_si128(d.add(2), _mm_loadu_si128(s.add(2)));
            _mm_stream_si128(d.add(3), _mm_loadu_si128(s.add(3)));
            i += 64;
        }
        while i + 16 <= len {
            _mm_stream_si128(dst.add(i).cast(), _mm_loadu_si128(src.add(i).cast()));
            i += 16;
        }
        std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), len - i);
        _mm_sfence();
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
/// On several threads, each worker places the ids it encoded itself
/// ([`place_on_threads`]).
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
    let workers = threads.count().max(1).min(texts.len());
    if workers > 1 {
        return place_on_threads(model, texts, specials, frame, threads, workers, out);
    }
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
                place_le(&mut out[written * 4..], ids);
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

/// [`encode_flat`] on `workers` threads. Each worker places the parts it encodes: a
/// part whose parts before it are all placed is given its place (right after them)
/// under a lock, together with the parts after it that finished early and waited,
/// and copied there outside the lock, while its ids are still in the worker's own
/// cache. Copying every part on the calling thread, ids another core had written,
/// made that thread's share of the encoding wait. Measured in the core (`core_batch`:
/// the batch over the same batch placing nothing, in the same run), gpt2 on English
/// went from 0.90-0.96 to 0.93-0.97, o200k on multilingual text from 0.97 to 0.99.
///
/// A failing text stops the workers from taking new parts, as in
/// [`encode_each_in_parts`]: every part before it was taken already, so the error is
/// always the first failing text's.
fn place_on_threads<M: Model>(
    model: &M,
    texts: &[&str],
    specials: Specials,
    frame: &Frame,
    threads: Workers,
    workers: usize,
    out: &mut [MaybeUninit<u8>],
) -> Result<Vec<u64>, EncodeError> {
    let plan = &Plan::new(model, texts, specials, frame, workers);
    let out = &SharedOut::new(out);
    let mut offsets = Vec::with_capacity(texts.len() + 1);
    offsets.push(0);
    let placing = Mutex::new(Placing {
        next: 0,
        at: 0,
        ready: BTreeMap::new(),
        offsets,
        failure: None,
    });
    let place = |k: usize, encoded: Encoded| {
        let mut claimed = Vec::new();
        {
            let mut p = placing.lock().unwrap_or_else(|e| e.into_inner());
            if p.failure.is_some() {
                drop(p);
                plan.recycle(encoded.ids);
                return;
            }
            let p = &mut *p;
            p.ready.insert(k, encoded);
            while let Some(encoded) = p.ready.remove(&p.next) {
                let part = &plan.parts[p.next];
                let at = p.at;
                if part.count > 1 {
                    p.offsets
                        .extend(encoded.ends.iter().map(|&end| (at + end) as u64));
                } else if part.nth + 1 == part.of {
                    p.offsets.push((at + encoded.ids.len()) as u64);
                }
                p.at += encoded.ids.len();
                p.next += 1;
                claimed.push((at, encoded.ids));
            }
        }
        for (at, ids) in claimed {
            // SAFETY: `at..at + ids.len()` was given to this part alone, under the lock.
            unsafe { out.write(at, &ids) };
            plan.recycle(ids);
        }
    };
    let caches = &BatchCaches::new(model, workers);
    let used: Mutex<Vec<M::Cache>> = Mutex::new(Vec::with_capacity(workers));
    let work = || {
        let mut cache = caches.take();
        while let Some((k, done)) = plan.encode_next(&mut cache) {
            match done {
                Ok(encoded) => place(k, encoded),
                Err(failed) => {
                    let mut p = placing.lock().unwrap_or_else(|e| e.into_inner());
                    Plan::<M>::keep_first(&mut p.failure, failed);
                }
            }
        }
        used.lock().unwrap_or_else(|e| e.into_inner()).push(cache);
    };
    // The calling thread is one of the workers.
    let (tx, _) = mpsc::channel::<()>();
    threads.run(workers - 1, tx, |_| work(), work);
    caches.give_back(used);
    let Placing {
        failure, offsets, ..
    } = placing.into_inner().unwrap_or_else(|e| e.into_inner());
    match failure {
        Some(failed) => Err(plan.settle(failed)),
        None => Ok(offsets),
    }
}

/// Where [`place_on_threads`] stands: the next part to place and where it goes (in
/// ids), the parts finished before it, the offsets of the texts placed so far, and
/// the first text that failed.
struct Placing {
    next: usize,
    at: usize,
    ready: BTreeMap<usize, Encoded>,
    offsets: Vec<u64>,
    failure: Option<Failure>,
}

/// A flat output several workers write at once, each only into the ids given to it
/// under [`Placing`]'s lock.
struct SharedOut<'a> {
    start: *mut MaybeUninit<u8>,
    len: usize,
    out: std::marker::PhantomData<&'a mut [MaybeUninit<u8>]>,
}

// SAFETY: the workers write disjoint ranges ([`SharedOut::write`]'s contract), and the
// buffer is borrowed mutably for as long as this lives.
unsafe impl Sync for SharedOut<'_> {}

impl<'a> SharedOut<'a> {
    fn new(out: &'a mut [MaybeUninit<u8>]) -> Self {
        Self {
            start: out.as_mut_ptr(),
            len: out.len(),
            out: std::marker::PhantomData,
        }
    }

    /// Writes `ids` as the ids from `at` on.
    ///
    /// # Safety
    /// No other thread writes or reads those ids' bytes meanwhile.
    unsafe fn write(&self, at: usize, ids: &[u32]) {
        let (from, to) = (at * 4, (at + ids.len()) * 4);
        assert!(to <= self.len, "the output holds the ids placed in it");
        // SAFETY: in bounds (above), and no other thread touches these bytes (the
        // caller's promise) while `self` keeps the buffer borrowed.
        let dst = unsafe { std::slice::from_raw_parts_mut(self.start.add(from), to - from) };
        place_le(dst, ids);
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

    #[test]
    fn placing_ids_writes_them_little_endian_whatever_their_length_and_alignment() {
        // Short runs go through the caches, long ones around them (from STREAM_BYTES
        // on); each starts and ends at any alignment and touches nothing around it.
        let ids: Vec<u32> = (0..20_000u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let mut out = vec![MaybeUninit::new(0xAAu8); 4 * ids.len() + 64];
        for len in [
            0, 1, 3, 4, 5, 15, 16, 17, 63, 64, 65, 4095, 4096, 4097, 19_999,
        ] {
            for (skip, at) in [(0, 0), (1, 0), (0, 1), (3, 2), (2, 3), (5, 13)] {
                let src = &ids[skip..skip + len.min(ids.len() - skip)];
                out.fill(MaybeUninit::new(0xAA));
                place_le(&mut out[at..], src);
                // SAFETY: every byte of `out` was written by the fill.
                let got: Vec<u8> = out.iter().map(|b| unsafe { b.assume_init() }).collect();
                let want: Vec<u8> = src.iter().flat_map(|id| id.to_le_bytes()).collect();
                let end = at + want.len();
                assert_eq!(
                    &got[at..end],
                    &want[..],
                    "{len} ids from {skip} at byte {at}"
                );
                assert!(
                    got[..at].iter().chain(&got[end..]).all(|&b| b == 0xAA),
                    "{len} ids at byte {at} wrote outside their bytes"
                );
            }
        }
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
            assert_eq!(flat(&e, &texts, specials, frame, threads).unwrap(), want);
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
            let parts = plan_parts(&e, &texts, specials, Units::even(unit));
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
        let parts = plan_parts(&e, &texts, specials, Units::even(unit));
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

    /// A long text of words and its cuts (as planned on two threads), with the two
    /// letters around its first cut (a space cut) made `Q` and `R`: one `Q R` across
    /// the cut, and the cuts where they were.
    fn text_with_a_token_across_a_cut(e: &crate::bpe::Encoder) -> (String, usize) {
        let mut text = "aab dac ".repeat(60_000);
        let none = Specials {
            allowed: e.no_specials(),
            disallowed: e.no_specials(),
        };
        let units = Units::for_batch(text.len(), 2);
        let cut = plan_parts(e, &[&text], none, units)[1].start;
        assert_eq!(&text[cut..cut + 1], " ", "a space cut");
        text.replace_range(cut - 1..cut + 2, "Q R");
        let again = plan_parts(e, &[&text], none, units);
        assert_eq!(again[1].start, cut, "the same cuts");
        (text, cut)
    }

    #[test]
    fn a_cut_text_refuses_its_first_disallowed_token_even_across_a_cut() {
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        let (across, cut) = text_with_a_token_across_a_cut(&e);
        let refused = SpecialMatcher::new(&["Q R".into(), "<|x|>".into()]).unwrap();
        let specials = Specials {
            allowed: e.no_specials(),
            disallowed: &refused,
        };
        // The token across the cut alone; then with another refused token after it
        // (in the next part, whose worker may find it first); then with one before it.
        let mut later = across.clone();
        later.insert_str(cut + 100, "<|x|>");
        let mut earlier = across.clone();
        earlier.insert_str(cut / 2, "<|x|>");
        let cases = [(&across, "Q R"), (&later, "Q R"), (&earlier, "<|x|>")];
        for (text, want) in cases {
            let texts = ["short one", text.as_str(), "short two"];
            let parts = plan_parts(&e, &texts, specials, Units::for_batch(text.len(), 2));
            assert!(parts.iter().filter(|p| p.text == 1).count() > 2, "cut");
            for threads in [2, 3] {
                for _ in 0..3 {
                    let got = flat_on(&e, &texts, specials, threads);
                    assert_eq!(refusal(&got), Some(want), "{threads} threads");
                    let listed = encode_each(
                        &e,
                        &texts,
                        specials,
                        &Frame::default(),
                        Workers::Spawned(threads),
                        |next| next(),
                        |_, _| Ok::<(), ()>(()),
                    );
                    assert!(matches!(
                        listed,
                        Err(BatchError::Encode(EncodeError::Disallowed { ref token })) if token == want
                    ));
                }
            }
        }
        // Allowed, the same token is encoded as plain text, across the cut.
        let allowed = Specials {
            allowed: e.no_specials(),
            disallowed: e.no_specials(),
        };
        let texts = [across.as_str()];
        let got = flat_on(&e, &texts, allowed, 2).unwrap();
        assert_eq!(got, each_whole(&e, &texts));
    }

    #[test]
    fn a_texts_first_refused_token_is_its_error_before_any_other() {
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        let texts = ["plain", "x<|e|>y"];
        let specials = Specials {
            allowed: e.no_specials(),
            disallowed: e.all_specials(),
        };
        let frame = Frame::default();
        let plan = Plan::new(&e, &texts, specials, &frame, 2);
        type P<'a> = Plan<'a, crate::bpe::Encoder>;
        let refused = |at| {
            (
                1,
                at,
                EncodeError::Disallowed {
                    token: "<|e|>".into(),
                },
            )
        };
        let other = |text, at| (text, at, EncodeError::OutOfMemory { bytes: 8 });
        assert!(
            P::first_failure(&other(0, 99), &refused(1)),
            "an earlier text's first"
        );
        assert!(
            P::first_failure(&refused(50), &other(1, 0)),
            "a refusal before the rest"
        );
        assert!(
            P::first_failure(&refused(10), &refused(50)),
            "the first refusal"
        );
        assert!(!P::first_failure(&refused(50), &refused(10)));
        // Another error of a text holding a refused token is that refusal (its part
        // may never have been taken), as when the text was checked whole first.
        assert!(matches!(
            plan.settle(other(1, 0)),
            EncodeError::Disallowed { .. }
        ));
        assert!(matches!(
            plan.settle(other(0, 0)),
            EncodeError::OutOfMemory { .. }
        ));
    }

    /// The disallowed token a batch refused, if that is how it failed.
    fn refusal<T>(got: &Result<T, EncodeError>) -> Option<&str> {
        match got {
            Err(EncodeError::Disallowed { token }) => Some(token),
            _ => None,
        }
    }

    /// `encode_flat`'s ids, text by text.
    fn flat(
        e: &crate::bpe::Encoder,
        texts: &[&str],
        specials: Specials,
        frame: &Frame,
        threads: Workers,
    ) -> Result<Vec<Vec<u32>>, EncodeError> {
        let mut out = vec![MaybeUninit::new(0u8); most_ids(e, texts, frame) * 4];
        let offsets = encode_flat(e, texts, specials, frame, threads, &mut out)?;
        assert_eq!(offsets.len(), texts.len() + 1);
        // SAFETY: every byte was initialised above.
        let bytes: Vec<u8> = out.iter().map(|b| unsafe { b.assume_init() }).collect();
        let ids: Vec<u32> = bytes[..*offsets.last().unwrap() as usize * 4]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok(offsets
            .windows(2)
            .map(|w| ids[w[0] as usize..w[1] as usize].to_vec())
            .collect())
    }

    /// [`flat`] with no frame, on `threads` threads started for the call.
    fn flat_on(
        e: &crate::bpe::Encoder,
        texts: &[&str],
        specials: Specials,
        threads: usize,
    ) -> Result<Vec<Vec<u32>>, EncodeError> {
        flat(
            e,
            texts,
            specials,
            &Frame::default(),
            Workers::Spawned(threads),
        )
    }

    #[test]
    fn workers_place_cut_and_grouped_texts_in_order_in_the_flat_output() {
        // Long texts cut in parts between groups of short ones: parts finish out of
        // order on several threads, and each is placed by whichever worker finds it
        // next in line.
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        let (long, short) = (long_texts(), texts());
        let mut texts: Vec<&str> = Vec::new();
        for (i, l) in long.iter().enumerate() {
            texts.extend(short[i * 30..(i + 1) * 30].iter().map(String::as_str));
            texts.push(l);
        }
        let specials = allowing_all(&e);
        let total: usize = texts.iter().map(|t| t.len()).sum();
        let parts = plan_parts(&e, &texts, specials, Units::for_batch(total, 2));
        assert!(parts.iter().any(|p| p.count > 1), "short texts are grouped");
        assert!(parts.iter().any(|p| p.of > 1), "long texts are cut");
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for frame in [Frame::default(), framing()] {
            let want: Vec<Vec<u32>> = each_whole(&e, &texts)
                .iter()
                .map(|w| framed(&frame, w))
                .collect();
            for threads in [
                Workers::Spawned(2),
                Workers::Spawned(3),
                Workers::Pool(&pool),
            ] {
                for _ in 0..3 {
                    let got = flat(&e, &texts, specials, &frame, threads).unwrap();
                    assert_eq!(got, want, "{frame:?}");
                }
            }
        }
    }

    #[test]
    fn a_flat_batch_on_threads_fails_with_its_first_failing_text() {
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        let (long, short) = (long_texts(), texts());
        let mut texts: Vec<String> = short.clone();
        texts.extend(long.iter().map(|l| l.replace("<|e|>", "")));
        texts.extend(short);
        // Two refused tokens, so the error tells which text it came from: the first
        // failing text is a short one, a later one is long (cut) and fails first in
        // time on some runs.
        texts[150] += "<|first|>";
        let late = 200 + 1;
        let at = texts[late].len() / 3;
        texts[late].insert_str(at, "<|late|>");
        texts[300] += "<|late|>";
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let refused = SpecialMatcher::new(&["<|first|>".into(), "<|late|>".into()]).unwrap();
        let specials = Specials {
            allowed: e.no_specials(),
            disallowed: &refused,
        };
        for threads in [2, 3] {
            for _ in 0..5 {
                let got = flat_on(&e, &texts, specials, threads);
                assert_eq!(refusal(&got), Some("<|first|>"), "{threads} threads");
            }
        }
        let clean: Vec<&str> = texts[..150].to_vec();
        let want: Vec<Vec<u32>> = clean
            .iter()
            .map(|t| e.encode(t, e.no_specials()).unwrap())
            .collect();
        let got = flat_on(&e, &clean, specials, 2).unwrap();
        assert_eq!(got, want);
    }

    /// Where each part of `parts` starts in the batch (its texts one after another),
    /// and how many bytes it is.
    fn spans(texts: &[&str], parts: &[Part]) -> Vec<(usize, usize)> {
        let starts: Vec<usize> = texts
            .iter()
            .scan(0, |at, t| {
                let start = *at;
                *at += t.len();
                Some(start)
            })
            .collect();
        parts
            .iter()
            .map(|p| {
                let len = match p.count {
                    1 => p.end - p.start,
                    n => texts[p.text..p.text + n].iter().map(|t| t.len()).sum(),
                };
                (starts[p.text] + p.start, len)
            })
            .collect()
    }

    #[test]
    fn a_batch_ends_in_fine_parts_that_encode_as_its_texts_whole() {
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        // 50 texts of about 80 KB: each whole in a plan of units of 64 KB (a text is
        // cut only past two), so one worker could wait most of a text for the other.
        let texts: Vec<String> = (0..50)
            .map(|i| format!("{i} ") + &"aab dac ".repeat(10_000))
            .collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let total: usize = texts.iter().map(|t| t.len()).sum();
        let specials = allowing_all(&e);
        let even = plan_parts(&e, &texts, specials, Units::even(unit(total, 2)));
        assert!(
            even.iter().all(|p| p.whole && p.count == 1),
            "each text whole"
        );
        let units = Units::for_batch(total, 2);
        assert_eq!((units.unit, units.fine()), (MIN_UNIT, MIN_UNIT / 4));
        let parts = plan_parts(&e, &texts, specials, units);
        let spans = spans(&texts, &parts);
        assert!(
            spans.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0),
            "in order"
        );
        assert_eq!(spans.last().map(|(at, len)| at + len), Some(total));
        let tail_start = units.tail_start;
        for (p, &(at, len)) in parts.iter().zip(&spans) {
            if at + len <= tail_start {
                assert!(p.whole, "a text before the tail is whole: {p:?}");
            } else if at >= tail_start {
                assert!(len < 2 * units.fine(), "the tail in fine parts: {p:?}");
            }
        }
        // The batch's last three units (of the two a worker its tail holds; a part
        // across its start may be a unit) are in fine parts.
        let fine = spans.iter().filter(|(at, _)| *at >= total - 3 * units.unit);
        assert!(fine.clone().all(|(_, len)| *len < 2 * units.fine()));
        assert!(fine.count() >= 3 * units.unit / (2 * units.fine()));
        for (i, text) in texts.iter().enumerate() {
            let ids: Vec<u32> = parts
                .iter()
                .filter(|p| p.text == i)
                .flat_map(|p| e.encode(&text[p.start..p.end], e.all_specials()).unwrap())
                .collect();
            assert_eq!(ids, e.encode(text, e.all_specials()).unwrap(), "text {i}");
        }
    }

    #[test]
    fn groups_of_short_texts_stop_at_the_tail_and_are_fine_in_it() {
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        let texts: Vec<String> = (0..10_000)
            .map(|i| format!("{i} ") + &"aab dac ".repeat(10 + i % 50))
            .collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let total: usize = texts.iter().map(|t| t.len()).sum();
        // The units of a batch this size, and units so large that a fine part is
        // longer than a group anywhere else.
        let large = Units {
            unit: 512 << 10,
            tail_start: total - 4 * (512 << 10),
        };
        assert!(large.fine() > GROUP_BYTES && large.tail_start > large.unit);
        for units in [Units::for_batch(total, 2), large] {
            check_groups_at_the_tail(&e, &texts, units);
        }
    }

    fn check_groups_at_the_tail(e: &crate::bpe::Encoder, texts: &[&str], units: Units) {
        let total: usize = texts.iter().map(|t| t.len()).sum();
        let parts = plan_parts(e, texts, allowing_all(e), units);
        let tail_start = units.tail_start;
        let spans = spans(texts, &parts);
        assert!(parts.iter().all(|p| p.count >= 1 && p.whole));
        let covered: Vec<usize> = parts
            .iter()
            .flat_map(|p| p.text..p.text + p.count)
            .collect();
        assert_eq!(covered, (0..texts.len()).collect::<Vec<_>>());
        // A group ends before the tail, or is fine (the one across its start too),
        // and none is larger than GROUP_BYTES.
        let fine = units.fine().min(GROUP_BYTES);
        for &(at, len) in &spans {
            let before_tail = at + len <= tail_start && len <= GROUP_BYTES;
            assert!(before_tail || len <= fine, "a group at {at} of {len} bytes");
        }
        let last = spans.iter().filter(|(at, _)| *at >= total - 3 * units.unit);
        assert!(last.clone().all(|(_, len)| *len <= fine));
        assert!(last.count() >= 3 * units.unit / fine);
    }

    #[test]
    fn short_texts_go_to_the_threads_in_groups_each_text_once_in_order() {
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        let texts = texts();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let parts = plan_parts(&e, &texts, allowing_all(&e), Units::even(MIN_UNIT));
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
        let parts = plan_parts(
            &e,
            &with_long,
            allowing_all(&e),
            Units::even(4 * GROUP_BYTES),
        );
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
