//! The piece cache: ids of pieces already merged, so that a word seen before costs
//! one hash lookup instead of a merge loop; and the pool that keeps warm caches
//! between calls.

use std::sync::{Mutex, MutexGuard, TryLockError};

use rustc_hash::FxHashMap;

/// One slot of [`PieceTable`]: a packed key (0: empty; a cached piece has at least 2
/// bytes, so its length byte is never 0) and its entry. 32 bytes, aligned: two slots
/// per cache line, none straddling two.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(32))]
struct Slot {
    key: u128,
    entry: (u32, u32),
}

/// An open-addressing table from packed piece keys to cache entries, linear probing.
///
/// Why not a `HashMap`: on natural text most lookups are of a few thousand frequent
/// pieces (in the CPU cache), but the Zipf tail (about 1 lookup in 5 on English) is a
/// random access to memory, and perf put half of a warm encode's time on those
/// stalls. Here a lookup usually touches one cache line (hashbrown's touches two: the
/// control bytes and the bucket), and its address is known from the key alone, so
/// the encoder prefetches it a few pieces ahead ([`Self::prefetch`]) and the stall
/// overlaps with pre-tokenizing the pieces in between.
#[derive(Debug)]
pub(super) struct PieceTable {
    slots: Vec<Slot>,
    len: usize,
}

/// Slots a table starts with (2^12: 128 KB).
const FIRST_SLOTS: usize = 1 << 12;

impl Default for PieceTable {
    fn default() -> Self {
        Self {
            slots: vec![Slot::default(); FIRST_SLOTS],
            len: 0,
        }
    }
}

