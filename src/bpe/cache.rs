//! The piece cache: ids of pieces already merged, so that a word seen before costs
//! one hash lookup instead of a merge loop; and the pool that keeps warm caches
//! between calls.

use std::sync::{Mutex, TryLockError};

use rustc_hash::FxHashMap;

/// The ids of pieces already merged, keyed by the piece's bytes packed into an
/// integer (pieces of 2 to 15 bytes: nearly all words). Hashing and comparing an
/// integer needs no loop; a cache hit costs one lookup (and a copy, for the pieces
/// that are more than one token).
#[derive(Debug)]
pub struct PieceCache {
    /// Keys: the packed bytes as two halves (8-byte aligned entries: 24 bytes, not 32).
    pub(super) small: FxHashMap<(u64, u64), (u32, u32)>,
    /// The ids of cached pieces of two or more tokens, end to end; their entries are
    /// (start, length) in here. A piece that is one token has the entry (id, 0).
    pub(super) stored: Vec<u32>,
    /// The cache starts over past this many stored ids.
    pub(super) max_ids: usize,
}

impl Default for PieceCache {
    fn default() -> Self {
        Self {
            small: FxHashMap::default(),
            stored: Vec::new(),
            max_ids: 1 << 22, // 16 MB of ids, plus the map
        }
    }
}

impl PieceCache {
    /// Whether the cache is small enough to keep after a call: a text that hardly
    /// repeats (random strings) fills a cache no later call would profit from.
    /// (At most about 8 MB is kept: 2^18 entries of 24 bytes, and 1 MB of ids.)
    fn worth_keeping(&self) -> bool {
        self.stored.len() <= 1 << 18 && self.small.len() <= 1 << 18
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

impl CachePool {
    /// A pooled cache, or a new one. Never waits for the lock: in a child process
    /// forked while another thread of the parent held it, it stays locked forever, so
    /// contention just means a fresh cache (the result is the same either way).
    pub(super) fn take(&self) -> PieceCache {
        match self.0.try_lock() {
            Ok(mut pool) => pool.pop(),
            Err(TryLockError::Poisoned(e)) => e.into_inner().pop(),
            Err(TryLockError::WouldBlock) => None,
        }
        .unwrap_or_default()
    }

    /// Keeps `cache` for later calls, if it is worth keeping and the lock is free.
    pub(super) fn give_back(&self, cache: PieceCache) {
        if !cache.worth_keeping() {
            return;
        }
        let mut pool = match self.0.try_lock() {
            Ok(pool) => pool,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        if pool.len() < POOLED_CACHES {
            pool.push(cache);
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
