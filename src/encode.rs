//! Encoding: text → token ids, and ids → bytes.
//!
//! Special tokens the caller allows are matched first (leftmost-longest); the text
//! between them is pre-tokenized, and each piece is merged by rank, lowest first —
//! GPT-2's `bpe()`: repeatedly merge the adjacent pair with the lowest rank (the
//! leftmost one on ties, which is the same as merging every occurrence left to right).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;

use crate::pretokenize::{for_each_unit, PreTokenizer, SpecialMatcher, Unit};

/// A merge rule: `(left, right)` becomes `id`; lower `rank` merges first.
#[derive(Debug, Clone, Copy)]
pub struct Merge {
    pub rank: u32,
    pub id: u32,
}

#[derive(Debug, Clone)]
pub struct Encoder {
    merges: FxHashMap<(u32, u32), Merge>,
    byte_ids: [u32; 256],
    decoder: FxHashMap<u32, Vec<u8>>,
    special_ids: FxHashMap<String, u32>,
    pre: PreTokenizer,
    /// Matcher over all special tokens (for the common "all allowed" case and for
    /// finding disallowed ones).
    all_specials: SpecialMatcher,
    no_specials: SpecialMatcher,
}

/// Pieces up to this many bytes are merged with a plain scan; longer ones with a heap.
const SHORT_PIECE: usize = 64;
/// Texts at least this long keep a cache of their pieces' ids while being encoded.
const CACHE_FROM_BYTES: usize = 4096;
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
        let mut sorted: Vec<(&u32, &Vec<u8>)> = vocab.iter().collect();
        sorted.sort_by_key(|(id, _)| **id);
        for (&id, bytes) in sorted.iter().rev() {
            if bytes.len() == 1 && !specials.values().any(|&s| s == id) {
                byte_ids[bytes[0] as usize] = id;
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
        let mut special_list: Vec<(&String, &u32)> = specials.iter().collect();
        special_list.sort();
        let tokens: Vec<String> = special_list.iter().map(|(t, _)| (*t).clone()).collect();
        let mut decoder = vocab;
        for (t, &id) in &specials {
            decoder.insert(id, t.as_bytes().to_vec());
        }
        Ok(Self {
            merges: merge_map,
            byte_ids,
            decoder,
            all_specials: SpecialMatcher::new(&tokens)?,
            no_specials: SpecialMatcher::new(&[])?,
            special_ids: specials,
            pre: PreTokenizer::new(pattern)?,
        })
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

    pub fn encode_into(
        &self,
        text: &str,
        allowed: &SpecialMatcher,
        out: &mut Vec<u32>,
    ) -> Result<(), String> {
        let bytes = text.as_bytes();
        if text.len() < CACHE_FROM_BYTES {
            return for_each_unit(text, allowed, &self.pre, |u| match u {
                Unit::Piece { start, end } => self.encode_piece(&bytes[start..end], out),
                Unit::Special { index, .. } => out.push(self.special_ids[&allowed.tokens()[index]]),
            });
        }
        // Long texts repeat their pieces (words) a lot: remember each short piece's ids
        // for the rest of the call. Keys borrow from the text; ids sit in one flat vector.
        let mut cache: FxHashMap<&[u8], (u32, u32)> = FxHashMap::default();
        let mut stored: Vec<u32> = Vec::new();
        for_each_unit(text, allowed, &self.pre, |u| match u {
            Unit::Piece { start, end } => {
                let piece = &bytes[start..end];
                if piece.len() == 1 || piece.len() > CACHE_PIECE_BYTES {
                    return self.encode_piece(piece, out);
                }
                if let Some(&(at, n)) = cache.get(piece) {
                    out.extend_from_slice(&stored[at as usize..(at + n) as usize]);
                    return;
                }
                let before = out.len();
                self.encode_piece(piece, out);
                let at = stored.len() as u32;
                stored.extend_from_slice(&out[before..]);
                cache.insert(piece, (at, (out.len() - before) as u32));
            }
            Unit::Special { index, .. } => out.push(self.special_ids[&allowed.tokens()[index]]),
        })
    }

    /// The number of tokens `text` encodes to, without keeping them.
    pub fn count(&self, text: &str, allowed: &SpecialMatcher) -> Result<usize, String> {
        let bytes = text.as_bytes();
        let mut n = 0;
        let mut scratch = Vec::new();
        for_each_unit(text, allowed, &self.pre, |u| match u {
            Unit::Piece { start, end } => {
                scratch.clear();
                self.encode_piece(&bytes[start..end], &mut scratch);
                n += scratch.len();
            }
            Unit::Special { .. } => n += 1,
        })?;
        Ok(n)
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
            _ => self.merge_long(piece, out),
        }
    }

    fn rank(&self, l: u32, r: u32) -> Option<Merge> {
        self.merges.get(&(l, r)).copied()
    }

    /// O(n²) scan: find the lowest-rank pair, merge it, repeat. Fast for short pieces.
    fn merge_short(&self, piece: &[u8], out: &mut Vec<u32>) {
        let mut ids: Vec<u32> = piece.iter().map(|&b| self.byte_ids[b as usize]).collect();
        loop {
            let mut best: Option<(u32, usize, u32)> = None;
            for i in 0..ids.len() - 1 {
                if let Some(m) = self.rank(ids[i], ids[i + 1]) {
                    if best.is_none_or(|(r, _, _)| m.rank < r) {
                        best = Some((m.rank, i, m.id));
                    }
                }
            }
            let Some((_, i, id)) = best else { break };
            ids[i] = id;
            ids.remove(i + 1);
            if ids.len() == 1 {
                break;
            }
        }
        out.extend_from_slice(&ids);
    }

    /// O(n log n): symbols in a linked list, candidate pairs in a min-heap keyed by
    /// (rank, position); stale entries are skipped when popped.
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
        let mut short = Vec::new();
        e.merge_short(text.as_bytes(), &mut short);
        let mut long = Vec::new();
        e.merge_long(text.as_bytes(), &mut long);
        assert_eq!(short, long);
        assert_eq!(e.decode_bytes(&long).unwrap(), text.as_bytes());
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
