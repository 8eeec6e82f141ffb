//! The BPE model as data: the vocabulary (id → bytes), the merges (pair → rank and
//! merged id) and the special tokens' ids — what a tokenizer file holds. Encoding
//! pieces with it is `merge.rs`; encoding text is `encoder.rs`.

use rustc_hash::FxHashMap;

use crate::packed::{key_hash, packed_all, PackedMap, MAX_PACKED};

use crate::model::{id_error, MAX_ID};

/// A merge rule: `(left, right)` becomes `id`; lower `rank` merges first.
#[derive(Debug, Clone, Copy)]
pub struct Merge {
    pub rank: u32,
    pub id: u32,
}

#[derive(Debug, Clone)]
pub struct BpeModel {
    pub(super) merges: FxHashMap<(u32, u32), Merge>,
    pub(super) byte_ids: [u32; 256],
    /// (rank, merged id) of the pair of the single bytes `a`, `b` at `a << 8 | b`
    /// (`u32::MAX` for a pair that does not merge): the first pairs of every piece
    /// merged, read from 512 KB without hashing instead of from `merges`, which under
    /// tiktoken's rule holds every split of every token (megabytes).
    pub(super) byte_pairs: Box<[(u32, u32)]>,
    decoder: FxHashMap<u32, Vec<u8>>,
    special_ids: FxHashMap<String, u32>,
    /// Every merge ranks after the merges that made its two parts, so a merge never
    /// creates a pair that should have merged earlier: long pieces can then be merged
    /// one rank at a time ([`BpeModel::merge_by_rank`]). True of every trained
    /// vocabulary; checked, with the heap as the fallback.
    pub(super) ranks_grow: bool,
    /// tiktoken's rule, for a vocabulary of ranks that merges cannot all build; None
    /// for a merges-based model.
    pub(super) whole: Option<Box<WholePieces>>,
}

/// tiktoken's rule for ranks that merges cannot all build (`ranks.rs`): a piece that is
/// a token is that token, and `BpeModel::merges` holds every way of cutting every
/// token in two tokens, keyed to the whole token's rank, which is its id
/// ([`crate::bpe::ranks::all_splits`]). The merges recovered for the tokens merges do
/// build are kept apart: they are the model's merges as far as it has any.
#[derive(Debug, Clone)]
pub struct WholePieces {
    /// Tokens of 2 to 15 bytes by their packed bytes ([`crate::packed`]): the
    /// encoder's cache misses are looked up with the key they already have.
    short: PackedMap<u32>,
    /// Longer tokens.
    ids: FxHashMap<Box<[u8]>, u32>,
    recovered: Vec<(u32, u32)>,
    unbuildable: Vec<u32>,
}

impl WholePieces {
    /// `tokens`: (id, bytes) of the ordinary tokens (single bytes are skipped).
    fn new<'a>(
        tokens: impl Iterator<Item = (u32, &'a [u8])>,
        recovered: Vec<(u32, u32)>,
        unbuildable: Vec<u32>,
    ) -> Self {
        let mut short = PackedMap::default();
        let mut ids = FxHashMap::default();
        for (id, t) in tokens {
            if t.len() > MAX_PACKED {
                ids.insert(t.into(), id);
            } else if t.len() > 1 {
                let key = packed_all(t);
                short.insert(key, key_hash(key), id);
            }
        }
        Self {
            short,
            ids,
            recovered,
            unbuildable,
        }
    }
}

impl BpeModel {
    /// `vocab`: id → bytes (must contain every single byte); `merges`: (left id,
    /// right id, merged id) in rank order; `specials`: token → id. Every id must be
    /// at most [`MAX_ID`] (an error names the largest one past it).
    pub fn new(
        vocab: FxHashMap<u32, Vec<u8>>,
        merges: &[(u32, u32, u32)],
        specials: FxHashMap<String, u32>,
    ) -> Result<Self, String> {
        check_ids(&vocab, merges, &specials)?;
        let mut merge_map = FxHashMap::default();
        for (rank, &(l, r, id)) in merges.iter().enumerate() {
            merge_map.entry((l, r)).or_insert(Merge {
                rank: rank as u32,
                id,
            });
        }
        Self::build(vocab, merge_map, specials, None)
    }

