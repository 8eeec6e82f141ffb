//! The BPE encoder: text → token ids, with the model, its pre-tokenizer and its piece
//! caches together.
//!
//! Special tokens the caller allows are matched first (leftmost-longest); the text
//! between them is pre-tokenized, and each piece is merged by rank (`merge.rs`).
//! Pieces seen before come from the piece cache (`cache.rs`). This is the hot path of
//! encoding: no allocation per piece, one hash lookup per cached piece.

use rustc_hash::FxHashMap;

use super::cache::{CachePool, PieceCache};
use super::merge::SHORT_PIECE;
use super::model::BpeModel;
use crate::model::{EncodeError, Model, SafeCuts};
use crate::packed::{packed, MAX_PACKED};
use crate::pretok::{for_each_unit, PreTokenizer, SpecialMatcher, Unit};

/// Longest piece worth caching.
const CACHE_PIECE_BYTES: usize = 32;

#[derive(Debug, Clone)]
pub struct Encoder {
    model: BpeModel,
    pre: PreTokenizer,
    /// Piece caches of earlier calls, warm, for later ones to take.
    caches: CachePool,
    /// Matcher over all special tokens (for the common "all allowed" case).
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

impl Encoder {
    /// `vocab`: id → bytes (must contain every single byte); `merges`: (left id,
    /// right id, merged id) in rank order; `specials`: token → id.
    pub fn new(
        vocab: FxHashMap<u32, Vec<u8>>,
        merges: &[(u32, u32, u32)],
        specials: FxHashMap<String, u32>,
        pattern: Option<&str>,
    ) -> Result<Self, String> {
        let mut tokens: Vec<String> = specials.keys().cloned().collect();
        tokens.sort();
        Ok(Self {
            all_specials: SpecialMatcher::new(&tokens)?,
            no_specials: SpecialMatcher::new(&[])?,
            model: BpeModel::new(vocab, merges, specials)?,
            pre: PreTokenizer::new(pattern)?,
            caches: CachePool::default(),
        })
    }

    /// The vocabulary, merges and special ids.
    pub fn model(&self) -> &BpeModel {
        &self.model
    }

    pub fn all_specials(&self) -> &SpecialMatcher {
        &self.all_specials
    }

    pub fn no_specials(&self) -> &SpecialMatcher {
        &self.no_specials
    }

    /// Encodes `text`, treating the tokens of `allowed` as special.
    pub fn encode(&self, text: &str, allowed: &SpecialMatcher) -> Result<Vec<u32>, EncodeError> {
        let mut out = Vec::with_capacity(text.len() / 3);
        self.with_cache(|cache| self.encode_cached(text, allowed, cache, &mut out))?;
        Ok(out)
    }

    /// The number of tokens `text` encodes to, without keeping them.
    pub fn count(&self, text: &str, allowed: &SpecialMatcher) -> Result<usize, EncodeError> {
        self.with_cache(|cache| self.count_cached(text, allowed, cache))
    }

    /// Calls `emit(end, ids)` with the ids of each unit of `text` (a piece or a special
    /// token) and where the unit ends, in order.
    #[inline]
    fn for_each_ids(
        &self,
        text: &str,
        allowed: &SpecialMatcher,
        cache: &mut PieceCache,
        mut emit: impl FnMut(usize, &[u32]),
    ) -> Result<(), EncodeError> {
        let bytes = text.as_bytes();
        let mut scratch = Vec::with_capacity(SHORT_PIECE);
        let special = |index: usize| self.model.special_ids()[&allowed.tokens()[index]];
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
                    return emit(end, &[self.model.byte_id(piece[0])]);
                }
                if piece.len() > CACHE_PIECE_BYTES {
                    scratch.clear();
                    self.model.encode_piece(piece, &mut scratch);
                    return emit(end, &scratch);
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
                        0 => emit(end, &[at]), // one token: its id is the entry
                        _ => emit(end, &stored[at as usize..(at + n) as usize]),
                    };
                }
                if stored.len() > *max_ids {
                    // Bounded memory on text that hardly repeats (random strings).
                    small.clear();
                    long.clear();
                    stored.clear();
                }
                let at = stored.len();
                self.model.encode_piece(piece, stored);
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
                    (id, 0) => emit(end, &[id]),
                    _ => emit(end, &stored[at..]),
                }
            }
            Unit::Special { index, end, .. } => emit(end, &[special(index)]),
        })?;
        Ok(())
    }
}

