//! The piece cache: ids of pieces already merged, so that a word seen before costs
//! one hash lookup instead of a merge loop; and the pool that keeps warm caches
//! between calls.

use std::sync::{Mutex, MutexGuard, TryLockError};

use rustc_hash::FxHashMap;

use crate::packed::PackedMap;

/// The ids of pieces already merged, keyed by the piece's bytes packed into an
/// integer (pieces of 2 to 15 bytes: nearly all words). Hashing and comparing an
/// integer needs no loop; a cache hit costs one lookup (and a copy, for the pieces
/// that are more than one token).
#[derive(Debug)]
pub struct PieceCache {
    /// Packed keys -> entries.
    pub(super) small: PackedMap<(u32, u32)>,
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
            small: PackedMap::default(),
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