    /// A model that encodes as tiktoken does (see [`WholePieces`]): `vocab` holds the
    /// ordinary tokens, each id its rank; `splits` are `(left, right, token)` ids,
    /// every cut of every token in two tokens; `recovered` the merges `(left, right,
    /// token)` of the tokens merges build, in rank order; `unbuildable` the ids of the
    /// others.
    pub fn from_ranks(
        vocab: FxHashMap<u32, Vec<u8>>,
        splits: &[(u32, u32, u32)],
        recovered: &[(u32, u32, u32)],
        unbuildable: Vec<u32>,
        specials: FxHashMap<String, u32>,
    ) -> Result<Self, String> {
        check_ids(&vocab, splits, &specials)?;
        // Every split of one token has the token's rank: ties go to the leftmost pair,
        // as in tiktoken.
        let merge_map = splits
            .iter()
            .map(|&(l, r, id)| ((l, r), Merge { rank: id, id }))
            .collect();
        let whole = WholePieces::new(
            vocab.iter().map(|(&id, t)| (id, &t[..])),
            recovered.iter().map(|&(l, r, _)| (l, r)).collect(),
            unbuildable,
        );
        Self::build(vocab, merge_map, specials, Some(Box::new(whole)))
    }

    /// The same model, looking a whole piece up before merging: a piece that is a
    /// token is that token, any other is merged as before (Hugging Face's BPE with
    /// `ignore_merges`: Llama 3's `tokenizer.json`). The tiktoken rule's mechanism
    /// ([`WholePieces`]) over this model's own merges.
    pub fn looking_up_whole_pieces(mut self) -> Self {
        if self.whole.is_some() {
            return self;
        }
        let special: rustc_hash::FxHashSet<u32> = self.special_ids.values().copied().collect();
        let tokens = self.decoder.iter().filter(|(id, _)| !special.contains(id));
        let whole = WholePieces::new(
            tokens.map(|(&id, t)| (id, &t[..])),
            self.merge_pairs(),
            Vec::new(),
        );
        self.whole = Some(Box::new(whole));
        self
    }

    /// True when a whole piece that is a token is looked up before merging.
    pub fn looks_up_whole_pieces(&self) -> bool {
        self.whole.is_some()
    }

    fn build(
        vocab: FxHashMap<u32, Vec<u8>>,
        merge_map: FxHashMap<(u32, u32), Merge>,
        specials: FxHashMap<String, u32>,
        whole: Option<Box<WholePieces>>,
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
        // Under tiktoken's rule every split of a token has the token's rank: the
        // by-rank loop, which keeps one pair a rank, is not for it.
        let ranks_grow = whole.is_none() && ranks_grow(&merge_map);
        let byte_pairs = (0..1usize << 16)
            .map(|p| {
                let (a, b) = (byte_ids[p >> 8], byte_ids[p & 0xFF]);
                merge_map
                    .get(&(a, b))
                    .map_or((u32::MAX, 0), |m| (m.rank, m.id))
            })
            .collect();
        let mut decoder = vocab;
        for (t, &id) in &specials {
            decoder.insert(id, t.as_bytes().to_vec());
        }
        Ok(Self {
            merges: merge_map,
            ranks_grow,
            byte_ids,
            byte_pairs,
            decoder,
            special_ids: specials,
            whole,
        })
    }

    /// The id of a whole piece that is a token, under tiktoken's rule (None for a
    /// merges-based model, which makes every token by merges).
    #[inline]
    pub(super) fn whole_piece(&self, piece: &[u8]) -> Option<u32> {
        let whole = self.whole.as_ref()?;
        if piece.len() <= MAX_PACKED {
            let key = packed_all(piece);
            return whole.short.get(key, key_hash(key));
        }
        whole.ids.get(piece).copied()
    }

