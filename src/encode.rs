//! Encoding: text → token ids, and ids → bytes.
//!
//! Special tokens the caller allows are matched first (leftmost-longest); the text
//! between them is pre-tokenized, and each piece is merged by rank, lowest first —
//! GPT-2's `bpe()`: repeatedly merge the adjacent pair with the lowest rank (the
//! leftmost one on ties, which is the same as merging every occurrence left to right).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Mutex;

use rustc_hash::FxHashMap;

use crate::packed::{packed, MAX_PACKED};
use crate::pretokenize::{for_each_unit, PreTokenizer, SpecialMatcher, Unit};

/// A merge rule: `(left, right)` becomes `id`; lower `rank` merges first.
#[derive(Debug, Clone, Copy)]
pub struct Merge {
    pub rank: u32,
    pub id: u32,
}

#[derive(Debug, Clone)]
pub struct Encoder {
    /// Piece caches of earlier calls, warm, for later ones to take.
    caches: CachePool,
    merges: FxHashMap<(u32, u32), Merge>,
    byte_ids: [u32; 256],
    decoder: FxHashMap<u32, Vec<u8>>,
    special_ids: FxHashMap<String, u32>,
    pre: PreTokenizer,
    /// Every merge ranks after the merges that made its two parts, so a merge never
    /// creates a pair that should have merged earlier: long pieces can then be merged
    /// one rank at a time ([`Encoder::merge_by_rank`]). True of every trained
    /// vocabulary; checked, with the heap as the fallback.
    ranks_grow: bool,
    /// Matcher over all special tokens (for the common "all allowed" case and for
    /// finding disallowed ones).
    all_specials: SpecialMatcher,
    no_specials: SpecialMatcher,
}

/// Appends `ids`; most pieces are one token, which needs no call to memcpy.
#[inline]
fn push_ids(out: &mut Vec<u32>, ids: &[u32]) {
    match ids {
        [id] => out.push(*id),
        _ => out.extend_from_slice(ids),
    }
}

/// The ids of pieces already merged, keyed by the piece's bytes packed into an
/// integer (pieces of 2 to 15 bytes: nearly all words). Hashing and comparing an
/// integer needs no loop; a cache hit costs one lookup (and a copy, for the pieces
/// that are more than one token).
#[derive(Debug)]
pub struct PieceCache {
    /// Keys: the packed bytes as two halves (8-byte aligned entries: 24 bytes, not 32).
    small: FxHashMap<(u64, u64), (u32, u32)>,
    /// The ids of cached pieces of two or more tokens, end to end; their entries are
    /// (start, length) in here. A piece that is one token has the entry (id, 0).
    stored: Vec<u32>,
    /// The cache starts over past this many stored ids.
    max_ids: usize,
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
struct CachePool(Mutex<Vec<PieceCache>>);

/// Caches kept at most (each a few MB for natural text, at most about 8 MB).
const POOLED_CACHES: usize = 8;

impl Clone for CachePool {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl CachePool {
    fn take(&self) -> PieceCache {
        let mut pool = self.0.lock().unwrap_or_else(|e| e.into_inner());
        pool.pop().unwrap_or_default()
    }

