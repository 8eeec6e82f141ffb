//! The merge loops: BPE on one pre-token, exactly GPT-2's `bpe()`: repeatedly merge
//! the adjacent pair with the lowest rank (the leftmost one on ties, which is the same
//! as merging every occurrence left to right).
//!
//! Three loops give the same ids at different costs: a scan on the stack for short
//! pieces (nearly all), a heap for longer ones, and one rank at a time for pieces past
//! 64 KiB when ranks grow along merges (every trained vocabulary; the heap
//! for any other merge table).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;

use super::model::{BpeModel, Merge};
use crate::model::{check_piece_len, try_reserve, EncodeError};

/// Pieces up to this many bytes are merged with a plain scan; longer ones otherwise.
pub const SHORT_PIECE: usize = 64;

/// Slots [`BpeModel::merge_short`] moves at a time.
const SHIFT: usize = 8;

/// Pieces of up to this many bytes are merged in arrays of their own size class.
const FEW_BYTES: usize = 16;

/// Pieces longer than this are merged one rank at a time when ranks grow along merges
/// ([`BpeModel::merge_by_rank`]: linear, and about 10 bytes of memory a byte); shorter
/// ones (a long word, a line of Thai or Chinese) with the heap, [`BpeModel::merge_long`],
/// which costs less a merge (it keeps no map of ranks) but more memory: 20 bytes a
/// byte, and 8 for each heap entry (up to three a byte).
const BY_RANK_PIECE: usize = 64 << 10;

impl BpeModel {
    /// BPE on one pre-token (under tiktoken's rule, a piece that is a token first).
    /// Fails only for a piece longer than [`crate::model::MAX_PIECE_BYTES`] or when
    /// memory for it cannot be had.
    pub fn encode_piece(&self, piece: &[u8], out: &mut Vec<u32>) -> Result<(), EncodeError> {
        if let Some(id) = self.whole_piece(piece) {
            out.push(id);
            return Ok(());
        }
        self.merge_piece(piece, out)
    }

    /// [`BpeModel::encode_piece`] of a piece already looked up whole and found to be
    /// no token (or of a model without tiktoken's rule): the merges alone.
    pub(crate) fn merge_piece(&self, piece: &[u8], out: &mut Vec<u32>) -> Result<(), EncodeError> {
        match piece.len() {
            0 => {}
            1 => out.push(self.byte_id(piece[0])),
            n if n <= SHORT_PIECE => self.merge_short(piece, out),
            n if self.ranks_grow && n > BY_RANK_PIECE => self.merge_by_rank(piece, out)?,
            _ => self.merge_long(piece, out)?,
        }
        Ok(())
    }