    /// [`BpeModel::whole_piece`] of a piece of 2 to 15 bytes, by its packed key and
    /// that key's hash.
    #[inline]
    pub(super) fn whole_packed(&self, key: u128, hash: u64) -> Option<u32> {
        self.whole.as_ref()?.short.get(key, hash)
    }

    /// The ids of the tokens no merge of two lower-ranked tokens makes (tiktoken's rule
    /// makes them by looking the whole piece up); empty for a merges-based model.
    pub fn unbuildable(&self) -> &[u32] {
        self.whole.as_ref().map_or(&[], |w| &w.unbuildable)
    }

    /// The largest id of any token (0 for an empty vocabulary).
    pub fn max_id(&self) -> u32 {
        self.decoder.keys().copied().max().unwrap_or(0)
    }

    pub fn special_ids(&self) -> &FxHashMap<String, u32> {
        &self.special_ids
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
    /// [`BpeModel::new`] appears once, at its first rank).
    ///
    /// Under tiktoken's rule, the merges of the tokens merges build ([`Self::unbuildable`]
    /// lists the others).
    pub fn merge_pairs(&self) -> Vec<(u32, u32)> {
        if let Some(w) = &self.whole {
            return w.recovered.clone();
        }
        let mut pairs: Vec<(u32, (u32, u32))> =
            self.merges.iter().map(|(&p, m)| (m.rank, p)).collect();
        pairs.sort_unstable_by_key(|&(rank, _)| rank);
        pairs.into_iter().map(|(_, p)| p).collect()
    }

    /// Number of distinct merges (as [`Self::merge_pairs`] gives them).
    pub fn merge_count(&self) -> usize {
        self.whole
            .as_ref()
            .map_or(self.merges.len(), |w| w.recovered.len())
    }
}

/// Fails naming the largest id past [`MAX_ID`]: a special token's first, then an
/// ordinary token's, then a merge's.
fn check_ids(
    vocab: &FxHashMap<u32, Vec<u8>>,
    merges: &[(u32, u32, u32)],
    specials: &FxHashMap<String, u32>,
) -> Result<(), String> {
    let past = |id: &u32| *id > MAX_ID;
    if let Some((token, id)) = specials
        .iter()
        .filter(|(_, id)| past(id))
        .max_by_key(|(_, &id)| id)
    {
        return Err(id_error(
            &format!("special token '{}'", token.escape_debug()),
            &id.to_string(),
        ));
    }
    if let Some((id, bytes)) = vocab
        .iter()
        .filter(|(id, _)| past(id))
        .max_by_key(|(&id, _)| id)
    {
        // Quoted as Python quotes bytes (b'hi'), as the bindings' messages do.
        let what = format!("token b'{}'", abbreviated(bytes).escape_ascii());
        return Err(id_error(&what, &id.to_string()));
    }
    for (n, &(l, r, id)) in merges.iter().enumerate() {
        if let Some(id) = [l, r, id].into_iter().find(|id| past(id)) {
            return Err(id_error(
                &format!("merge #{n} ({l}, {r}) -> {id}: a token"),
                &id.to_string(),
            ));
        }
    }
    Ok(())
}

/// The first 64 bytes of a token, for messages (a token can be megabytes long).
fn abbreviated(bytes: &[u8]) -> &[u8] {
    &bytes[..bytes.len().min(64)]
}

/// True when every merge ranks after every merge that produced one of its parts (see
/// `BpeModel::ranks_grow`).
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

/// Small models for the tests of this module's files.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// minbpe's example: the merges of "aaabdaaabac", (a,a)=256, (256,a)=257,
    /// (257,b)=258, and the special token `<|e|>` = 259.
    pub fn minbpe() -> BpeModel {
        let (vocab, merges, specials) = minbpe_parts();
        BpeModel::new(vocab, &merges, specials).unwrap()
    }

    pub type Parts = (
        FxHashMap<u32, Vec<u8>>,
        Vec<(u32, u32, u32)>,
        FxHashMap<String, u32>,
    );