    fn give_back(&self, cache: PieceCache) {
        if cache.worth_keeping() {
            let mut pool = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if pool.len() < POOLED_CACHES {
                pool.push(cache);
            }
        }
    }
}

/// Pieces up to this many bytes are merged with a plain scan; longer ones with a heap.
const SHORT_PIECE: usize = 64;
/// Longest piece worth caching.
const CACHE_PIECE_BYTES: usize = 32;

impl Encoder {
    /// `vocab`: id → bytes (must contain every single byte); `merges`: (left id,
    /// right id, merged id) in rank order; `specials`: token → id.
    pub fn new(
        vocab: FxHashMap<u32, Vec<u8>>,
        merges: &[(u32, u32, u32)],
        specials: FxHashMap<String, u32>,
        pattern: Option<&str>,
    ) -> Result<Self, String> {
        let mut byte_ids = [u32::MAX; 256];
        // Lowest id wins when a byte string occurs twice.
        for (&id, bytes) in &vocab {
            if let [b] = bytes[..] {
                if id < byte_ids[b as usize] && !specials.values().any(|&s| s == id) {
                    byte_ids[b as usize] = id;
                }
            }
        }
        if let Some(missing) = byte_ids.iter().position(|&id| id == u32::MAX) {
            return Err(format!(
                "the vocabulary has no token for the single byte 0x{missing:02x}; \
                 byte-level BPE needs all 256 bytes"
            ));
        }
        let mut merge_map = FxHashMap::default();
        for (rank, &(l, r, id)) in merges.iter().enumerate() {
            merge_map.entry((l, r)).or_insert(Merge {
                rank: rank as u32,
                id,
            });
        }
        let ranks_grow = ranks_grow(&merge_map);
        let mut special_list: Vec<(&String, &u32)> = specials.iter().collect();
        special_list.sort();
        let tokens: Vec<String> = special_list.iter().map(|(t, _)| (*t).clone()).collect();
        let mut decoder = vocab;
        for (t, &id) in &specials {
            decoder.insert(id, t.as_bytes().to_vec());
        }
        Ok(Self {
            merges: merge_map,
            ranks_grow,
            byte_ids,
            decoder,
            all_specials: SpecialMatcher::new(&tokens)?,
            no_specials: SpecialMatcher::new(&[])?,
            special_ids: specials,
            pre: PreTokenizer::new(pattern)?,
            caches: CachePool::default(),
        })
    }

    /// The largest id of any token (0 for an empty vocabulary).
    pub fn max_id(&self) -> u32 {
        self.decoder.keys().copied().max().unwrap_or(0)
    }

    pub fn special_ids(&self) -> &FxHashMap<String, u32> {
        &self.special_ids
    }

    /// A matcher for a subset of the special tokens (`None`: all of them).
    pub fn special_matcher(&self, allowed: Option<&[String]>) -> Result<SpecialMatcher, String> {
        match allowed {
            None => Ok(self.all_specials.clone()),
            Some(list) => SpecialMatcher::new(list),
        }
    }

    pub fn pretokenizer(&self) -> &PreTokenizer {
        &self.pre
    }

    pub fn all_specials(&self) -> &SpecialMatcher {
        &self.all_specials
    }

    pub fn no_specials(&self) -> &SpecialMatcher {
        &self.no_specials
    }

    /// Encodes `text`, treating the tokens of `allowed` as special.
    pub fn encode(&self, text: &str, allowed: &SpecialMatcher) -> Result<Vec<u32>, String> {
        let mut out = Vec::with_capacity(text.len() / 3);
        self.encode_into(text, allowed, &mut out)?;
        Ok(out)
    }

    /// Like [`Encoder::encode`], remembering pieces in `cache` (which may be warm from
    /// earlier texts, e.g. the other texts of a batch on this thread).
    pub fn encode_cached(
        &self,
        text: &str,
        allowed: &SpecialMatcher,
        cache: &mut PieceCache,
    ) -> Result<Vec<u32>, String> {
        let mut out = Vec::with_capacity(text.len() / 3);
        self.encode_cached_into(text, allowed, cache, &mut out)?;
        Ok(out)
    }

    /// Like [`Encoder::encode_cached`], appending to `out`.
    pub fn encode_cached_into(
        &self,
        text: &str,
        allowed: &SpecialMatcher,
        cache: &mut PieceCache,
        out: &mut Vec<u32>,
    ) -> Result<(), String> {
        self.for_each_ids(text, allowed, Some(cache), |ids| push_ids(out, ids))
    }

    /// Runs `f` with a warm piece cache from earlier calls (or a new one), then keeps
    /// the cache for later calls.
    pub fn with_cache<R>(&self, f: impl FnOnce(&mut PieceCache) -> R) -> R {
        let mut cache = self.caches.take();
        let result = f(&mut cache);
        self.caches.give_back(cache);
        result
    }

