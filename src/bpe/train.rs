//! The BPE merge loop: the reduce step of training.
//!
//! Input: the distinct pre-tokens with their counts. Each step merges the most
//! frequent adjacent pair; ties go to the lexicographically greatest pair compared as
//! (left bytes, right bytes). Counts are over all adjacent positions, so "aaa" holds
//! the pair (a, a) twice, and merging replaces occurrences left to right.
//!
//! Instead of recounting every pair after each merge, we keep:
//! - the words in one flat arena, each its length, count and ids side by side (one
//!   cache miss per visit), shortened in place by merges; a giant word (65,536 ids or
//!   more) has a buffer of its own, given back to the allocator as merges halve it,
//! - `pairs` ([`PairTable`]): pair → its count (64-bit) and the words it occurs in,
//!   ascending (made once, when the pair first occurs, and never appended to: a word
//!   that lost the pair is skipped), so a merge touches only the words that contain
//!   the pair,
//! - a max-heap of (count, left bytes, right bytes) with lazy invalidation: counts of
//!   existing pairs only ever go down, so a popped entry whose count is out of date is
//!   pushed back with its current count. Only pairs counted at least a floor (halved
//!   as needed) are in the heap; the others wait in a plain list ([`Queue`]).
//!
//! A merge of (a, b) into N changes only pairs next to an occurrence: (x, a) and
//! (b, y) lose what (x, N) and (N, y) gain. So the word updates add into arrays
//! indexed by the neighbour x or y (no hashing per occurrence), each with the list of
//! words the new pair is in; the pair table and the queue are updated once per
//! distinct neighbour when the merge is done, each pair's slot asked for a few pairs
//! ahead. A giant word lists each new pair once, however often it forms it. A merge
//! touching many words shares them among the threads, each adding into arrays of its
//! own, folded together in word order (so the result is the same for any number of
//! threads).
//!
//! One giant distinct word (a 100 MB run of one letter has no safe cut) costs its ids
//! (4 bytes per byte, given back as merges shorten it) and the vocabulary itself,
//! whose tokens are as long as the runs they stand for: about 12 bytes per byte of a
//! 100 MB run, the output. Failing to allocate any of these is [`OutOfMemory`], never
//! an abort.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex};

use super::pair_table::{Pair, PairTable, WordList, WORDS_INLINE};
use crate::packed::prefetch;

/// A word is named by where it starts in the arena, in units of [`ALIGN`] ids: at
/// `ALIGN * w` are its length, its count (two ids, low half first) and its ids, so one
/// cache line brings a short word whole. A giant word's length is [`GIANT`], and its
/// one id is the index of its own buffer.
const HEADER: usize = 3;
const ALIGN: usize = 4;
const GIANT: u32 = u32::MAX;

/// A word's ids are kept in a buffer of its own from this length on, and given back to
/// the allocator when they use less than a quarter of it (runs halve with each merge).
const SHRINK_IDS_FROM: usize = 1 << 16;

/// A merge touching at least this many words shares them among the threads of a pool
/// made once per training (each merge is a barrier). On 3.7 M distinct words the 868
/// merges past 5,000 words hold 80% of all word visits and take 1.6x less time on two
/// threads; below it (a merge of 1,000-5,000 words takes ~0.15 ms) sharing gained
/// nothing.
const PARALLEL_FROM: usize = 5_000;

/// How often (in items) [`load_words`] keeps a copy of the counts' iterator, where
/// a part of the words may start (in tests, often: small inputs split too).
const MARK_EVERY: usize = if cfg!(test) { 2 } else { 1 << 16 };

/// Byte pairs per task when the parts' word lists are joined (64 tasks).
const JOIN_RUN: usize = 1 << 10;

/// How many pairs ahead of the one being updated their slots are asked for.
const PAIRS_AHEAD: usize = 8;

/// How many words ahead of the one being merged its memory is asked for.
const PREFETCH_WORDS: usize = 8;

/// The words: ordinary ones in one arena, giant ones apart.
struct Words {
    arena: Vec<u32>,
    /// Locked only by the one thread merging that word (see [`merge_words`]).
    giants: Vec<Mutex<Vec<u32>>>,
}

/// The arena ids a word of `n` bytes takes (header and padding included).
fn arena_span(n: usize) -> usize {
    let ids = if n < SHRINK_IDS_FROM { n } else { 1 };
    (HEADER + ids).div_ceil(ALIGN) * ALIGN
}

/// What one merge of (a, b) into N did next to its occurrences, by neighbour: for a
/// left neighbour x, (x, a) lost and (x, N) gained `delta`; for a right neighbour y,
/// (b, y) lost and (N, y) gained it. `words` lists (ascending, once each) the words
/// where the new pair was formed.
#[derive(Default)]
struct Side {
    stamp: u32,
    delta: i64,
    words: Vec<u32>,
}

