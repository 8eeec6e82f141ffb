//! The merge loops: BPE on one pre-token, exactly GPT-2's `bpe()`: repeatedly merge
//! the adjacent pair with the lowest rank (the leftmost one on ties, which is the same
//! as merging every occurrence left to right).
//!
//! Three loops give the same ids at different costs: a scan on the stack for short
//! pieces (nearly all), one rank at a time for long pieces when ranks grow along
//! merges (every trained vocabulary), and a heap for any other merge table.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;

use super::model::{BpeModel, Merge};

/// Pieces up to this many bytes are merged with a plain scan; longer ones otherwise.
pub const SHORT_PIECE: usize = 64;

impl BpeModel {
    /// BPE on one pre-token (under tiktoken's rule, a piece that is a token first).
    pub fn encode_piece(&self, piece: &[u8], out: &mut Vec<u32>) {
        if let Some(id) = self.whole_piece(piece) {
            out.push(id);
            return;
        }
        match piece.len() {
            0 => {}
            1 => out.push(self.byte_id(piece[0])),
            n if n <= SHORT_PIECE => self.merge_short(piece, out),
            _ if self.ranks_grow => self.merge_by_rank(piece, out),
            _ => self.merge_long(piece, out),
        }
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
    pub(crate) fn merge_by_rank(&self, piece: &[u8], out: &mut Vec<u32>) {
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
    pub(crate) fn merge_long(&self, piece: &[u8], out: &mut Vec<u32>) {
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

    #[test]
    fn all_three_merge_loops_agree() {
        for seed in 1..40u64 {
            let e = random(seed * 7919, 10 + seed as usize * 3);
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
                m.encode_piece(&piece, &mut got);
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
                m.merge_long(&piece, &mut long);
                assert_eq!(long, want, "seed {seed}, {text}");
                if len <= SHORT_PIECE {
                    let mut short = Vec::new();
                    m.merge_short(&piece, &mut short);
                    assert_eq!(short, want, "seed {seed}, {text}");
                }
                if m.ranks_grow {
                    let mut by_rank = Vec::new();
                    m.merge_by_rank(&piece, &mut by_rank);
                    assert_eq!(by_rank, want, "seed {seed}, {text}");
                }
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
        e.encode_piece("abc".repeat(30).as_bytes(), &mut ids);
        assert_eq!(ids, vec![257; 30]);
    }
}