    pub fn encode_into(
        &self,
        text: &str,
        allowed: &SpecialMatcher,
        out: &mut Vec<u32>,
    ) -> Result<(), String> {
        self.for_each_ids(text, allowed, None, |ids| push_ids(out, ids))
    }

    /// The number of tokens `text` encodes to, without keeping them.
    pub fn count(&self, text: &str, allowed: &SpecialMatcher) -> Result<usize, String> {
        let mut n = 0;
        self.for_each_ids(text, allowed, None, |ids| n += ids.len())?;
        Ok(n)
    }

    /// Calls `emit` with the ids of each unit of `text` (a piece or a special token),
    /// in order. Without a `cache`, one of the pool's (see [`Encoder::with_cache`]).
    fn for_each_ids(
        &self,
        text: &str,
        allowed: &SpecialMatcher,
        cache: Option<&mut PieceCache>,
        mut emit: impl FnMut(&[u32]),
    ) -> Result<(), String> {
        let cache = match cache {
            Some(c) => c,
            None => return self.with_cache(|c| self.for_each_ids(text, allowed, Some(c), emit)),
        };
        let bytes = text.as_bytes();
        let mut scratch = Vec::with_capacity(SHORT_PIECE);
        let special = |index: usize| self.special_ids[&allowed.tokens()[index]];
        // Pieces of 16 to 32 bytes borrow their key from the text, so they are
        // remembered for this text only.
        let mut long: FxHashMap<&[u8], (u32, u32)> = FxHashMap::default();
        let PieceCache {
            small,
            stored,
            max_ids,
        } = cache;
        for_each_unit(text, allowed, &self.pre, |u| match u {
            Unit::Piece { start, end } => {
                let piece = &bytes[start..end];
                if piece.len() == 1 {
                    return emit(&[self.byte_ids[piece[0] as usize]]);
                }
                if piece.len() > CACHE_PIECE_BYTES {
                    scratch.clear();
                    self.encode_piece(piece, &mut scratch);
                    return emit(&scratch);
                }
                let key = (piece.len() <= MAX_PACKED).then(|| {
                    let k = packed(bytes, start, end);
                    (k as u64, (k >> 64) as u64)
                });
                let hit = match key {
                    Some(k) => small.get(&k),
                    None => long.get(piece),
                };
                if let Some(&(at, n)) = hit {
                    return match n {
                        0 => emit(&[at]), // one token: its id is the entry
                        _ => emit(&stored[at as usize..(at + n) as usize]),
                    };
                }
                if stored.len() > *max_ids {
                    // Bounded memory on text that hardly repeats (random strings).
                    small.clear();
                    long.clear();
                    stored.clear();
                }
                let at = stored.len();
                self.encode_piece(piece, stored);
                // Most pieces are one token: keep its id in the entry itself (length 0),
                // so that a hit reads nothing else.
                let entry = match stored.len() - at {
                    1 => (stored.pop().expect("one id"), 0),
                    n => (at as u32, n as u32),
                };
                match key {
                    Some(k) => small.insert(k, entry),
                    None => long.insert(piece, entry),
                };
                match entry {
                    (id, 0) => emit(&[id]),
                    _ => emit(&stored[at..]),
                }
            }
            Unit::Special { index, .. } => emit(&[special(index)]),
        })
    }

    /// Encodes the part of `text` that later text cannot change, for streaming.
    ///
    /// Returns the ids and the number of bytes consumed; the caller keeps
    /// `text[consumed..]` and prepends it to the next chunk. With `last`, everything
    /// is consumed. A unit is final when it ends at least `margin` bytes before the end
    /// of the known text: the built-in patterns look at most a few characters past a
    /// piece (a whitespace run that reaches the end of the text always ends its piece
    /// there), and a special token is decided within its own length.
    pub fn encode_prefix(
        &self,
        text: &str,
        allowed: &SpecialMatcher,
        last: bool,
    ) -> Result<(Vec<u32>, usize), String> {
        if last {
            return Ok((self.encode(text, allowed)?, text.len()));
        }
        let margin = STREAM_MARGIN + 2 * allowed.max_len();
        let limit = text.len().saturating_sub(margin);
        let mut units = Vec::new();
        for_each_unit(text, allowed, &self.pre, |u| {
            if u.end() <= limit {
                units.push(u)
            }
        })?;
        let bytes = text.as_bytes();
        let mut out = Vec::new();
        let mut consumed = 0;
        for u in units {
            match u {
                Unit::Piece { start, end } => self.encode_piece(&bytes[start..end], &mut out),
                Unit::Special { index, .. } => out.push(self.special_ids[&allowed.tokens()[index]]),
            }
            consumed = u.end();
        }
        Ok((out, consumed))
    }