impl Model for Encoder {
    type Cache = PieceCache;

    fn take_cache(&self) -> PieceCache {
        self.caches.take()
    }

    fn give_back_cache(&self, cache: PieceCache) {
        self.caches.give_back(cache)
    }

    fn safe_cuts(&self) -> SafeCuts {
        SafeCuts::AtSpecials {
            newlines: self.pre.newline_cuts_are_safe(),
        }
    }

    fn count_cached(
        &self,
        text: &str,
        specials: &SpecialMatcher,
        cache: &mut PieceCache,
    ) -> Result<usize, EncodeError> {
        let mut n = 0;
        self.for_each_ids(text, specials, cache, |_, ids| n += ids.len())?;
        Ok(n)
    }

    fn encode_cached(
        &self,
        text: &str,
        specials: &SpecialMatcher,
        cache: &mut PieceCache,
        out: &mut Vec<u32>,
    ) -> Result<(), EncodeError> {
        self.for_each_ids(text, specials, cache, |_, ids| push_ids(out, ids))
    }

    fn encode_until(
        &self,
        text: &str,
        specials: &SpecialMatcher,
        limit: usize,
        cache: &mut PieceCache,
        out: &mut Vec<u32>,
    ) -> Result<usize, EncodeError> {
        let mut consumed = 0;
        self.for_each_ids(text, specials, cache, |end, ids| {
            if end <= limit {
                push_ids(out, ids);
                consumed = end;
            }
        })?;
        Ok(consumed)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::bpe::model::testing::{minbpe_parts, random_parts, XorShift};
    use crate::pretok::GPT2_PATTERN;

    pub fn minbpe_encoder(pattern: Option<&str>) -> Encoder {
        let (vocab, merges, specials) = minbpe_parts();
        Encoder::new(vocab, &merges, specials, pattern).unwrap()
    }

    fn random_encoder(seed: u64, merges: usize, pattern: Option<&str>) -> Encoder {
        let (vocab, table, specials) = random_parts(seed, merges);
        Encoder::new(vocab, &table, specials, pattern).unwrap()
    }

    #[test]
    fn encodes_the_minbpe_example() {
        let e = minbpe_encoder(None);
        assert_eq!(
            e.encode("aaabdaaabac", e.no_specials()).unwrap(),
            vec![258, 100, 258, 97, 99]
        );
    }

    /// BPE of each piece, no cache at all: what cached encoding must equal.
    fn uncached(e: &Encoder, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        for_each_unit(text, e.no_specials(), &e.pre, |u| {
            if let Unit::Piece { start, end } = u {
                e.model.encode_piece(&text.as_bytes()[start..end], &mut out);
            }
        })
        .unwrap();
        out
    }

    fn encode_with(e: &Encoder, text: &str, cache: &mut PieceCache) -> Vec<u32> {
        let mut out = Vec::new();
        e.encode_cached(text, e.no_specials(), cache, &mut out)
            .unwrap();
        out
    }

    #[test]
    fn a_warm_cache_gives_the_same_ids() {
        let e = random_encoder(12345, 60, Some(GPT2_PATTERN));
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
            assert_eq!(encode_with(&e, &text, &mut cache), want);
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
        assert_eq!(encode_with(&e, &text, &mut tiny), want);
        assert!(tiny.stored.len() <= 5 + SHORT_PIECE);
    }

    #[test]
    fn calls_share_warm_caches_from_the_pool_but_not_huge_ones() {
        let e = random_encoder(777, 40, Some(GPT2_PATTERN));
        let pooled = |e: &Encoder| e.caches.len();
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
}