/// The neighbours of one merge, indexed by symbol id; `stamp` tells this merge's
/// entries from older ones, so nothing is cleared between merges.
#[derive(Default)]
struct Neighbours {
    stamp: u32,
    left: Vec<Side>,
    right: Vec<Side>,
    touched_left: Vec<u32>,
    touched_right: Vec<u32>,
}

impl Neighbours {
    /// Starts a merge whose ids are all below `vocab_len`.
    fn start(&mut self, vocab_len: usize) {
        self.stamp += 1;
        self.touched_left.clear();
        self.touched_right.clear();
        if self.left.len() < vocab_len {
            self.left.resize_with(vocab_len, Side::default);
            self.right.resize_with(vocab_len, Side::default);
        }
    }

    /// Adds what another thread found in the words after ours.
    fn absorb(&mut self, other: &Neighbours) {
        for (sides, touched, theirs, their_touched) in [
            (
                &mut self.left,
                &mut self.touched_left,
                &other.left,
                &other.touched_left,
            ),
            (
                &mut self.right,
                &mut self.touched_right,
                &other.right,
                &other.touched_right,
            ),
        ] {
            for &x in their_touched {
                let t = &theirs[x as usize];
                let s = &mut sides[x as usize];
                if s.stamp != self.stamp {
                    s.stamp = self.stamp;
                    s.delta = 0;
                    s.words.clear();
                    touched.push(x);
                }
                s.delta += t.delta;
                s.words.extend_from_slice(&t.words);
            }
        }
    }

    /// The `i`-th neighbour a merge of (a, b) into `new_id` touched (the right ones
    /// first, then the left ones): the pair it lost, the pair it made, and its side.
    #[inline]
    fn touched(&mut self, (a, b): Pair, new_id: u32, i: usize) -> (Pair, Pair, &mut Side) {
        match self.touched_right.get(i) {
            Some(&y) => ((b, y), (new_id, y), &mut self.right[y as usize]),
            None => {
                let x = self.touched_left[i - self.touched_right.len()];
                ((x, a), (x, new_id), &mut self.left[x as usize])
            }
        }
    }

    #[inline]
    fn add(sides: &mut [Side], touched: &mut Vec<u32>, stamp: u32, x: u32, w: u32, c: i64) {
        let s = &mut sides[x as usize];
        if s.stamp != stamp {
            s.stamp = stamp;
            s.delta = 0;
            s.words.clear();
            touched.push(x);
        }
        s.delta += c;
        if s.words.last() != Some(&w) {
            s.words.push(w);
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
struct Candidate {
    count: i64,
    left: Arc<[u8]>,
    right: Arc<[u8]>,
    pair: Pair,
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        self.count
            .cmp(&other.count)
            .then_with(|| self.left.cmp(&other.left))
            .then_with(|| self.right.cmp(&other.right))
            .then_with(|| self.pair.cmp(&other.pair))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The pairs that may be merged next, best first. Only pairs counted at least `floor`
/// times are in the heap (with the tokens' bytes that break ties); the rest wait in
/// `low` as (count, pair). `floor` only goes down: when the heap is empty, it is halved
/// and the pairs that reach it move up. Most pairs are never merged and never enter the
/// heap, so it stays small and cheap to update.
///
/// Exact: every pair whose current count is at least `floor` has a heap entry whose
/// count is at least that (counts only go down; a stale entry is pushed back by the
/// caller with its current count), and every pair in `low` counts less than `floor`.
/// So the heap's top, when its count is current, is the best of all pairs.
struct Queue {
    heap: BinaryHeap<Candidate>,
    low: Vec<(i64, Pair)>,
    floor: i64,
}

impl Default for Queue {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
            low: Vec::new(),
            floor: i64::MAX,
        }
    }
}

impl Queue {
    /// Adds `pair` counted `count` times; pairs that no longer occur are left out.
    fn push(&mut self, pair: Pair, count: i64, vocab: &[Arc<[u8]>]) {
        if count <= 0 {
            return;
        }
        if count >= self.floor {
            self.heap.push(Candidate {
                count,
                left: vocab[pair.0 as usize].clone(),
                right: vocab[pair.1 as usize].clone(),
                pair,
            });
        } else {
            self.low.push((count, pair));
        }
    }

    /// The entry with the greatest (count, left bytes, right bytes); its count may be
    /// out of date (the caller checks).
    fn pop(&mut self, vocab: &[Arc<[u8]>]) -> Option<Candidate> {
        if self.heap.is_empty() {
            let best = self.low.iter().map(|&(c, _)| c).max()?;
            self.floor = best - best / 2;
            let floor = self.floor;
            let mut up = Vec::new();
            self.low.retain(|&(c, pair)| {
                if c >= floor {
                    up.push((c, pair));
                }
                c < floor
            });
            for (c, pair) in up {
                self.push(pair, c, vocab);
            }
        }
        self.heap.pop()
    }
}

/// Training ran out of memory: `bytes` more were needed (a buffer whose size comes
/// from the input: a giant pre-token's ids, or the bytes of a token made of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfMemory {
    pub bytes: usize,
}

impl std::fmt::Display for OutOfMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "out of memory while training: {} more bytes were needed; a single pre-token \
             needs about 5 bytes per byte, plus its tokens' bytes",
            self.bytes
        )
    }
}