    /// BPE on one pre-token.
    pub fn encode_piece(&self, piece: &[u8], out: &mut Vec<u32>) {
        match piece.len() {
            0 => {}
            1 => out.push(self.byte_ids[piece[0] as usize]),
            n if n <= SHORT_PIECE => self.merge_short(piece, out),
            _ if self.ranks_grow => self.merge_by_rank(piece, out),
            _ => self.merge_long(piece, out),
        }
    }

    fn rank(&self, l: u32, r: u32) -> Option<Merge> {
        self.merges.get(&(l, r)).copied()
    }

    /// (rank, merged id) of a pair; rank `u32::MAX` when the pair does not merge.
    fn pair(&self, l: u32, r: u32) -> (u32, u32) {
        self.rank(l, r).map_or((u32::MAX, 0), |m| (m.rank, m.id))
    }

    /// Short pieces, on the stack: the rank of every adjacent pair is kept, so each
    /// merge looks up only the two pairs it changes; the lowest rank (leftmost on ties)
    /// is found by a scan, cheap at this length.
    fn merge_short(&self, piece: &[u8], out: &mut Vec<u32>) {
        let mut len = piece.len();
        debug_assert!((2..=SHORT_PIECE).contains(&len));
        let mut ids = [0u32; SHORT_PIECE];
        for (id, &b) in ids.iter_mut().zip(piece) {
            *id = self.byte_ids[b as usize];
        }
        // pairs[i]: the pair ids[i], ids[i + 1].
        let mut pairs = [(u32::MAX, 0u32); SHORT_PIECE];
        for i in 0..len - 1 {
            pairs[i] = self.pair(ids[i], ids[i + 1]);
        }
        while len > 1 {
            let mut best = 0;
            for i in 1..len - 1 {
                if pairs[i].0 < pairs[best].0 {
                    best = i;
                }
            }
            if pairs[best].0 == u32::MAX {
                break;
            }
            ids[best] = pairs[best].1;
            ids.copy_within(best + 2..len, best + 1);
            if best + 2 < len {
                pairs.copy_within(best + 2..len - 1, best + 1);
            }
            len -= 1;
            if best + 1 < len {
                pairs[best] = self.pair(ids[best], ids[best + 1]);
            }
            if best > 0 {
                pairs[best - 1] = self.pair(ids[best - 1], ids[best]);
            }
        }
        out.extend_from_slice(&ids[..len]);
    }

