//! The piece cache: ids of pieces already merged, so that a word seen before costs
//! one hash lookup instead of a merge loop; warm ones are kept between calls in a
//! [`crate::cache_pool::CachePool`].

use std::sync::Arc;

use crate::bytes_map::{bytes_hash, BytesMap};
use crate::cache_pool::PooledCache;
use crate::packed::PackedMap;

/// The ids of pieces already merged, keyed by the piece's bytes packed into an
/// integer (pieces of 2 to 15 bytes: nearly all words). Hashing and comparing an
/// integer needs no loop; a cache hit costs one lookup (and a copy, for the pieces
/// that are more than one token).
#[derive(Debug)]
pub struct PieceCache {
    /// Packed keys -> entries.
    pub(super) small: PackedMap<Entry>,
    /// Pieces of 16 to `CACHE_PIECE_BYTES` bytes -> entries.
    pub(super) long: BytesMap<Entry>,
    /// The most bytes `long`'s keys may take ([`MAX_LONG_BYTES`]; less in tests).
    pub(super) max_long_bytes: usize,
    /// The ids of cached pieces of three or more tokens, end to end ([`Entry`]).
    pub(super) stored: Vec<u32>,
    /// Past this many stored ids, or `max_pieces` pieces, the cache is full: it keeps
    /// what it has and takes no more pieces.
    pub(super) max_ids: usize,
    pub(super) max_pieces: usize,
    /// The keys of the pieces this cache took in since its lessons were last taken (at
    /// most [`LEARNED_SMALL`] and [`LEARNED_LONG`]), for the other caches of a multi-thread
    /// call to take in too ([`PieceCache::share_learned`]). Kept while the cache waits in
    /// the pool: what a call on one thread learned reaches the other caches at the next
    /// call on several.
    pub(super) learned_small: Vec<(u128, u64)>,
    pub(super) learned_long: Vec<Box<[u8]>>,
    /// The encoder's batch buffers ([`Batch`]), kept here between calls.
    pub(super) batch: Batch,
    /// For a worker of a multi-thread batch, the warm cache all its workers read
    /// ([`PieceCache::for_workers`]); this cache then holds only what the worker
    /// merged that the shared one lacks.
    pub(super) shared: Option<Arc<PieceCache>>,
}

/// The buffers of a batch of the encoder's walk: its pieces' ends and packed keys.
/// Kept with the cache rather than on the stack of each call: zeroing 5 KB of stack
/// took a seventh of the instructions of a call on one short sentence.
#[derive(Debug, Clone, Default)]
pub(super) struct Batch {
    pub(super) ends: Vec<usize>,
    pub(super) keys: Vec<(u128, u64)>,
}

impl Batch {
    /// The buffers, taken out (to give back when done), `len` of each.
    pub(super) fn take(&mut self, len: usize) -> Self {
        let mut batch = std::mem::take(self);
        if batch.ends.len() != len {
            batch.ends = vec![0; len];
            batch.keys = vec![(0, 0); len];
        }
        batch
    }
}

/// The cache keeps at most this many pieces of over 15 bytes, of at most
/// [`MAX_LONG_BYTES`] in all.
const MAX_LONG_PIECES: usize = 1 << 17;
const MAX_LONG_BYTES: usize = 16 << 20;

/// Pieces learned in a call, past which they are shared on a thread per cache.
/// (A few in tests, which share both ways.)
const SHARE_ON_THREADS: usize = if cfg!(test) { 8 } else { 1 << 14 };

/// Keys looked up this many ahead of their turn when sharing.
const SHARE_AHEAD: usize = 8;

/// What a cache learned, with the ids, for other caches: those of the same call
/// ([`PieceCache::share_learned`]), or of the same pipeline as it goes
/// ([`crate::model::WorkerCaches`]). Entries of three or more ids point into `ids`.
#[derive(Default)]
pub struct Lessons {
    small: Vec<(u128, u64, Entry)>,
    long: Vec<(Box<[u8]>, Entry)>,
    ids: Vec<u32>,
}

/// Learned pieces noted at most per cache between two shares: 3 MB of packed keys, and
/// up to 4 MB of longer pieces. A piece past them is merged again by the other workers
/// the first time they meet it, as before.
const LEARNED_SMALL: usize = 1 << 17;
const LEARNED_LONG: usize = 1 << 15;