impl std::error::Error for OutOfMemory {}

/// Makes room for exactly `more` items in `v`, or [`OutOfMemory`].
fn try_reserve<T>(v: &mut Vec<T>, more: usize) -> Result<(), OutOfMemory> {
    v.try_reserve_exact(more).map_err(|_| OutOfMemory {
        bytes: more.saturating_mul(std::mem::size_of::<T>()),
    })
}

/// The result of training: merges in order (merge `i` creates id `256 + i`) and the
/// bytes of every id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trained {
    pub merges: Vec<Pair>,
    pub vocab: Vec<Vec<u8>>,
}

/// What may be merged, besides "the most frequent pair".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Training stops when the best pair occurs fewer times than this (Hugging Face's
    /// `min_frequency`); 0 and 1 never stop it.
    pub min_frequency: u64,
    /// A pair whose merged token would be longer than this many bytes is never merged:
    /// the next best pair is taken instead (so runs like "\n\n\n\n\n\n\n" can be kept
    /// from becoming tokens).
    pub max_token_length: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            min_frequency: 0,
            max_token_length: usize::MAX,
        }
    }
}

/// Lays the words out (arena and giants) and counts their byte pairs: 256 × 256
/// arrays, no hashing. Pre-tokens shorter than 2 bytes hold no pair and are left out.
/// Also returns how many merges the words can take at most (a merge shortens a word).
///
/// With a pool, each thread lays out a run of the words into its own part of the
/// arena (where each word goes is known from a first pass over the sizes) and counts
/// into arrays of its own; the word lists are joined in part order, so they come out
/// ascending and the same for any number of threads.
fn load_words<K, I>(
    counts: I,
    pool: Option<&rayon::ThreadPool>,
) -> Result<(Words, PairTable, usize), OutOfMemory>
where
    K: AsRef<[u8]>,
    I: IntoIterator<Item = (K, u64)>,
    I::IntoIter: Clone + Send,
{
    let counts = counts.into_iter();
    let parts = pool.map_or(1, |p| p.current_num_threads().max(1));
    // One pass sizes the arena, keeping a copy of the iterator every `MARK_EVERY`
    // items with where its words start in the arena: the parts start at marks, so
    // no part walks past the words of those before it.
    let mut marks = Vec::new();
    let mut arena_len = 0usize;
    let mut rest = counts.clone();
    for i in 0.. {
        if parts > 1 && i % MARK_EVERY == 0 {
            marks.push((rest.clone(), i, arena_len));
        }
        let Some((token, _)) = rest.next() else { break };
        let n = token.as_ref().len();
        if n >= 2 {
            arena_len += arena_span(n);
        }
    }
    // Words are named by u32 offsets in units of ALIGN ids: a 64 GB arena at most.
    if arena_len / ALIGN > u32::MAX as usize {
        return Err(OutOfMemory {
            bytes: arena_len.saturating_mul(4),
        });
    }
    let mut arena: Vec<u32> = Vec::new();
    try_reserve(&mut arena, arena_len)?;
    // Merges reach all over the arena: 2 MiB pages spare most of the TLB misses.
    crate::pages::advise_huge_pages(arena.spare_capacity_mut());

    // Part k starts at the first mark past k/parts of the arena (the first part at
    // the start); each takes the items up to the next part's start.
    let mut starts = vec![(counts, 0usize, 0usize)];
    for k in 1..parts {
        let share = arena_len / parts * k;
        let after = starts.last().map_or(0, |s| s.1);
        if let Some(mark) = marks.iter().find(|m| m.2 >= share && m.1 > after) {
            starts.push(mark.clone());
        }
    }
    let mut slices = Vec::with_capacity(starts.len());
    let mut rest = &mut arena.spare_capacity_mut()[..arena_len];
    for k in 0..starts.len() {
        let (end_item, end_at) = starts
            .get(k + 1)
            .map_or((usize::MAX, arena_len), |s| (s.1, s.2));
        let (items, first, at) = starts[k].clone();
        let (mine, tail) = rest.split_at_mut(end_at - at);
        slices.push((items.take(end_item - first), mine, at));
        rest = tail;
    }
    drop(marks);
    let mut loaded: Vec<Option<Result<Loaded, OutOfMemory>>> =
        (0..slices.len()).map(|_| None).collect();
    match pool {
        Some(pool) if slices.len() > 1 => pool.in_place_scope(|scope| {
            for ((counts, mine, base), out) in slices.into_iter().zip(loaded.iter_mut()) {
                scope.spawn(move |_| *out = Some(load_part(counts, mine, base)));
            }
        }),
        _ => {
            for ((counts, mine, base), out) in slices.into_iter().zip(loaded.iter_mut()) {
                *out = Some(load_part(counts, mine, base));
            }
        }
    }
    let loaded = loaded
        .into_iter()
        .map(|l| l.expect("every part ran"))
        .collect::<Result<Vec<_>, _>>()?;
    // SAFETY: each part wrote every id of its span (`load_part` checks it), and the
    // spans tile `0..arena_len`.
    unsafe { arena.set_len(arena_len) };

    let mut words = Words {
        arena,
        giants: Vec::new(),
    };
    let mut most_merges = 0;
    let mut byte_counts = vec![0i64; 1 << 16];
    let mut lists = Vec::with_capacity(loaded.len());
    for part in loaded {
        most_merges += part.most_merges;
        for (at, ids) in part.giants {
            words.arena[at] = words.giants.len() as u32;
            words.giants.push(Mutex::new(ids));
        }
        for (all, count) in byte_counts.iter_mut().zip(part.byte_counts) {
            *all += count;
        }
        lists.push(part.byte_words);
    }
    // Each pair's list is the parts' lists joined, allocated once at its size; a
    // part's list is freed as soon as it is copied. Runs of pairs are joined on the
    // pool (a copy of every list: ~0.13 s for 3.7 M words on one thread).
    let mut runs: Vec<Vec<&mut [Vec<u32>]>> = Vec::new();
    for part in &mut lists {
        for (r, chunk) in part.chunks_mut(JOIN_RUN).enumerate() {
            if runs.len() <= r {
                runs.push(Vec::with_capacity(parts));
            }
            runs[r].push(chunk);
        }
    }
    let join = |(r, mut chunks): (usize, Vec<&mut [Vec<u32>]>)| {
        let mut out = Vec::new();
        for i in 0..JOIN_RUN {
            let len: usize = chunks.iter().map(|c| c[i].len()).sum();
            if len == 0 {
                continue;
            }
            let mut words = WordList::with_capacity(len);
            for chunk in &mut chunks {
                words.extend_from_slice(&std::mem::take(&mut chunk[i]));
            }
            let p = r * JOIN_RUN + i;
            let pair = ((p >> 8) as u32, (p & 0xff) as u32);
            out.push((pair, byte_counts[p], words));
        }
        out
    };
    let joined: Vec<Vec<(Pair, i64, WordList)>> = match pool {
        Some(pool) => {
            use rayon::prelude::*;
            pool.install(|| runs.into_par_iter().enumerate().map(join).collect())
        }
        None => runs.into_iter().enumerate().map(join).collect(),
    };
    let mut pairs = PairTable::with_capacity(joined.iter().map(Vec::len).sum());
    for (pair, count, words) in joined.into_iter().flatten() {
        pairs.insert(pair, count, words);
    }
    Ok((words, pairs, most_merges))
}