    /// The id of a single byte.
    #[inline]
    pub fn byte_id(&self, b: u8) -> u32 {
        self.byte_ids[b as usize]
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
    pub(crate) fn merge_short(&self, piece: &[u8], out: &mut Vec<u32>) {
        debug_assert!((2..=SHORT_PIECE).contains(&piece.len()));
        // Most pieces merged are short: filling arrays for 64 bytes was a twentieth of
        // their instructions (gpt2 on English: 1,003 -> 956 a merged piece).
        if piece.len() <= FEW_BYTES {
            self.merge_short_in::<{ FEW_BYTES + SHIFT }>(piece, out);
        } else {
            self.merge_short_in::<{ SHORT_PIECE + SHIFT }>(piece, out);
        }
    }

    /// [`BpeModel::merge_short`] in arrays of `N` slots: the piece's and, past them,
    /// [`SHIFT`] more, so that a merge's shift of what follows it moves whole blocks
    /// of SHIFT (see below).
    #[inline(always)]
    fn merge_short_in<const N: usize>(&self, piece: &[u8], out: &mut Vec<u32>) {
        let mut len = piece.len();
        debug_assert!(len + SHIFT <= N);
        let mut ids = [0u32; N];
        for (id, &b) in ids.iter_mut().zip(piece) {
            *id = self.byte_ids[b as usize];
        }
        // pairs[i]: the pair ids[i], ids[i + 1]; at first, of two single bytes.
        let mut pairs = [(u32::MAX, 0u32); N];
        for (pair, two) in pairs.iter_mut().zip(piece.windows(2)) {
            *pair = self.byte_pairs[(two[0] as usize) << 8 | two[1] as usize];
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
            // What follows the merged pair moves back one slot, in blocks of SHIFT
            // (a block read whole before it is written: no overlap within it, and
            // the next block starts past the slots it wrote). A copy of a length
            // known only here was a call to memmove for each array: a seventh of a
            // merged piece's instructions (gpt2 on English: 1,169 -> 1,003). Slots
            // past the piece get what followed them, never read.
            let mut from = best + 2;
            while from < len {
                let block: [u32; SHIFT] = ids[from..from + SHIFT].try_into().unwrap();
                ids[from - 1..from - 1 + SHIFT].copy_from_slice(&block);
                let block: [(u32, u32); SHIFT] = pairs[from..from + SHIFT].try_into().unwrap();
                pairs[from - 1..from - 1 + SHIFT].copy_from_slice(&block);
                from += SHIFT;
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
    /// Each rank that occurs gets a bucket of positions.
    ///
    /// Memory, about 10 bytes per byte of the piece (a 1 GB run of one letter is one
    /// piece): one id per byte position (`ids[i]`: the token starting at byte `i`,
    /// `NONE` inside a token) and the buckets' positions. No links between tokens: the
    /// token after the one at `i` starts its length later (lengths come from the
    /// vocabulary, and a merge's token must be as long as its two parts — else the
    /// heap, which does not assume it, merges the piece), and the one before is found
    /// by stepping back over `NONE`s, at most the length of a token.
    pub(crate) fn merge_by_rank(
        &self,
        piece: &[u8],
        out: &mut Vec<u32>,
    ) -> Result<(), EncodeError> {
        const NONE: u32 = u32::MAX;
        struct Bucket {
            left: u32,
            right: u32,
            id: u32,
            /// Bytes of `left` and of the merged token.
            left_len: u32,
            len: u32,
            at: Vec<u32>,
        }
        /// Adds position `at` of the pair `(l, r)` to its rank's bucket; None when the
        /// merged token is not as long as its parts (the caller falls back to the heap).
        fn add(
            model: &BpeModel,
            buckets: &mut FxHashMap<u32, Bucket>,
            queue: &mut BinaryHeap<Reverse<u32>>,
            (l, r): (u32, u32),
            m: Merge,
            at: u32,
        ) -> Result<Option<()>, EncodeError> {
            let bucket = match buckets.entry(m.rank) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    let len = |id| model.token_bytes(id).map(|b| b.len() as u32);
                    let (Some(left_len), Some(right_len), Some(len)) = (len(l), len(r), len(m.id))
                    else {
                        return Ok(None);
                    };
                    if left_len + right_len != len || m.id == NONE {
                        return Ok(None);
                    }
                    queue.push(Reverse(m.rank));
                    e.insert(Bucket {
                        left: l,
                        right: r,
                        id: m.id,
                        left_len,
                        len,
                        at: Vec::new(),
                    })
                }
            };
            if bucket.at.len() == bucket.at.capacity() {
                let more = bucket.at.len().max(16);
                try_reserve(&mut bucket.at, more)?;
            }
            bucket.at.push(at);
            Ok(Some(()))
        }
        let n = piece.len();
        check_piece_len(n)?;
        let mut ids: Vec<u32> = Vec::new();
        try_reserve(&mut ids, n)?;
        ids.extend(piece.iter().map(|&b| self.byte_ids[b as usize]));
        let mut buckets: FxHashMap<u32, Bucket> = FxHashMap::default();
        let mut queue = BinaryHeap::new();
        for i in 0..n - 1 {
            if let Some(m) = self.rank(ids[i], ids[i + 1]) {
                let pair = (ids[i], ids[i + 1]);
                if add(self, &mut buckets, &mut queue, pair, m, i as u32)?.is_none() {
                    return self.merge_long(piece, out);
                }
            }
        }
        while let Some(Reverse(rank)) = queue.pop() {
            let mut b = buckets
                .remove(&rank)
                .expect("every queued rank has a bucket");
            b.at.sort_unstable();
            let mut x = 0;
            while x < b.at.len() {
                let i = b.at[x] as usize;
                x += 1;
                let j = i + b.left_len as usize;
                // Stale: a merge since this entry was made changed the pair.
                if ids[i] != b.left || j >= n || ids[j] != b.right {
                    continue;
                }
                ids[i] = b.id;
                ids[j] = NONE;
                let k = i + b.len as usize;
                // The token after: its pair with this one is added, unless that token
                // is itself merged by this rank further on — that merge adds the pair
                // (both tokens as they will be) from its own side.
                let merged_next = b.at[x..]
                    .iter()
                    .find(|&&a| a as usize >= k)
                    .is_some_and(|&a| {
                        a as usize == k
                            && ids[k] == b.left
                            && k + (b.left_len as usize) < n
                            && ids[k + b.left_len as usize] == b.right
                            && b.id != b.left
                            && b.id != b.right
                    });
                if k < n && !merged_next {
                    let pair = (ids[i], ids[k]);
                    if let Some(m) = self.rank(pair.0, pair.1) {
                        debug_assert!(m.rank > rank);
                        if add(self, &mut buckets, &mut queue, pair, m, i as u32)?.is_none() {
                            return self.merge_long(piece, out);
                        }
                    }
                }
                if let Some(p) = ids[..i].iter().rposition(|&id| id != NONE) {
                    let pair = (ids[p], ids[i]);
                    if let Some(m) = self.rank(pair.0, pair.1) {
                        debug_assert!(m.rank > rank);
                        if add(self, &mut buckets, &mut queue, pair, m, p as u32)?.is_none() {
                            return self.merge_long(piece, out);
                        }
                    }
                }
            }
        }
        let count = ids.iter().filter(|&&id| id != NONE).count();
        try_reserve(out, count)?;
        out.extend(ids.iter().copied().filter(|&id| id != NONE));
        Ok(())
    }

    /// O(n log n), for any merge table: tokens in a linked list, candidate pairs in a
    /// min-heap of `rank << 32 | position` (the lowest rank, then the leftmost pair, as
    /// BPE merges). Each position keeps the rank and merged token of the pair starting
    /// there now, so an entry whose rank is not its position's any more is stale and
    /// skipped when popped. An entry of the same rank as its position's current pair
    /// (under tiktoken's rule, another split of the same token) merges that pair, which
    /// is the lowest: merging it is what BPE does. Two allocations a piece: the five
    /// arrays of `u32` in one, the heap in the other.
    pub(crate) fn merge_long(&self, piece: &[u8], out: &mut Vec<u32>) -> Result<(), EncodeError> {
        const NONE: u32 = u32::MAX;
        let n = piece.len();
        check_piece_len(n)?;
        debug_assert!(n >= 2);
        let mut lanes: Vec<u32> = Vec::new();
        try_reserve(&mut lanes, 5 * n)?;
        lanes.resize(5 * n, 0);
        let (ids, rest) = lanes.split_at_mut(n);
        let (next, rest) = rest.split_at_mut(n);
        let (prev, rest) = rest.split_at_mut(n);
        // The pair starting at each position: its rank (NONE when it does not merge,
        // or the position holds no token or the last one) and the token it makes.
        let (ranks, makes) = rest.split_at_mut(n);
        let mut heap: Vec<Reverse<u64>> = Vec::new();
        try_reserve(&mut heap, n)?;
        for (i, &b) in piece.iter().enumerate() {
            ids[i] = self.byte_ids[b as usize];
            next[i] = i as u32 + 1;
            prev[i] = (i as u32).wrapping_sub(1);
        }
        ranks[n - 1] = NONE;
        for (i, two) in piece.windows(2).enumerate() {
            let (rank, id) = self.byte_pairs[(two[0] as usize) << 8 | two[1] as usize];
            ranks[i] = rank;
            makes[i] = id;
            if rank != NONE {
                heap.push(Reverse(u64::from(rank) << 32 | i as u64));
            }
        }
        let mut heap = BinaryHeap::from(heap);
        let push = |heap: &mut BinaryHeap<Reverse<u64>>, rank: u32, at: u32| {
            if heap.len() == heap.capacity() {
                heap.try_reserve(heap.len())
                    .map_err(|_| EncodeError::OutOfMemory {
                        bytes: heap.len() * 8,
                    })?;
            }
            heap.push(Reverse(u64::from(rank) << 32 | u64::from(at)));
            Ok::<(), EncodeError>(())
        };
        while let Some(Reverse(top)) = heap.pop() {
            let (rank, i) = ((top >> 32) as u32, top as u32 as usize);
            if ranks[i] != rank {
                continue;
            }
            // A pair that merges starts at a token with a token after it.
            let gone = next[i] as usize;
            let after = next[gone];
            ids[i] = makes[i];
            ranks[gone] = NONE;
            next[i] = after;
            ranks[i] = NONE;
            if (after as usize) < n {
                prev[after as usize] = i as u32;
                let (rank, id) = self.pair(ids[i], ids[after as usize]);
                (ranks[i], makes[i]) = (rank, id);
                if rank != NONE {
                    push(&mut heap, rank, i as u32)?;
                }
            }
            let before = prev[i];
            if before != NONE {
                let b = before as usize;
                let (rank, id) = self.pair(ids[b], ids[i]);
                (ranks[b], makes[b]) = (rank, id);
                if rank != NONE {
                    push(&mut heap, rank, before)?;
                }
            }
        }
        let mut i = 0;
        while i < n {
            out.push(ids[i]);
            i = next[i] as usize;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpe::model::testing::{minbpe, random, XorShift};

    #[test]
    fn long_pieces_merge_like_short_ones() {
        let e = minbpe();
        let text = "aaab".repeat(40) + "aaaaaaa";
        let mut heap = Vec::new();
        e.merge_long(text.as_bytes(), &mut heap).unwrap();
        let mut by_rank = Vec::new();
        e.merge_by_rank(text.as_bytes(), &mut by_rank).unwrap();
        assert_eq!(heap, by_rank);
        assert_eq!(e.decode_bytes(&heap).unwrap(), text.as_bytes());
        let (mut short, mut long) = (Vec::new(), Vec::new());
        e.merge_short(&text.as_bytes()[..64], &mut short);
        e.merge_long(&text.as_bytes()[..64], &mut long).unwrap();
        assert_eq!(short, long);
    }

    #[test]
    fn all_three_merge_loops_agree() {
        for seed in 1..40u64 {
            let e = random(seed * 7919, 10 + seed as usize * 3);
            assert!(e.ranks_grow);
            let mut rng = XorShift(seed);
            // 16 and 17: either side of merge_short's two sizes of arrays.
            for len in [2, 3, 7, 16, 17, 30, 64, 65, 200, 1000] {
                let piece: Vec<u8> = (0..len).map(|_| b"abc"[rng.below(3)]).collect();
                let mut heap = Vec::new();
                e.merge_long(&piece, &mut heap).unwrap();
                let mut by_rank = Vec::new();
                e.merge_by_rank(&piece, &mut by_rank).unwrap();
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

    /// tiktoken's `byte_pair_encode`, plainly: a piece that is a token is that token;
    /// else [`tiktoken_merge`].
    fn tiktoken_reference(ranks: &FxHashMap<Vec<u8>, u32>, piece: &[u8]) -> Vec<u32> {
        match ranks.get(piece) {
            Some(&r) => vec![r],
            None => tiktoken_merge(ranks, piece),
        }
    }

    /// tiktoken's merge loop: merge the adjacent parts whose concatenation has the
    /// lowest rank (the leftmost on ties) until none is a token.
    fn tiktoken_merge(ranks: &FxHashMap<Vec<u8>, u32>, piece: &[u8]) -> Vec<u32> {
        let mut parts: Vec<Vec<u8>> = piece.iter().map(|&b| vec![b]).collect();
        loop {
            let best = (0..parts.len().saturating_sub(1))
                .filter_map(|i| Some((*ranks.get(&[&parts[i][..], &parts[i + 1]].concat())?, i)))
                .min();
            let Some((_, i)) = best else { break };
            let right = parts.remove(i + 1);
            parts[i].extend(right);
        }
        parts.iter().map(|p| ranks[p]).collect()
    }

    #[test]
    fn tiktokens_rule_encodes_as_tiktoken_on_random_rank_tables() {
        let mut unbuildable = 0;
        for seed in 1..60u64 {
            let mut rng = XorShift(seed * 104729);
            let mut entries: Vec<(Vec<u8>, u32)> =
                (0..=255u8).map(|b| (vec![b], b as u32)).collect();
            let mut ranks: FxHashMap<Vec<u8>, u32> = entries.iter().cloned().collect();
            while entries.len() < 256 + 5 + seed as usize {
                let len = 2 + rng.below(5);
                let t: Vec<u8> = (0..len).map(|_| b"abc"[rng.below(3)]).collect();
                if !ranks.contains_key(&t) {
                    let r = entries.len() as u32;
                    ranks.insert(t.clone(), r);
                    entries.push((t, r));
                }
            }
            let (e, _) = crate::io::tiktoken::from_ranks(entries, &[], None).unwrap();
            let m = e.model();
            unbuildable += m.unbuildable().len();
            for len in [2, 3, 5, 9, 20, 64, 65, 150] {
                let piece: Vec<u8> = (0..len).map(|_| b"abc"[rng.below(3)]).collect();
                let text = String::from_utf8_lossy(&piece);
                let mut got = Vec::new();
                m.encode_piece(&piece, &mut got).unwrap();
                assert_eq!(
                    got,
                    tiktoken_reference(&ranks, &piece),
                    "seed {seed}, {text}"
                );
                if m.unbuildable().is_empty() {
                    continue; // merges recovered: the other tests cover their loops
                }
                // Each merge loop alone (no whole-piece lookup) is tiktoken's loop.
                let want = tiktoken_merge(&ranks, &piece);
                let mut long = Vec::new();
                m.merge_long(&piece, &mut long).unwrap();
                assert_eq!(long, want, "seed {seed}, {text}");
                if len <= SHORT_PIECE {
                    let mut short = Vec::new();
                    m.merge_short(&piece, &mut short);
                    assert_eq!(short, want, "seed {seed}, {text}");
                }
                // Splits of one token share its rank: the by-rank loop's one pair a
                // rank does not hold, so long pieces go to the heap.
                assert!(!m.ranks_grow);
            }
        }
        assert!(
            unbuildable > 50,
            "the tables hold tokens merges cannot make"
        );
    }

    #[test]
    fn ranks_that_do_not_grow_are_detected() {
        // (a,b) -> 256 ranks after (256,c) -> 257, which uses it: not a BPE order.
        let mut vocab: FxHashMap<u32, Vec<u8>> = (0..256u32).map(|b| (b, vec![b as u8])).collect();
        vocab.insert(256, b"ab".to_vec());
        vocab.insert(257, b"abc".to_vec());
        let e = BpeModel::new(
            vocab,
            &[(256, 99, 257), (97, 98, 256)],
            FxHashMap::default(),
        )
        .unwrap();
        assert!(!e.ranks_grow);
        assert!(minbpe().ranks_grow);
        // The heap still merges it: (a,b) first (the only pair), then (ab, c).
        let mut ids = Vec::new();
        e.encode_piece("abc".repeat(30).as_bytes(), &mut ids)
            .unwrap();
        assert_eq!(ids, vec![257; 30]);
    }

    #[test]
    fn a_merged_token_not_as_long_as_its_parts_is_merged_by_the_heap() {
        // 257 = (256, 256) but its bytes say "x": positions cannot follow lengths.
        let mut vocab: FxHashMap<u32, Vec<u8>> = (0..256u32).map(|b| (b, vec![b as u8])).collect();
        vocab.insert(256, b"aa".to_vec());
        vocab.insert(257, b"x".to_vec());
        let e = BpeModel::new(
            vocab,
            &[(97, 97, 256), (256, 256, 257)],
            FxHashMap::default(),
        )
        .unwrap();
        assert!(e.ranks_grow);
        let piece = [b'a'; 101];
        let (mut by_rank, mut heap) = (Vec::new(), Vec::new());
        e.merge_by_rank(&piece, &mut by_rank).unwrap();
        e.merge_long(&piece, &mut heap).unwrap();
        assert_eq!(by_rank, heap);
        assert_eq!(by_rank, [vec![257; 25], vec![97]].concat());
    }

    #[test]
    fn a_pre_token_past_the_maximum_is_a_clear_error() {
        use crate::model::MAX_PIECE_BYTES;
        assert_eq!(check_piece_len(MAX_PIECE_BYTES), Ok(()));
        let err = check_piece_len(MAX_PIECE_BYTES + 1).unwrap_err();
        assert_eq!(
            err,
            EncodeError::PieceTooLong {
                len: MAX_PIECE_BYTES + 1
            }
        );
        assert!(err
            .to_string()
            .starts_with("a single pre-token of 4294967295 bytes"));
    }
}