/// A cached piece's ids in 8 bytes: one or two ids in the entry itself, or where
/// its ids lie in [`PieceCache::stored`]. Nearly all pieces are one or two tokens (in
/// English, 94% and 5%), so a hit seldom reads `stored`: a read there, at a place of
/// its own in 4 MB, missed the caches (most of the time a hit on a piece of two
/// tokens took).
///
/// Two ids are kept as they are (the second below 2^31), one id with [`ONE`] as its
/// second lane, stored ids as their place and [`STORED`] and their count: a hit's
/// two lanes are written to the output in one 8-byte store whatever their number,
/// and the number is `2 - (second lane >> 31)`, without a mask of either.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Entry(u64);

/// The second lane of an entry of one id (ids of a vocabulary are below 2^31; a
/// piece whose second id is not is stored instead).
const ONE: u32 = 1 << 31;

/// The tag of an entry pointing into `stored`, or'ed with the count of its ids.
const STORED: u32 = 3 << 30;

/// Entries below this, as [`Entry::lanes`], hold their ids themselves.
const INLINE_BELOW: u64 = (ONE as u64 + 1) << 32;

/// An entry's two lanes ([`Entry::lanes`]) as ids, in order: on a little-endian CPU,
/// the word as it is (one 8-byte store when written).
#[inline(always)]
pub(super) fn lanes_as_ids(lanes: u64) -> [u32; 2] {
    if cfg!(target_endian = "little") {
        // SAFETY: any 8 bytes are two u32s.
        unsafe { std::mem::transmute::<u64, [u32; 2]>(lanes) }
    } else {
        [lanes as u32, (lanes >> 32) as u32]
    }
}

/// What an [`Entry`] holds.
pub(super) enum Ids {
    One(u32),
    Two([u32; 2]),
    /// `stored[start..start + len]`.
    Stored(usize, usize),
}

impl Entry {
    #[inline]
    pub(super) fn one(id: u32) -> Self {
        Self::of_lanes(id, ONE)
    }

    #[inline(always)]
    fn of_lanes(first: u32, second: u32) -> Self {
        Self(u64::from(first) | u64::from(second) << 32)
    }

    /// The first lane and the second.
    #[inline(always)]
    fn split(self) -> (u32, u32) {
        let [first, second] = lanes_as_ids(self.0);
        (first, second)
    }

    /// An entry for the `n` ids at `stored[at..]`.
    #[inline]
    pub(super) fn stored(at: usize, n: usize) -> Self {
        debug_assert!(n < 1 << 30 && at <= u32::MAX as usize);
        Self::of_lanes(at as u32, STORED | n as u32)
    }

    /// The entry of a piece whose ids `merge` just put at `stored[at..]`: one or two
    /// ids are taken back into the entry.
    #[inline]
    pub(super) fn of_stored(stored: &mut Vec<u32>, at: usize) -> Self {
        debug_assert!(stored.len() > at, "a piece has at least one id");
        match stored[at..] {
            [id] => {
                stored.truncate(at);
                Self::one(id)
            }
            [a, b] if b < ONE => {
                stored.truncate(at);
                Self::of_lanes(a, b)
            }
            ref ids => Self::stored(at, ids.len()),
        }
    }

    /// The entry as one word: its first lane in the low half, its second in the high.
    #[inline(always)]
    pub(super) fn lanes(self) -> u64 {
        self.0
    }

    /// The lanes of an entry that holds its ids itself (one or two), to write as
    /// they are (8 bytes), and how many of them count, with no branch on that count;
    /// None for ids in [`PieceCache::stored`]. (For one id the second lane is
    /// [`ONE`], a slot past the ids.)
    #[inline(always)]
    pub(super) fn inline_lanes(self) -> Option<(u64, usize)> {
        let lanes = self.lanes();
        (lanes < INLINE_BELOW).then_some((lanes, 2 - (lanes >> 63) as usize))
    }

    /// Where the ids of an entry that keeps them in `stored` are: `(at, n)`, for
    /// `stored[at..at + n]`.
    #[inline(always)]
    pub(super) fn stored_place(self) -> (usize, usize) {
        let (at, tagged) = self.split();
        debug_assert!(self.inline_lanes().is_none());
        (at as usize, (tagged & !STORED) as usize)
    }