/// What one part of [`load_words`] found besides the words it laid out.
struct Loaded {
    byte_counts: Vec<i64>,
    byte_words: Vec<Vec<u32>>,
    /// The giant words: where in the arena their buffer's index goes, and their ids.
    giants: Vec<(usize, Vec<u32>)>,
    most_merges: usize,
}

/// Lays out the words of `counts` into `arena`, which is exactly their span of the
/// whole arena, starting at id `base` of it.
fn load_part<K: AsRef<[u8]>>(
    counts: impl Iterator<Item = (K, u64)>,
    arena: &mut [MaybeUninit<u32>],
    base: usize,
) -> Result<Loaded, OutOfMemory> {
    let mut out = Loaded {
        byte_counts: vec![0i64; 1 << 16],
        byte_words: vec![Vec::new(); 1 << 16],
        giants: Vec::new(),
        most_merges: 0,
    };
    let mut at = 0;
    for (token, count) in counts {
        let token = token.as_ref();
        if token.len() < 2 {
            continue;
        }
        let w = ((base + at) / ALIGN) as u32;
        for pair in token.windows(2) {
            let p = (pair[0] as usize) << 8 | pair[1] as usize;
            out.byte_counts[p] += count as i64;
            let list = &mut out.byte_words[p];
            if list.last() != Some(&w) {
                list.push(w);
            }
        }
        out.most_merges += token.len() - 1;
        let span = &mut arena[at..at + arena_span(token.len())];
        let (header, ids) = span.split_at_mut(HEADER);
        let len = if token.len() < SHRINK_IDS_FROM {
            token.len() as u32
        } else {
            GIANT
        };
        for (slot, v) in header
            .iter_mut()
            .zip([len, count as u32, (count >> 32) as u32])
        {
            slot.write(v);
        }
        let written = if len == GIANT {
            let mut giant: Vec<u32> = Vec::new();
            try_reserve(&mut giant, token.len())?;
            giant.extend(token.iter().map(|&b| b as u32));
            out.giants.push((base + at + HEADER, giant));
            ids[0].write(0); // the buffer's index, set when the parts are joined
            1
        } else {
            for (slot, &b) in ids.iter_mut().zip(token) {
                slot.write(b as u32);
            }
            token.len()
        };
        for slot in &mut ids[written..] {
            slot.write(0);
        }
        at += span.len();
    }
    assert_eq!(at, arena.len(), "a part's words fill its span of the arena");
    Ok(out)
}

