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
    pub(super) small: PackedMap<Entry>,
    /// Pieces of 16 to `CACHE_PIECE_BYTES` bytes -> entries.
    pub(super) long: FxHashMap<Box<[u8]>, Entry>,
    /// The ids of cached pieces of three or more tokens, end to end ([`Entry`]).
    pub(super) stored: Vec<u32>,
    /// Past this many stored ids, or `max_pieces` pieces, the cache is full: it keeps
    /// what it has and takes no more pieces.
    pub(super) max_ids: usize,
    pub(super) max_pieces: usize,
}

/// A cached piece's ids in 8 bytes: one or two ids in the entry itself, or where
/// its ids lie in [`PieceCache::stored`]. Nearly all pieces are one or two tokens (in
/// English, 94% and 5%), so a hit seldom reads `stored`: a read there, at a place of
/// its own in 4 MB, missed the caches (most of the time a hit on a piece of two
/// tokens took).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Entry(u32, u32);

/// The tag of an entry holding two ids: the second's top bit (ids of a vocabulary
/// are below 2^31; a piece whose second id is not is stored instead).
const TWO: u32 = 1 << 31;

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
        Self(id, 0)
    }

    /// The entry of a piece whose ids `merge` just put at `stored[at..]`: one or two
    /// ids are taken back into the entry.
    #[inline]
    pub(super) fn of_stored(stored: &mut Vec<u32>, at: usize) -> Self {
        debug_assert!(stored.len() > at, "a piece has at least one id");
        match stored[at..] {
            [id] => {
                stored.truncate(at);
                Self(id, 0)
            }
            [a, b] if b < TWO => {
                stored.truncate(at);
                Self(a, b | TWO)
            }
            ref ids => Self(at as u32, ids.len() as u32),
        }
    }

    #[inline(always)]
    pub(super) fn ids(self) -> Ids {
        match self {
            Self(id, 0) => Ids::One(id),
            Self(a, b) if b & TWO != 0 => Ids::Two([a, b & !TWO]),
            Self(at, n) => Ids::Stored(at as usize, n as usize),
        }
    }
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
            &[u32::MAX, TWO - 1],
            &[1, TWO], // a second id too big to tag: stored
            &[3, 4, 5],
        ];
        for want in cases {
            let at = cache.stored.len();
            cache.stored.extend_from_slice(want);
            let entry = Entry::of_stored(&mut cache.stored, at);
            assert_eq!(ids(entry, &cache.stored), want);
            let kept = if want.len() == 1 || (want.len() == 2 && want[1] < TWO) {
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