    /// The ids of an entry that keeps them in `stored` (its three or more).
    #[inline(always)]
    pub(super) fn stored_ids(self, stored: &[u32]) -> &[u32] {
        let (at, n) = self.stored_place();
        &stored[at..at + n]
    }

    #[inline(always)]
    pub(super) fn ids(self) -> Ids {
        match self.split() {
            (id, ONE) => Ids::One(id),
            (a, b) if b < ONE => Ids::Two([a, b]),
            (at, tagged) => Ids::Stored(at as usize, (tagged & !STORED) as usize),
        }
    }
}

impl Default for PieceCache {
    fn default() -> Self {
        Self {
            // Half full at most up to 2^19 slots (16 MB), then 3/4 (`max_pieces`).
            small: PackedMap::sparse_below(1 << 19),
            long: BytesMap::default(),
            max_long_bytes: MAX_LONG_BYTES,
            stored: Vec::new(),
            max_ids: 1 << 20,    // 4 MB of ids
            max_pieces: 3 << 17, // a table of 2^19 slots: 16 MB
            learned_small: Vec::new(),
            learned_long: Vec::new(),
            batch: Batch::default(),
            shared: None,
        }
    }
}

impl PieceCache {
    /// Whether a piece of 2 to 15 bytes merged now may be kept.
    ///
    /// A full cache keeps what it has instead of starting over: text is Zipfian, so
    /// the pieces it took first are the frequent ones, and every later call finds
    /// them. (It used to start over within a call, and a cache grown past the size
    /// worth keeping was dropped when the call returned: past about 300,000 distinct
    /// pieces — 50 MB of English — every call of a long job started cold, at half
    /// speed. A piece that is a token costs one more probe anyway: `whole_packed`.)
    #[inline]
    pub(super) fn has_room(&self) -> bool {
        self.small.len() < self.max_pieces && self.stored.len() < self.max_ids
    }

    /// Keeps the entry of a piece of 2 to 15 bytes, packed as `key`.
    #[inline]
    pub(super) fn keep_small(&mut self, key: u128, hash: u64, entry: Entry) {
        self.small.insert(key, hash, entry);
        if self.learned_small.len() < LEARNED_SMALL {
            self.learned_small.push((key, hash));
        }
    }

    /// Whether a piece of `len` bytes, 16 or more, merged now may be kept.
    #[inline]
    pub(super) fn has_room_long(&self, len: usize) -> bool {
        self.has_room()
            && self.long.len() < MAX_LONG_PIECES
            && self.long.key_bytes() + len <= self.max_long_bytes
    }

    /// Keeps the entry of a piece of 16 bytes or more, whose hash is `hash`.
    pub(super) fn keep_long(&mut self, piece: &[u8], hash: u64, entry: Entry) {
        self.long.insert(piece, hash, entry);
        if self.learned_long.len() < LEARNED_LONG {
            self.learned_long.push(piece.into());
        }
    }

    /// Whether this cache learned anything since it was last asked.
    pub(super) fn has_lessons(&self) -> bool {
        !self.learned_small.is_empty() || !self.learned_long.is_empty()
    }

    /// What this cache learned since it was last asked, with the ids (its log of
    /// learned keys is emptied).
    pub(super) fn lessons(&mut self) -> Lessons {
        let mut lessons = Lessons::default();
        let copy = |entry: Entry, ids: &mut Vec<u32>| match entry.ids() {
            Ids::Stored(at, n) => {
                ids.extend_from_slice(&self.stored[at..at + n]);
                Entry::stored(ids.len() - n, n)
            }
            _ => entry,
        };
        let learned = std::mem::take(&mut self.learned_small);
        for (k, &(key, hash)) in learned.iter().enumerate() {
            // Table lines a few keys ahead are fetched while this one is looked up.
            if let Some(&(_, ahead)) = learned.get(k + SHARE_AHEAD) {
                self.small.prefetch(ahead);
            }
            if let Some(entry) = self.small.get(key, hash) {
                let entry = copy(entry, &mut lessons.ids);
                lessons.small.push((key, hash, entry));
            }
        }
        for piece in std::mem::take(&mut self.learned_long) {
            if let Some(entry) = self.long.get(&piece, bytes_hash(&piece)) {
                let entry = copy(entry, &mut lessons.ids);
                lessons.long.push((piece, entry));
            }
        }
        lessons
    }