/// Learns up to `num_merges` merges from pre-token counts, within `limits`. Stops
/// early when no pair is left. `progress(done)` is called now and then; returning
/// false stops (the merges so far are returned). Memory grows with the merges made,
/// never with `num_merges` itself; failing to allocate is [`OutOfMemory`]. The counts
/// are read twice (sizes first, so the arena is allocated once).
pub fn train_merges<K: AsRef<[u8]>, I>(
    counts: I,
    num_merges: usize,
    limits: Limits,
    num_threads: usize,
    mut progress: impl FnMut(usize) -> bool,
) -> Result<Trained, OutOfMemory>
where
    I: IntoIterator<Item = (K, u64)>,
    I::IntoIter: Clone + Send,
{
    // Built once: a merge is a barrier, too short to pay for starting threads.
    let pool = crate::io::worker_pool(num_threads);
    let mut vocab: Vec<Arc<[u8]>> = (0..=255u8).map(|b| Arc::from(vec![b])).collect();
    let (mut words, mut pairs, most_merges) = load_words(counts, pool.as_ref())?;
    let mut queue = Queue::default();
    for (pair, count) in pairs.counts() {
        queue.push(pair, count, &vocab);
    }

    let mut merges: Vec<Pair> = Vec::with_capacity(num_merges.min(most_merges));
    let report_every = (num_merges / 100).max(1);
    let mut near = Neighbours::default();
    let mut helpers: Vec<Neighbours> = Vec::new();

    while merges.len() < num_merges {
        let Some(top) = queue.pop(&vocab) else { break };
        let current = pairs.count(top.pair);
        if current != top.count {
            queue.push(top.pair, current, &vocab);
            continue;
        }
        if current <= 0 || top.left.len() + top.right.len() > limits.max_token_length {
            continue; // gone, or never to be merged (its tokens' bytes never change)
        }
        if (current as u64) < limits.min_frequency {
            break;
        }
        let new_id = vocab.len() as u32;
        let mut bytes = Vec::new();
        try_reserve(&mut bytes, top.left.len() + top.right.len())?;
        bytes.extend_from_slice(&top.left);
        bytes.extend_from_slice(&top.right);
        vocab.push(Arc::from(bytes));
        merges.push(top.pair);

        near.start(vocab.len());
        let word_ids = pairs.remove(top.pair).unwrap_or_default().1;
        let threads = if word_ids.len() >= PARALLEL_FROM && pool.is_some() {
            num_threads.max(1)
        } else {
            1
        };
        if threads == 1 {
            merge_words(
                &mut words.arena,
                0,
                &words.giants,
                &word_ids,
                top.pair,
                new_id,
                &mut near,
            );
        } else {
            // Each thread takes a run of the (ascending) words and the arena they sit
            // in; its additions are folded in in word order, so every thread count
            // gives the same sums and the same ascending word lists.
            let per = word_ids.len().div_ceil(threads);
            let chunks: Vec<&[u32]> = word_ids.chunks(per).collect();
            let mut parts = Vec::with_capacity(chunks.len());
            let (mut rest, mut base) = (words.arena.as_mut_slice(), 0);
            for (k, &chunk) in chunks.iter().enumerate() {
                let end = match chunks.get(k + 1) {
                    Some(next) => next[0] as usize * ALIGN,
                    None => base + rest.len(),
                };
                let (part, tail) = std::mem::take(&mut rest).split_at_mut(end - base);
                parts.push((part, base, chunk));
                (rest, base) = (tail, end);
            }
            if helpers.len() < chunks.len() - 1 {
                helpers.resize_with(chunks.len() - 1, Neighbours::default);
            }
            let giants = &words.giants;
            let (pair, vocab_len) = (top.pair, vocab.len());
            let pool = pool.as_ref().expect("a pool when threads > 1");
            pool.in_place_scope(|scope| {
                let mut parts = parts.into_iter();
                let (first, first_base, first_words) = parts.next().expect("one part at least");
                for ((part, base, chunk), helper) in parts.zip(helpers.iter_mut()) {
                    scope.spawn(move |_| {
                        helper.start(vocab_len);
                        merge_words(part, base, giants, chunk, pair, new_id, helper);
                    });
                }
                merge_words(
                    first,
                    first_base,
                    giants,
                    first_words,
                    pair,
                    new_id,
                    &mut near,
                );
            });
            for helper in &helpers[..chunks.len() - 1] {
                near.absorb(helper);
            }
        }
        drop(word_ids);
        apply_merge(top.pair, new_id, &mut near, &mut pairs, |pair, c| {
            queue.push(pair, c, &vocab)
        });
        pairs.remove(top.pair); // (back if a neighbour of the merge was the pair)
        if merges.len().is_multiple_of(report_every) && !progress(merges.len()) {
            break;
        }
    }
    let _ = progress(merges.len());
    // The queue's clones of the tokens go first, so each token's bytes are copied out
    // and freed one at a time (the vocabulary of a giant run is held once, not twice).
    drop(queue);
    // Freeing the pairs' word lists is a cache miss each (~0.2 s for the 400 K lists
    // left after 10,000 merges over 3.7 M words): with threads to spare, a thread of
    // its own does it while the result goes back to the caller.
    crate::pages::drop_aside((pairs, words), num_threads);
    let mut out = Vec::with_capacity(vocab.len());
    for token in vocab {
        let mut bytes = Vec::new();
        try_reserve(&mut bytes, token.len())?;
        bytes.extend_from_slice(&token);
        out.push(bytes);
    }
    Ok(Trained { merges, vocab: out })
}