    /// Linear-time BPE for long pieces when ranks grow along merges (`ranks_grow`):
    /// a merge only creates pairs of higher rank than its own, so the pairs can be
    /// processed one rank at a time, lowest first, each rank's positions left to right.
    /// Symbols sit in a linked list; each rank that occurs gets a bucket of positions.
    fn merge_by_rank(&self, piece: &[u8], out: &mut Vec<u32>) {
        const NONE: u32 = u32::MAX;
        struct Bucket {
            left: u32,
            right: u32,
            id: u32,
            at: Vec<u32>,
        }
        fn add(
            buckets: &mut FxHashMap<u32, Bucket>,
            queue: &mut BinaryHeap<Reverse<u32>>,
            (l, r): (u32, u32),
            m: Merge,
            at: u32,
        ) {
            buckets
                .entry(m.rank)
                .or_insert_with(|| {
                    queue.push(Reverse(m.rank));
                    Bucket {
                        left: l,
                        right: r,
                        id: m.id,
                        at: Vec::new(),
                    }
                })
                .at
                .push(at);
        }
        let n = piece.len();
        let mut ids: Vec<u32> = piece.iter().map(|&b| self.byte_ids[b as usize]).collect();
        let mut next: Vec<u32> = (1..=n as u32).collect(); // n: none
        let mut prev: Vec<u32> = (0..n as u32).map(|i| i.wrapping_sub(1)).collect(); // NONE
        let mut buckets: FxHashMap<u32, Bucket> = FxHashMap::default();
        let mut queue = BinaryHeap::new();
        for i in 0..n - 1 {
            if let Some(m) = self.rank(ids[i], ids[i + 1]) {
                add(&mut buckets, &mut queue, (ids[i], ids[i + 1]), m, i as u32);
            }
        }
        while let Some(Reverse(rank)) = queue.pop() {
            let mut b = buckets
                .remove(&rank)
                .expect("every queued rank has a bucket");
            b.at.sort_unstable();
            for &i in &b.at {
                let i = i as usize;
                let j = next[i] as usize;
                // Stale: a merge since this entry was made changed the pair.
                if j >= n || ids[i] != b.left || ids[j] != b.right {
                    continue;
                }
                ids[i] = b.id;
                ids[j] = NONE;
                let k = next[j];
                next[i] = k;
                if (k as usize) < n {
                    prev[k as usize] = i as u32;
                    let pair = (ids[i], ids[k as usize]);
                    if let Some(m) = self.rank(pair.0, pair.1) {
                        debug_assert!(m.rank > rank);
                        add(&mut buckets, &mut queue, pair, m, i as u32);
                    }
                }
                let p = prev[i];
                if p != NONE {
                    let pair = (ids[p as usize], ids[i]);
                    if let Some(m) = self.rank(pair.0, pair.1) {
                        debug_assert!(m.rank > rank);
                        add(&mut buckets, &mut queue, pair, m, p);
                    }
                }
            }
        }
        let mut i = 0;
        while i < n {
            out.push(ids[i]);
            i = next[i] as usize;
        }
    }

    /// O(n log n), for any merge table: symbols in a linked list, candidate pairs in a
    /// min-heap keyed by (rank, position); stale entries are skipped when popped.
    fn merge_long(&self, piece: &[u8], out: &mut Vec<u32>) {
        let n = piece.len();
        let mut ids: Vec<u32> = piece.iter().map(|&b| self.byte_ids[b as usize]).collect();
        let mut next: Vec<usize> = (1..=n).collect(); // n = none
        let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect(); // MAX = none
        let mut alive = vec![true; n];
        let mut heap = BinaryHeap::new();
        for i in 0..n - 1 {
            if let Some(m) = self.rank(ids[i], ids[i + 1]) {
                heap.push(Reverse((m.rank, i, ids[i], ids[i + 1])));
            }
        }
        while let Some(Reverse((_, i, l, r))) = heap.pop() {
            let j = next[i];
            if !alive[i] || j >= n || ids[i] != l || ids[j] != r {
                continue;
            }
            let Some(m) = self.rank(l, r) else { continue };
            ids[i] = m.id;
            alive[j] = false;
            let k = next[j];
            next[i] = k;
            if k < n {
                prev[k] = i;
                if let Some(m2) = self.rank(ids[i], ids[k]) {
                    heap.push(Reverse((m2.rank, i, ids[i], ids[k])));
                }
            }
            let p = prev[i];
            if p != usize::MAX {
                if let Some(m2) = self.rank(ids[p], ids[i]) {
                    heap.push(Reverse((m2.rank, p, ids[p], ids[i])));
                }
            }
        }
        let mut i = 0;
        while i < n {
            out.push(ids[i]);
            i = next[i];
        }
    }

    /// The bytes of `ids` joined; the first unknown id is the error.
    pub fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>, u32> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            out.extend_from_slice(self.decoder.get(&id).ok_or(id)?);
        }
        Ok(out)
    }

