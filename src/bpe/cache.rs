//! The piece cache: ids of pieces already merged, so that a word seen before costs
//! one hash lookup instead of a merge loop; warm ones are kept between calls in a
//! [`crate::cache_pool::CachePool`].

use rustc_hash::FxHashMap;

use crate::cache_pool::PooledCache;
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
    /// Forgets every piece.
    pub(super) fn clear(&mut self) {
        self.small.clear();
        self.long.clear();
        self.stored.clear();
    }
}

impl PooledCache for PieceCache {
    /// Up to 2^18 pieces and 1 M ids (its table is then at most 16 MB, its ids 4 MB;
    /// natural text in one language needs a few MB). Past that — text that hardly
    /// repeats, such as random strings — the next call starts afresh. (With a limit of
    /// 2^18 ids, text in many scripts made the cache too big to keep after every call:
    /// each started cold, 37 MB/s instead of 150.)
    fn worth_keeping(&self) -> bool {
        self.stored.len() <= 1 << 20 && self.small.len() + self.long.len() <= 1 << 18
    }
}

/// The pool of warm piece caches (the one pool of every model kind,
/// [`crate::cache_pool`]).
pub(super) type CachePool = crate::cache_pool::CachePool<PieceCache>;