/// Adds what a merge of (a, b) into `new_id` did next to its occurrences into the
/// pair counts, once per neighbour. Pairs with `new_id` are new: those that occur get
/// their word lists and their (only) heap entry through `push`. Other pairs only
/// shrink: handled lazily on pop.
fn apply_merge(
    (a, b): Pair,
    new_id: u32,
    near: &mut Neighbours,
    pairs: &mut PairTable,
    mut push: impl FnMut(Pair, i64),
) {
    let n = near.touched_right.len() + near.touched_left.len();
    // The pairs that lost go first: (N, a) may lose, through a left neighbour N, part
    // of what it gains through a right neighbour a, and a new pair's count must be
    // whole when it is pushed. Each pass asks for the slots it needs a few pairs ahead.
    for i in 0..n {
        if i + PAIRS_AHEAD < n {
            pairs.prefetch(near.touched((a, b), new_id, i + PAIRS_AHEAD).0);
        }
        let (lost, _, side) = near.touched((a, b), new_id, i);
        pairs.add(lost, -side.delta);
    }
    // Then each new pair, once. No two neighbours make the same pair: a right
    // neighbour is an original symbol, never `new_id`, so (N, N) only comes from the
    // left.
    for i in 0..n {
        if i + PAIRS_AHEAD < n {
            pairs.prefetch(near.touched((a, b), new_id, i + PAIRS_AHEAD).1);
        }
        let (_, made, side) = near.touched((a, b), new_id, i);
        // A long list moves (its buffer is the pair's now); a short one is copied
        // inline, and the side keeps its few slots for the next merge.
        let words = || {
            if side.words.len() > WORDS_INLINE {
                WordList::from_vec(std::mem::take(&mut side.words))
            } else {
                WordList::from_slice(&side.words)
            }
        };
        if let Some(count) = pairs.add_with_words(made, side.delta, words) {
            push(made, count);
        }
    }
}

/// Merges `pair` into `new_id` in the words `list` (ascending), whose ids are in `arena`,
/// the part of the words' arena that starts at offset `base`, or in `giants`.
fn merge_words(
    arena: &mut [u32],
    base: usize,
    giants: &[Mutex<Vec<u32>>],
    list: &[u32],
    pair: Pair,
    new_id: u32,
    near: &mut Neighbours,
) {
    for (i, &w) in list.iter().enumerate() {
        // A visit is a cache miss (the word's line): ask for it ahead.
        if let Some(&soon) = list.get(i + PREFETCH_WORDS) {
            prefetch(arena.get(soon as usize * ALIGN - base));
        }
        let at = w as usize * ALIGN - base;
        let len = arena[at];
        let count = (arena[at + 1] as u64 | (arena[at + 2] as u64) << 32) as i64;
        if len == GIANT {
            // Only the thread holding this word locks its buffer.
            let mut ids = giants[arena[at + HEADER] as usize]
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let n = merge_word(&mut ids, pair, new_id, w, count, near);
            ids.truncate(n);
            if ids.capacity() >= SHRINK_IDS_FROM && n < ids.capacity() / 4 {
                ids.shrink_to_fit();
            }
        } else {
            let ids = &mut arena[at + HEADER..at + HEADER + len as usize];
            arena[at] = merge_word(ids, pair, new_id, w, count, near) as u32;
        }
    }
}