    pub fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        self.decoder.get(&id).map(Vec::as_slice)
    }

    /// Number of tokens, special tokens included.
    pub fn vocab_len(&self) -> usize {
        self.decoder.len()
    }

    /// Every token, special tokens included, as `(id, bytes)` in id order.
    pub fn tokens(&self) -> Vec<(u32, &[u8])> {
        let mut tokens: Vec<(u32, &[u8])> = self
            .decoder
            .iter()
            .map(|(&id, b)| (id, b.as_slice()))
            .collect();
        tokens.sort_unstable_by_key(|&(id, _)| id);
        tokens
    }

    /// The merges as `(left id, right id)` in rank order (a pair given twice to
    /// [`Encoder::new`] appears once, at its first rank).
    pub fn merge_pairs(&self) -> Vec<(u32, u32)> {
        let mut pairs: Vec<(u32, (u32, u32))> =
            self.merges.iter().map(|(&p, m)| (m.rank, p)).collect();
        pairs.sort_unstable_by_key(|&(rank, _)| rank);
        pairs.into_iter().map(|(_, p)| p).collect()
    }

    /// Number of distinct merges.
    pub fn merge_count(&self) -> usize {
        self.merges.len()
    }
}

/// True when every merge ranks after every merge that produced one of its parts (see
/// `Encoder::ranks_grow`).
fn ranks_grow(merges: &FxHashMap<(u32, u32), Merge>) -> bool {
    // The latest rank that makes each id (u32::MAX: none), in a table indexed by id
    // when ids are dense (they nearly always are), else in a map.
    let max_id = merges.values().map(|m| m.id).max().unwrap_or(0) as usize;
    if max_id <= 4 * merges.len() + 1024 {
        let mut made_at = vec![u32::MAX; max_id + 1];
        for m in merges.values() {
            let at = &mut made_at[m.id as usize];
            *at = if *at == u32::MAX {
                m.rank
            } else {
                (*at).max(m.rank)
            };
        }
        let made = |id: u32| made_at.get(id as usize).copied().unwrap_or(u32::MAX);
        return merges.iter().all(|(&(l, r), m)| {
            (made(l) == u32::MAX || made(l) < m.rank) && (made(r) == u32::MAX || made(r) < m.rank)
        });
    }
    let mut made_at: FxHashMap<u32, u32> = FxHashMap::default();
    for m in merges.values() {
        let r = made_at.entry(m.id).or_insert(m.rank);
        *r = (*r).max(m.rank);
    }
    merges.iter().all(|(&(l, r), m)| {
        made_at.get(&l).is_none_or(|&at| at < m.rank)
            && made_at.get(&r).is_none_or(|&at| at < m.rank)
    })
}