    pub fn minbpe_parts() -> Parts {
        let mut vocab: FxHashMap<u32, Vec<u8>> = (0..256u32).map(|b| (b, vec![b as u8])).collect();
        vocab.insert(256, b"aa".to_vec());
        vocab.insert(257, b"aaa".to_vec());
        vocab.insert(258, b"aaab".to_vec());
        let merges = vec![(97, 97, 256), (256, 97, 257), (257, 98, 258)];
        let mut specials = FxHashMap::default();
        specials.insert("<|e|>".to_string(), 259);
        (vocab, merges, specials)
    }

    /// A random merge table over the bytes a, b, c: each merge joins two tokens that
    /// already exist, so ranks grow along merges.
    pub fn random_parts(seed: u64, merges: usize) -> Parts {
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
        (vocab, table, FxHashMap::default())
    }

    pub fn random(seed: u64, merges: usize) -> BpeModel {
        let (vocab, table, specials) = random_parts(seed, merges);
        BpeModel::new(vocab, &table, specials).unwrap()
    }

    pub struct XorShift(pub u64);
    impl XorShift {
        pub fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{minbpe, minbpe_parts};
    use super::*;

    #[test]
    fn an_id_past_the_largest_is_refused_naming_it() {
        let (vocab, merges, mut specials) = minbpe_parts();
        specials.insert("<x>".into(), MAX_ID + 1);
        let e = BpeModel::new(vocab.clone(), &merges, specials).unwrap_err();
        assert_eq!(
            e,
            "special token '<x>' has id 2147483648, outside 0..2147483647: \
             token ids must be at least 0 and below 2**31"
        );
        let mut big = vocab.clone();
        big.insert(u32::MAX, b"hi".to_vec());
        let e = BpeModel::new(big, &merges, FxHashMap::default()).unwrap_err();
        assert!(
            e.starts_with("token b'hi' has id 4294967295, outside"),
            "{e}"
        );
        let e = BpeModel::new(vocab.clone(), &[(97, 97, 1 << 31)], FxHashMap::default());
        assert!(e
            .unwrap_err()
            .starts_with("merge #0 (97, 97) -> 2147483648: a token has id 2147483648"));
        let mut at_max = vocab;
        at_max.insert(MAX_ID, b"hi".to_vec());
        assert_eq!(
            BpeModel::new(at_max, &merges, FxHashMap::default())
                .unwrap()
                .max_id(),
            MAX_ID
        );
    }

    #[test]
    fn looking_up_whole_pieces_finds_tokens_merges_cannot_build() {
        // minbpe's merges (aa, aaa, aaab) and a token "ba" that no merge makes.
        let (mut vocab, merges, specials) = minbpe_parts();
        vocab.insert(300, b"ba".to_vec());
        let plain = BpeModel::new(vocab, &merges, specials).unwrap();
        let whole = plain.clone().looking_up_whole_pieces();
        assert!(!plain.looks_up_whole_pieces() && whole.looks_up_whole_pieces());
        let encode = |m: &BpeModel, piece: &[u8]| {
            let mut out = Vec::new();
            m.encode_piece(piece, &mut out).unwrap();
            out
        };
        assert_eq!(encode(&plain, b"ba"), [98, 97]);
        assert_eq!(encode(&whole, b"ba"), [300]);
        // A piece that is no token merges as before; the merges are the model's own.
        assert_eq!(encode(&whole, b"baaab"), encode(&plain, b"baaab"));
        assert_eq!(encode(&whole, b"baaab"), [98, 258]);
        assert_eq!(whole.merge_pairs(), plain.merge_pairs());
        // A special token's text is never looked up as a piece.
        assert_eq!(encode(&whole, b"<|e|>"), encode(&plain, b"<|e|>"));
    }

    #[test]
    fn unknown_id_is_reported() {
        let m = minbpe();
        assert_eq!(m.decode_bytes(&[97, 9999]), Err(9999));
    }
}
