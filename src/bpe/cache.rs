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
    /// Past this many stored ids, or `max_pieces` pieces, the cache is full: it keeps
    /// what it has and takes no more pieces.
    pub(super) max_ids: usize,
    pub(super) max_pieces: usize,
}

impl Default for PieceCache {
    fn default() -> Self {
        Self {
            small: PackedMap::default(),
            long: FxHashMap::default(),
            stored: Vec::new(),
            max_ids: 1 << 20,    // 4 MB of ids
            max_pieces: 3 << 17, // a table of 2^19 slots: 16 MB
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

    /// Takes back the ids `merge` stored for `entry`, which is not being kept (they
    /// are the last ones stored).
    #[inline]
    pub(super) fn unstore(&mut self, entry: (u32, u32)) {
        if entry.1 > 0 {
            self.stored.truncate(entry.0 as usize);
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