/// Replaces every occurrence of `pair` in word `w` (counted `c` times), left to right
/// and in place, adding into `near` what happened next to each; returns the new length.
/// (The merged pair's own count is dropped by the caller.)
fn merge_word(
    ids: &mut [u32],
    (a, b): Pair,
    new_id: u32,
    w: u32,
    c: i64,
    near: &mut Neighbours,
) -> usize {
    let n = ids.len();
    let stamp = near.stamp;
    let (mut wr, mut r) = (0, 0); // write and read positions; wr <= r
    while r < n {
        if r + 1 < n && ids[r] == a && ids[r + 1] == b {
            // The left neighbour is what we already wrote (possibly a new token).
            if wr > 0 {
                let x = ids[wr - 1];
                Neighbours::add(&mut near.left, &mut near.touched_left, stamp, x, w, c);
            }
            // The right neighbour is still the original symbol.
            if r + 2 < n {
                let y = ids[r + 2];
                Neighbours::add(&mut near.right, &mut near.touched_right, stamp, y, w, c);
            }
            ids[wr] = new_id;
            r += 2;
        } else {
            ids[wr] = ids[r];
            r += 1;
        }
        wr += 1;
    }
    wr
}

#[cfg(test)]
mod tests {
    use super::*;

    fn train(words: &[(&str, u64)], n: usize) -> Vec<String> {
        train_with(words, n, Limits::default())
    }

    fn train_with(words: &[(&str, u64)], n: usize, limits: Limits) -> Vec<String> {
        let t = train_merges(
            words.iter().map(|&(w, c)| (w.as_bytes(), c)),
            n,
            limits,
            1,
            |_| true,
        )
        .unwrap();
        t.merges
            .iter()
            .map(|&(l, r)| {
                let l = String::from_utf8_lossy(&t.vocab[l as usize]).into_owned();
                let r = String::from_utf8_lossy(&t.vocab[r as usize]).into_owned();
                format!("{l} {r}")
            })
            .collect()
    }

    #[test]
    fn minbpe_example() {
        // "aaabdaaabac": aa (4) first, then aa+a, then aaa+b... as in minbpe's test.
        let m = train(&[("aaabdaaabac", 1)], 3);
        assert_eq!(m, ["a a", "aa a", "aaa b"]);
    }

    #[test]
    fn ties_go_to_the_greatest_pair() {
        // (c, d) and (a, b) both occur once: (c, d) is greater.
        let m = train(&[("ab", 1), ("cd", 1)], 1);
        assert_eq!(m, ["c d"]);
    }

    #[test]
    fn overlapping_pairs_count_every_position() {
        // "aaa" x3 has (a,a) at two positions: 6 beats "bc" x5.
        let m = train(&[("aaa", 3), ("bc", 5)], 1);
        assert_eq!(m, ["a a"]);
    }

    #[test]
    fn stops_when_no_pairs_remain() {
        let t = train_merges([(b"ab".as_slice(), 1u64)], 10, Limits::default(), 1, |_| {
            true
        })
        .unwrap();
        assert_eq!(t.merges, vec![(97, 98)]);
        assert_eq!(t.vocab.len(), 257);
    }

    #[test]
    fn training_stops_when_the_best_pair_is_below_min_frequency() {
        let words = [("aaaa", 3), ("bc", 2), ("de", 1)];
        let limits = Limits {
            min_frequency: 2,
            ..Limits::default()
        };
        // (a,a) 9, then (aa,aa) 3, then (b,c) 2; (d,e) 1 is below 2.
        assert_eq!(train_with(&words, 10, limits), ["a a", "aa aa", "b c"]);
        assert_eq!(train_with(&words, 10, Limits::default()).len(), 4);
    }

    #[test]
    fn pairs_longer_than_max_token_length_are_skipped_for_the_next_best() {
        let words = [("\n\n\n\n\n\n\n", 10), ("ab", 1)];
        let limits = Limits {
            max_token_length: 3,
            ..Limits::default()
        };
        let merges = train_with(&words, 10, limits);
        assert_eq!(merges, ["\n \n", "\n\n \n", "a b"]);
        // Without the limit, the whole run becomes a token.
        let merges = train_with(&words, 10, Limits::default());
        assert!(merges.contains(&"\n\n\n\n\n\n \n".into()), "{merges:?}");
    }

    #[test]
    fn a_run_longer_than_the_compaction_point_halves_with_each_merge() {
        // 4096 "a": 2048 occurrences of (a, a) form more pairs than are listed before
        // compacting; each merge pairs all the tokens, so lengths double to 4096.
        let run = "a".repeat(4096);
        let t = train_merges([(run.as_bytes(), 3u64)], 20, Limits::default(), 1, |_| true).unwrap();
        let lengths: Vec<usize> = t.vocab[256..].iter().map(|v| v.len()).collect();
        assert_eq!(lengths, (1..=12).map(|k| 1usize << k).collect::<Vec<_>>());
        assert!(t.vocab[256..].iter().all(|v| v.iter().all(|&b| b == b'a')));
    }

    #[test]
    fn asking_for_ten_billion_merges_allocates_only_what_the_counts_can_give() {
        let start = std::time::Instant::now();
        let t = train_merges(
            [(b"hello".as_slice(), 3u64), (b"world".as_slice(), 2)],
            10_000_000_000,
            Limits::default(),
            1,
            |_| true,
        )
        .unwrap();
        assert_eq!(t.merges.len(), 8);
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
    }