    /// Takes in the pieces of `lessons` this cache lacks, while it has room.
    pub(super) fn take_in(&mut self, lessons: &Lessons) {
        let entry_for = |entry: Entry, stored: &mut Vec<u32>| match entry.ids() {
            Ids::Stored(at, n) => {
                let to = stored.len();
                stored.extend_from_slice(&lessons.ids[at..at + n]);
                Entry::of_stored(stored, to)
            }
            _ => entry,
        };
        for (k, &(key, hash, entry)) in lessons.small.iter().enumerate() {
            if !self.has_room() {
                return;
            }
            if let Some(&(_, ahead, _)) = lessons.small.get(k + SHARE_AHEAD) {
                self.small.prefetch(ahead);
            }
            if self.small.get(key, hash).is_none() {
                let entry = entry_for(entry, &mut self.stored);
                self.small.insert(key, hash, entry);
            }
        }
        for (piece, entry) in &lessons.long {
            if !self.has_room_long(piece.len()) {
                return;
            }
            let hash = bytes_hash(piece);
            if self.long.get(piece, hash).is_none() {
                let entry = entry_for(*entry, &mut self.stored);
                self.long.insert(piece, hash, entry);
            }
        }
    }

    /// Takes in the lessons of every cache of the call but its own (the `j`th).
    fn take_in_others(&mut self, j: usize, lessons: &[Lessons]) {
        for (_, l) in lessons.iter().enumerate().filter(|&(i, _)| i != j) {
            self.take_in(l);
        }
    }

    /// Gives every cache of `caches` (those of one call's workers) the pieces the
    /// others learned since they last shared, while it has room: the worker threads of
    /// a batch each merged the pieces of their own parts, so each cache knew only about
    /// half of what the call saw, and a batch on two threads needed four or five calls
    /// on the same text to run warm (one call on one thread). What a cache learned in
    /// calls on one thread is shared too: when it was forgotten on the way back to the
    /// pool, the second cache of a two-thread batch after calls on one thread lagged
    /// for good on text of many distinct pieces (multilingual text on gpt2: 2,000 to
    /// 9,700 pieces merged again in every warm call, one worker a third slower).
    /// Entries are ids of their key alone, so which cache holds what never changes a
    /// result. Many pieces are shared on a thread per cache (started and ended here).
    /// (The workers of a batch whose encoder walks with a built-in splitter read one
    /// cache instead, [`PieceCache::for_workers`], and give back only that one.)
    pub fn share_learned(caches: &mut [PieceCache]) {
        if caches.len() < 2 {
            return;
        }
        let learned: usize = caches
            .iter()
            .map(|c| c.learned_small.len() + c.learned_long.len())
            .sum();
        if learned < SHARE_ON_THREADS {
            let lessons: Vec<Lessons> = caches.iter_mut().map(PieceCache::lessons).collect();
            for (j, cache) in caches.iter_mut().enumerate() {
                cache.take_in_others(j, &lessons);
            }
            return;
        }
        let lessons: Vec<Lessons> = std::thread::scope(|s| {
            let running: Vec<_> = caches
                .iter_mut()
                .map(|c| s.spawn(move || c.lessons()))
                .collect();
            running
                .into_iter()
                .map(|t| t.join().expect("no panics"))
                .collect()
        });
        let lessons = &lessons;
        std::thread::scope(|s| {
            for (j, cache) in caches.iter_mut().enumerate() {
                s.spawn(move || cache.take_in_others(j, lessons));
            }
        });
    }

    /// The caches of a batch's `workers` threads: `main` (a warm cache from the pool),
    /// read by all of them at once, and for each worker a cache of its own for the
    /// pieces `main` lacks, which `main` takes in when the batch is done
    /// ([`PieceCache::gather`]).
    ///
    /// Workers with a warm cache each used to hold the same pieces twice: on text of
    /// many distinct pieces (multilingual text under gpt2: 100,000, an 8 MB table
    /// each), two copies outgrew what the CPU's shared cache kept, and each worker of
    /// a two-thread batch took a tenth longer over its half than one thread over the
    /// same half. (One thread taking two pooled caches in turn, call by call, was
    /// 13-20% slower too.)
    ///
    /// The workers' own caches come from `empty` (which gives empty caches).
    pub fn for_workers(
        main: PieceCache,
        workers: usize,
        mut empty: impl FnMut() -> PieceCache,
    ) -> Vec<PieceCache> {
        let main = Arc::new(main);
        (0..workers)
            .map(|_| {
                let mut own = empty();
                debug_assert!(own.is_empty());
                own.shared = Some(Arc::clone(&main));
                own
            })
            .collect()
    }