/// Bytes of look-ahead a streamed unit needs before it is final (see
/// [`Encoder::encode_prefix`]): a few UTF-8 characters' worth, with room to spare.
pub const STREAM_MARGIN: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pretokenize::GPT2_PATTERN;

    fn minbpe_encoder(pattern: Option<&str>) -> Encoder {
        // merges of "aaabdaaabac": (a,a)=256, (256,a)=257, (257,b)=258
        let mut vocab: FxHashMap<u32, Vec<u8>> = (0..256u32).map(|b| (b, vec![b as u8])).collect();
        vocab.insert(256, b"aa".to_vec());
        vocab.insert(257, b"aaa".to_vec());
        vocab.insert(258, b"aaab".to_vec());
        let merges = [(97, 97, 256), (256, 97, 257), (257, 98, 258)];
        let mut specials = FxHashMap::default();
        specials.insert("<|e|>".to_string(), 259);
        Encoder::new(vocab, &merges, specials, pattern).unwrap()
    }

    #[test]
    fn encodes_the_minbpe_example() {
        let e = minbpe_encoder(None);
        assert_eq!(
            e.encode("aaabdaaabac", e.no_specials()).unwrap(),
            vec![258, 100, 258, 97, 99]
        );
    }

    #[test]
    fn long_pieces_merge_like_short_ones() {
        let e = minbpe_encoder(None);
        let text = "aaab".repeat(40) + "aaaaaaa";
        let mut heap = Vec::new();
        e.merge_long(text.as_bytes(), &mut heap);
        let mut by_rank = Vec::new();
        e.merge_by_rank(text.as_bytes(), &mut by_rank);
        assert_eq!(heap, by_rank);
        assert_eq!(e.decode_bytes(&heap).unwrap(), text.as_bytes());
        let (mut short, mut long) = (Vec::new(), Vec::new());
        e.merge_short(&text.as_bytes()[..64], &mut short);
        e.merge_long(&text.as_bytes()[..64], &mut long);
        assert_eq!(short, long);
    }

    /// A random merge table over the bytes a, b, c: each merge joins two tokens that
    /// already exist, so ranks grow along merges.
    fn random_encoder(seed: u64, merges: usize) -> Encoder {
        let mut rng = XorShift(seed);
        let mut vocab: FxHashMap<u32, Vec<u8>> = (0..256u32).map(|b| (b, vec![b as u8])).collect();
        let mut known: Vec<u32> = vec![97, 98, 99];
        let mut table = Vec::new();
        let mut seen = std::collections::HashSet::new();
        while table.len() < merges {
            let l = known[rng.below(known.len())];
            let r = known[rng.below(known.len())];
            if !seen.insert((l, r)) {
                continue;
            }
            let id = 256 + table.len() as u32;
            let bytes = [vocab[&l].clone(), vocab[&r].clone()].concat();
            vocab.insert(id, bytes);
            table.push((l, r, id));
            known.push(id);
        }
        Encoder::new(vocab, &table, FxHashMap::default(), None).unwrap()
    }

    struct XorShift(u64);
    impl XorShift {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    #[test]
    fn all_three_merge_loops_agree() {
        for seed in 1..40u64 {
            let e = random_encoder(seed * 7919, 10 + seed as usize * 3);
            assert!(e.ranks_grow);
            let mut rng = XorShift(seed);
            for len in [2, 3, 7, 30, 64, 65, 200, 1000] {
                let piece: Vec<u8> = (0..len).map(|_| b"abc"[rng.below(3)]).collect();
                let mut heap = Vec::new();
                e.merge_long(&piece, &mut heap);
                let mut by_rank = Vec::new();
                e.merge_by_rank(&piece, &mut by_rank);
                assert_eq!(
                    heap,
                    by_rank,
                    "seed {seed}, piece {:?}",
                    String::from_utf8_lossy(&piece)
                );
                if len <= SHORT_PIECE {
                    let mut short = Vec::new();
                    e.merge_short(&piece, &mut short);
                    assert_eq!(
                        heap,
                        short,
                        "seed {seed}, piece {:?}",
                        String::from_utf8_lossy(&piece)
                    );
                }
                assert_eq!(e.decode_bytes(&heap).unwrap(), piece);
            }
        }
    }

    #[test]
    fn ranks_that_do_not_grow_are_detected() {
        // (a,b) -> 256 ranks after (256,c) -> 257, which uses it: not a BPE order.
        let mut vocab: FxHashMap<u32, Vec<u8>> = (0..256u32).map(|b| (b, vec![b as u8])).collect();
        vocab.insert(256, b"ab".to_vec());
        vocab.insert(257, b"abc".to_vec());
        let e = Encoder::new(
            vocab,
            &[(256, 99, 257), (97, 98, 256)],
            FxHashMap::default(),
            None,
        )
        .unwrap();
        assert!(!e.ranks_grow);
        assert!(minbpe_encoder(None).ranks_grow);
        // The heap still merges it: (a,b) first (the only pair), then (ab, c).
        let text = "abc".repeat(30);
        assert_eq!(e.encode(&text, e.no_specials()).unwrap(), vec![257; 30]);
    }

    /// BPE of each piece, no cache at all: what cached encoding must equal.
    fn uncached(e: &Encoder, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        for_each_unit(text, e.no_specials(), &e.pre, |u| {
            if let Unit::Piece { start, end } = u {
                e.encode_piece(&text.as_bytes()[start..end], &mut out);
            }
        })
        .unwrap();
        out
    }

    #[test]
    fn a_warm_cache_gives_the_same_ids() {
        let e = random_encoder(12345, 60);
        let e = Encoder {
            pre: PreTokenizer::new(Some(GPT2_PATTERN)).unwrap(),
            ..e
        };
        let mut rng = XorShift(99);
        let mut cache = PieceCache::default();
        for _ in 0..20 {
            let len = rng.below(3000);
            let text: String = (0..len)
                .map(|_| ['a', 'b', 'c', ' ', '\n'][rng.below(5)])
                .collect();
            let want = uncached(&e, &text);
            // `encode` takes the pool's cache, warm from the texts before.
            assert_eq!(e.encode(&text, e.no_specials()).unwrap(), want);
            assert_eq!(
                e.encode_cached(&text, e.no_specials(), &mut cache).unwrap(),
                want
            );
            assert_eq!(e.count(&text, e.no_specials()).unwrap(), want.len());
        }
        assert!(!cache.small.is_empty());
        // A cache that keeps starting over gives the same ids.
        let mut tiny = PieceCache {
            max_ids: 5,
            ..PieceCache::default()
        };
        let text = "abc cab bca ".repeat(50) + &"ab ca bc cc aa ".repeat(50);
        let want = e.encode(&text, e.no_specials()).unwrap();
        assert_eq!(
            e.encode_cached(&text, e.no_specials(), &mut tiny).unwrap(),
            want
        );
        assert!(tiny.stored.len() <= 5 + SHORT_PIECE);
    }

    #[test]
    fn calls_share_warm_caches_from_the_pool_but_not_huge_ones() {
        let e = random_encoder(777, 40);
        let e = Encoder {
            pre: PreTokenizer::new(Some(GPT2_PATTERN)).unwrap(),
            ..e
        };
        let pooled = |e: &Encoder| e.caches.0.lock().unwrap().len();
        assert_eq!(pooled(&e), 0);
        let text = "abc cab bca aab ".repeat(30);
        assert_eq!(
            e.encode(&text, e.no_specials()).unwrap(),
            uncached(&e, &text)
        );
        assert_eq!(pooled(&e), 1);
        let entries = e.with_cache(|c| c.small.len());
        assert!(entries > 0, "the second call got the first call's cache");
        // Two at once get two caches, and both are kept.
        e.with_cache(|_| e.with_cache(|_| ()));
        assert_eq!(pooled(&e), 2);
        // A clone of the encoder starts with no caches.
        assert_eq!(pooled(&e.clone()), 0);
        // A cache too big to be worth keeping is dropped.
        e.with_cache(|c| c.stored.resize((1 << 18) + 1, 0));
        assert_eq!(pooled(&e), 1);
    }

    #[test]
    fn allowed_specials_become_their_id() {
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        assert_eq!(
            e.encode("a<|e|>a", e.all_specials()).unwrap(),
            vec![97, 259, 97]
        );
        // Not allowed: plain text, one id per byte here (no merges apply).
        assert_eq!(
            e.encode("<|e|>", e.no_specials()).unwrap(),
            vec![60, 124, 101, 124, 62]
        );
    }

    #[test]
    fn streaming_prefix_plus_rest_equals_whole() {
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        let text = "aaab aaab  ".repeat(20);
        let (ids, used) = e.encode_prefix(&text, e.all_specials(), false).unwrap();
        assert!(used > 0 && used < text.len());
        let mut all = ids;
        all.extend(e.encode(&text[used..], e.all_specials()).unwrap());
        assert_eq!(all, e.encode(&text, e.all_specials()).unwrap());
    }

    #[test]
    fn unknown_id_is_reported() {
        let e = minbpe_encoder(None);
        assert_eq!(e.decode_bytes(&[97, 9999]), Err(9999));
    }
}