    /// The merges by recounting every pair after each merge (CS336's definition).
    fn naive(words: &[(Vec<u8>, u64)], n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut words: Vec<(Vec<Vec<u8>>, u64)> = words
            .iter()
            .map(|(w, c)| (w.iter().map(|&b| vec![b]).collect(), *c))
            .collect();
        let mut merges = Vec::new();
        for _ in 0..n {
            let mut counts: std::collections::BTreeMap<(Vec<u8>, Vec<u8>), u64> =
                Default::default();
            for (w, c) in &words {
                for p in w.windows(2) {
                    *counts.entry((p[0].clone(), p[1].clone())).or_default() += c;
                }
            }
            let Some((best, _)) = counts
                .into_iter()
                .filter(|&(_, c)| c > 0)
                .max_by(|(p, c), (q, d)| c.cmp(d).then_with(|| p.cmp(q)))
            else {
                break;
            };
            for (w, _) in &mut words {
                let mut out: Vec<Vec<u8>> = Vec::with_capacity(w.len());
                let mut i = 0;
                while i < w.len() {
                    if i + 1 < w.len() && w[i] == best.0 && w[i + 1] == best.1 {
                        out.push([best.0.as_slice(), best.1.as_slice()].concat());
                        i += 2;
                    } else {
                        out.push(w[i].clone());
                        i += 1;
                    }
                }
                *w = out;
            }
            merges.push(best);
        }
        merges
    }

    fn merged_bytes(t: &Trained) -> Vec<(Vec<u8>, Vec<u8>)> {
        let bytes = |id: u32| t.vocab[id as usize].clone();
        t.merges
            .iter()
            .map(|&(l, r)| (bytes(l), bytes(r)))
            .collect()
    }

    #[test]
    fn heavy_ties_and_small_counts_merge_as_recounting_does() {
        // Words over three letters counted 1-3 times: nearly every step is a tie, and
        // most pairs sit below the queue's floor until late refills bring them up.
        let mut next = crate::testing::seeded(12345u64);
        for round in 0..20 {
            let words: Vec<(Vec<u8>, u64)> = (0..40)
                .map(|_| {
                    let len = 1 + next(if round % 2 == 0 { 6 } else { 30 }) as usize;
                    (
                        (0..len).map(|_| b"abc"[next(3) as usize]).collect(),
                        1 + next(3),
                    )
                })
                .collect();
            let expected = naive(&words, 60);
            let t = train_merges(
                words.iter().map(|(w, c)| (w.as_slice(), *c)),
                60,
                Limits::default(),
                1,
                |_| true,
            )
            .unwrap();
            assert_eq!(merged_bytes(&t), expected, "round {round}: {words:?}");
        }
    }

    #[test]
    fn a_giant_word_beside_ordinary_ones_merges_as_recounting_does() {
        // 70,000 ids: a buffer of its own (shrunk as merges halve the runs), the rest in
        // the arena; both updated by the same merges.
        let mut giant = b"ab".repeat(20_000);
        giant.extend(b"c".repeat(30_000));
        let words = vec![
            (giant, 1u64),
            (b"cab".to_vec(), 7),
            (b"bca".to_vec(), 5),
            (b"cc".to_vec(), 2),
        ];
        let expected = naive(&words, 12);
        let t = train_merges(
            words.iter().map(|(w, c)| (w.as_slice(), *c)),
            12,
            Limits::default(),
            1,
            |_| true,
        )
        .unwrap();
        assert_eq!(merged_bytes(&t), expected);
    }

    #[test]
    fn merges_over_many_words_are_the_same_for_any_number_of_threads() {
        // 250,000 words: the first merges touch more than PARALLEL_FROM of them and
        // are shared among threads; a giant word sits in a later thread's share.
        let mut next = crate::testing::seeded(99u64);
        let mut words: Vec<(Vec<u8>, u64)> = (0..250_000)
            .map(|_| {
                let len = 4 + next(9) as usize;
                (
                    (0..len).map(|_| b"ab"[next(2) as usize]).collect(),
                    1 + next(5),
                )
            })
            .collect();
        words.insert(200_000, (b"aab".repeat(25_000), 1));
        let run = |threads| {
            let t = train_merges(
                words.iter().map(|(w, c)| (w.as_slice(), *c)),
                40,
                Limits::default(),
                threads,
                |_| true,
            )
            .unwrap();
            merged_bytes(&t)
        };
        let one = run(1);
        let (l, r) = (&one[0].0, &one[0].1);
        let holding = words
            .iter()
            .filter(|(w, _)| w.windows(2).any(|p| p == [l[0], r[0]]))
            .count();
        assert!(
            holding >= PARALLEL_FROM,
            "{holding} words: too few to share"
        );
        assert_eq!(one[..2], naive(&words, 2)[..]);
        assert_eq!(run(2), one);
        assert_eq!(run(3), one);
    }
}