    /// The shared cache of `workers` ([`PieceCache::for_workers`]) with what each of
    /// them merged taken in (while it has room), and the workers' caches that merged
    /// nothing (to use again); None if they share none.
    pub fn gather(workers: Vec<PieceCache>) -> Option<(PieceCache, Vec<PieceCache>)> {
        let mut main = None;
        let mut lessons = Vec::with_capacity(workers.len());
        let mut empty = Vec::new();
        for mut worker in workers {
            main = worker.shared.take().or(main);
            if worker.has_lessons() {
                lessons.push(worker.lessons());
            }
            if worker.is_empty() {
                empty.push(worker);
            }
        }
        // Every worker's cache is here, so none holds `main` any more.
        let mut main = Arc::try_unwrap(main?).ok()?;
        for lessons in &lessons {
            main.take_in(lessons);
        }
        Some((main, empty))
    }

    /// Whether the cache holds no piece (nor the log of one).
    fn is_empty(&self) -> bool {
        self.small.is_empty()
            && self.long.is_empty()
            && self.stored.is_empty()
            && !self.has_lessons()
    }

    /// Takes back the ids `merge` stored for `entry`, which is not being kept (they
    /// are the last ones stored).
    #[inline]
    pub(super) fn unstore(&mut self, entry: Entry) {
        if let Ids::Stored(at, _) = entry.ids() {
            self.stored.truncate(at);
        }
    }
}

impl PooledCache for PieceCache {
    /// Every cache stays within its limits ([`PieceCache::has_room`]), so every one is
    /// kept; the check guards the limits. (With a limit of 2^18 ids, text in many
    /// scripts made the cache too big to keep after every call: each started cold,
    /// 37 MB/s instead of 150.)
    fn worth_keeping(&self) -> bool {
        self.stored.len() <= self.max_ids && self.small.len() <= self.max_pieces
    }
}

/// The pool of warm piece caches (the one pool of every model kind,
/// [`crate::cache_pool`]).
pub(super) type CachePool = crate::cache_pool::CachePool<PieceCache>;

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(entry: Entry, stored: &[u32]) -> Vec<u32> {
        match entry.ids() {
            Ids::One(id) => vec![id],
            Ids::Two(ids) => ids.to_vec(),
            Ids::Stored(at, n) => stored[at..at + n].to_vec(),
        }
    }

    #[test]
    fn entries_hold_one_or_two_ids_and_point_at_more() {
        let mut cache = PieceCache::default();
        cache.stored.extend([9, 9]); // a piece stored before
        let cases: [&[u32]; 6] = [
            &[0],
            &[u32::MAX],
            &[7, 0],
            &[u32::MAX, ONE - 1],
            &[1, ONE], // a second id too big to keep in the entry: stored
            &[3, 4, 5],
        ];
        for want in cases {
            let at = cache.stored.len();
            cache.stored.extend_from_slice(want);
            let entry = Entry::of_stored(&mut cache.stored, at);
            assert_eq!(ids(entry, &cache.stored), want);
            // Ids kept in the entry are its lanes, as the encoder writes them.
            match entry.inline_lanes() {
                Some((lanes, n)) => {
                    assert_eq!(&lanes_as_ids(lanes)[..n], want, "{want:?}");
                }
                None => assert!(want.len() > 2 || want[1] >= ONE, "{want:?}"),
            }
            let kept = if want.len() == 1 || (want.len() == 2 && want[1] < ONE) {
                at
            } else {
                at + want.len()
            };
            assert_eq!(cache.stored.len(), kept, "{want:?}");
            // Not kept: whatever it stored is taken back.
            cache.unstore(entry);
            assert_eq!(cache.stored.len(), at, "{want:?}");
        }
        assert_eq!(cache.stored, [9, 9]);
    }
}