/// The hash of a packed key: both halves mixed by multiplication, high bits folded
/// down (the table indexes by the low bits).
#[inline]
pub(super) fn key_hash(key: u128) -> u64 {
    let h =
        ((key as u64) ^ ((key >> 64) as u64).rotate_left(23)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^ (h >> 32)
}

impl PieceTable {
    #[inline]
    fn home(&self, hash: u64) -> usize {
        hash as usize & (self.slots.len() - 1)
    }

    /// Asks the CPU to bring in the line a lookup of `hash` will read first. A hint:
    /// no effect on results.
    #[inline]
    pub(super) fn prefetch(&self, hash: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            let slot = &self.slots[self.home(hash)];
            // SAFETY: a prefetch reads nothing and cannot fault; the address is a slot's.
            unsafe {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch::<_MM_HINT_T0>((slot as *const Slot).cast::<i8>());
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = hash;
    }

    #[inline]
    pub(super) fn get(&self, key: u128, hash: u64) -> Option<(u32, u32)> {
        let mask = self.slots.len() - 1;
        let mut i = hash as usize & mask;
        loop {
            let slot = &self.slots[i];
            if slot.key == key {
                return Some(slot.entry);
            }
            if slot.key == 0 {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds a key known to be absent; doubles the table at 3/4 full.
    pub(super) fn insert(&mut self, key: u128, hash: u64, entry: (u32, u32)) {
        debug_assert!(key != 0);
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        self.place(Slot { key, entry }, hash);
        self.len += 1;
    }

    fn place(&mut self, slot: Slot, hash: u64) {
        let mask = self.slots.len() - 1;
        let mut i = hash as usize & mask;
        while self.slots[i].key != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = slot;
    }

    #[cold]
    fn grow(&mut self) {
        let bigger = vec![Slot::default(); self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, bigger);
        for slot in old.into_iter().filter(|s| s.key != 0) {
            self.place(slot, key_hash(slot.key));
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(super) fn clear(&mut self) {
        *self = Self::default();
    }
}

/// The ids of pieces already merged, keyed by the piece's bytes packed into an
/// integer (pieces of 2 to 15 bytes: nearly all words). Hashing and comparing an
/// integer needs no loop; a cache hit costs one lookup (and a copy, for the pieces
/// that are more than one token).
#[derive(Debug)]
pub struct PieceCache {
    /// Packed keys -> entries.
    pub(super) small: PieceTable,
    /// Pieces of 16 to `CACHE_PIECE_BYTES` bytes -> entries.
    pub(super) long: FxHashMap<Box<[u8]>, (u32, u32)>,
    /// The ids of cached pieces of two or more tokens, end to end; their entries are
    /// (start, length) in here. A piece that is one token has the entry (id, 0).
    pub(super) stored: Vec<u32>,
    /// The cache starts over past this many stored ids.
    pub(super) max_ids: usize,
}

impl Default for PieceCache {
    fn default() -> Self {
        Self {
            small: PieceTable::default(),
            long: FxHashMap::default(),
            stored: Vec::new(),
            max_ids: 1 << 22, // 16 MB of ids, plus the map
        }
    }
}

impl PieceCache {
    /// Whether the cache is worth keeping after a call: up to 2^18 pieces and 1 M ids
    /// (its table is then at most 16 MB, its ids 4 MB; natural text in one language
    /// needs a few MB). Past that — text that hardly repeats, such as random strings —
    /// the next call starts afresh. (With a limit of 2^18 ids, text in many scripts
    /// made the cache too big to keep after every call: each started cold, 37 MB/s
    /// instead of 150.)
    fn worth_keeping(&self) -> bool {
        self.stored.len() <= 1 << 20 && self.small.len() + self.long.len() <= 1 << 18
    }

    /// Forgets every piece.
    pub(super) fn clear(&mut self) {
        self.small.clear();
        self.long.clear();
        self.stored.clear();
    }
}

/// Warm piece caches kept between calls, one taken per call (or per worker thread)
/// and given back after, so that a program encoding text after text (a data loader
/// calling `encode_batch`, a loop over documents) does not start cold each time.
/// Cached ids are a function of the piece alone, so which cache a call gets never
/// changes its result.
#[derive(Debug, Default)]
pub(super) struct CachePool(Mutex<Vec<PieceCache>>);

/// Caches kept at most (each a few MB for natural text, at most about 8 MB).
const POOLED_CACHES: usize = 8;

impl Clone for CachePool {
    fn clone(&self) -> Self {
        Self::default()
    }
}

/// Attempts at the pool's lock before giving up (each after a yield): the lock is
/// held only to push or pop, so a few attempts nearly always get it.
const LOCK_ATTEMPTS: usize = 1000;

impl CachePool {
    /// The pool, locked, trying a bounded number of times. Never waits indefinitely:
    /// in a child process forked while another thread of the parent held the lock, it
    /// stays locked forever, and then callers go on without the pool (a fresh cache;
    /// the result is the same either way). Giving up at the first contention, as this
    /// once did, handed a worker of every two-thread batch a cold cache.
    fn lock(&self) -> Option<MutexGuard<'_, Vec<PieceCache>>> {
        for _ in 0..LOCK_ATTEMPTS {
            match self.0.try_lock() {
                Ok(pool) => return Some(pool),
                Err(TryLockError::Poisoned(e)) => return Some(e.into_inner()),
                Err(TryLockError::WouldBlock) => std::thread::yield_now(),
            }
        }
        None
    }

    /// A pooled cache, or a new one.
    pub(super) fn take(&self) -> PieceCache {
        self.lock()
            .and_then(|mut pool| pool.pop())
            .unwrap_or_default()
    }

    /// Keeps `cache` for later calls, if it is worth keeping.
    pub(super) fn give_back(&self, cache: PieceCache) {
        if !cache.worth_keeping() {
            return;
        }
        if let Some(mut pool) = self.lock() {
            if pool.len() < POOLED_CACHES {
                pool.push(cache);
            }
        }
    }
}

#[cfg(test)]
impl CachePool {
    /// Caches kept now.
    pub(super) fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_finds_every_key_it_holds_through_growth_and_collisions() {
        let mut t = PieceTable::default();
        let key = |i: u128| (i * 0x0101_0101_0101) | (5u128 << 120);
        for i in 0..20_000u128 {
            assert_eq!(t.get(key(i), key_hash(key(i))), None);
            t.insert(key(i), key_hash(key(i)), (i as u32, 1));
        }
        assert_eq!(t.len(), 20_000);
        for i in 0..20_000u128 {
            assert_eq!(t.get(key(i), key_hash(key(i))), Some((i as u32, 1)));
        }
        // Keys that all land on one home slot are found by probing.
        let mut crowded = PieceTable::default();
        for i in 1..100u128 {
            crowded.insert(i, 7, (i as u32, 0));
        }
        assert!((1..100u128).all(|i| crowded.get(i, 7) == Some((i as u32, 0))));
        assert_eq!(crowded.get(100, 7), None);
        t.clear();
        assert!(t.is_empty() && t.get(key(3), key_hash(key(3))).is_none());
    }

    #[test]
    fn a_held_pool_lock_never_blocks_taking_or_giving_back() {
        let pool = CachePool::default();
        pool.give_back(PieceCache::default());
        let held = pool.0.lock().unwrap();
        let cache = pool.take(); // a fresh cache, at once
        assert!(cache.small.is_empty());
        pool.give_back(cache); // dropped, at once
        drop(held);
        assert_eq!(pool.len(), 1);
    }
}
