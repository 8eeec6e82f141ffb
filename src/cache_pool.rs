//! Warm caches kept between calls, for every model kind (BPE's piece cache, the
//! SentencePiece word cache): one is taken per call (or per worker thread) and given
//! back after, so a program encoding text after text (a data loader calling
//! `encode_batch`, a loop over documents) does not start cold each time. A cache
//! holds results that are a function of their key alone, so which cache a call gets
//! never changes its result.
//!
//! The pool never blocks: in a child process forked while another thread of the
//! parent held the pool's lock, the lock stays held forever, so a lock that waits would
//! hang the child's first encode. Taking and giving back try the lock a bounded number
//! of times, and go on without the pool (a fresh cache, or the cache dropped) when
//! they do not get it.

use std::sync::{Mutex, MutexGuard, TryLockError};

/// A cache a [`CachePool`] can keep.
pub trait PooledCache: Default {
    /// Whether the cache is worth keeping after a call (one grown huge on text that
    /// hardly repeats is not: the next call starts afresh instead).
    fn worth_keeping(&self) -> bool {
        true
    }
}

/// Warm caches of type `C` kept between calls (see the module docs).
pub struct CachePool<C>(Mutex<Vec<C>>);

/// Caches kept at most (each a few MB for natural text).
const POOLED_CACHES: usize = 8;

/// Attempts at the pool's lock before giving up (each after a yield): the lock is
/// held only to push or pop, so a few attempts nearly always get it. Giving up at the
/// first contention handed a worker of every two-thread batch a cold cache.
const LOCK_ATTEMPTS: usize = 1000;

impl<C> Default for CachePool<C> {
    fn default() -> Self {
        Self(Mutex::new(Vec::new()))
    }
}

/// A copy of a model starts with an empty pool.
impl<C> Clone for CachePool<C> {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl<C> std::fmt::Debug for CachePool<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CachePool")
    }
}

impl<C: PooledCache> CachePool<C> {
    /// The pool, locked, trying a bounded number of times; None when it stays held.
    fn lock(&self) -> Option<MutexGuard<'_, Vec<C>>> {
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
    pub fn take(&self) -> C {
        self.lock()
            .and_then(|mut pool| pool.pop())
            .unwrap_or_default()
    }

    /// Keeps `cache` for later calls, if it is worth keeping and the pool has room.
    pub fn give_back(&self, cache: C) {
        if !cache.worth_keeping() {
            return;
        }
        if let Some(mut pool) = self.lock() {
            if pool.len() < POOLED_CACHES {
                pool.push(cache);
            }
        }
    }

    /// Caches kept now (0 when the pool's lock is held elsewhere).
    pub fn len(&self) -> usize {
        self.lock().map_or(0, |pool| pool.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default, Debug, PartialEq)]
    struct Cache(u32);

    impl PooledCache for Cache {
        fn worth_keeping(&self) -> bool {
            self.0 < 100
        }
    }

    #[test]
    fn a_held_pool_lock_never_blocks_taking_or_giving_back() {
        // Held for good here, as in a child forked while another thread held it.
        let pool = CachePool::<Cache>::default();
        pool.give_back(Cache(7));
        let held = pool.0.lock().unwrap();
        assert_eq!(pool.take(), Cache(0), "a fresh cache, at once");
        pool.give_back(Cache(8)); // dropped, at once
        drop(held);
        assert_eq!(pool.len(), 1);
        assert_eq!(pool.take(), Cache(7), "the warm cache kept before");
    }

    #[test]
    fn caches_not_worth_keeping_and_past_the_limit_are_dropped() {
        let pool = CachePool::<Cache>::default();
        pool.give_back(Cache(100));
        assert!(pool.is_empty());
        for i in 0..20 {
            pool.give_back(Cache(i));
        }
        assert_eq!(pool.len(), POOLED_CACHES);
    }
}
