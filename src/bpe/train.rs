//! The BPE merge loop: the reduce step of training.
//!
//! Input: the distinct pre-tokens with their counts. Each step merges the most
//! frequent adjacent pair; ties go to the lexicographically greatest pair compared as
//! (left bytes, right bytes). Counts are over all adjacent positions, so "aaa" holds
//! the pair (a, a) twice, and merging replaces occurrences left to right.
//!
//! Instead of recounting every pair after each merge, we keep:
//! - `pair_counts`: pair → count (64-bit),
//! - `pair_words`: pair → the words it occurs in (only ever grows; stale entries are
//!   skipped), so a merge touches only the words that contain the pair,
//! - a max-heap of (count, left bytes, right bytes) with lazy invalidation: counts of
//!   existing pairs only ever go down, so a popped entry whose count is out of date is
//!   pushed back with its current count.
//!
//! One giant distinct word (a 100 MB run of one letter has no safe cut) costs its ids
//! (4 bytes per byte, given back as merges shorten it), a bounded list of the pairs a
//! merge formed (compacted as it grows, not one entry per occurrence), and the
//! vocabulary itself, whose tokens are as long as the runs they stand for: about 12
//! bytes per byte of a 100 MB run, the output. Failing to allocate any of these is
//! [`OutOfMemory`], never an abort.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

use rustc_hash::FxHashMap;

type Pair = (u32, u32);

struct Word {
    ids: Vec<u32>,
    count: i64,
}

#[derive(Debug, PartialEq, Eq)]
struct Candidate {
    count: i64,
    left: Arc<[u8]>,
    right: Arc<[u8]>,
    pair: Pair,
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        self.count
            .cmp(&other.count)
            .then_with(|| self.left.cmp(&other.left))
            .then_with(|| self.right.cmp(&other.right))
            .then_with(|| self.pair.cmp(&other.pair))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Training ran out of memory: `bytes` more were needed (a buffer whose size comes
/// from the input: a giant pre-token's ids, or the bytes of a token made of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfMemory {
    pub bytes: usize,
}

impl std::fmt::Display for OutOfMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "out of memory while training: {} more bytes were needed; a single pre-token \
             needs about 5 bytes per byte, plus its tokens' bytes",
            self.bytes
        )
    }
}

impl std::error::Error for OutOfMemory {}

/// Makes room for exactly `more` items in `v`, or [`OutOfMemory`].
fn try_reserve<T>(v: &mut Vec<T>, more: usize) -> Result<(), OutOfMemory> {
    v.try_reserve_exact(more).map_err(|_| OutOfMemory {
        bytes: more.saturating_mul(std::mem::size_of::<T>()),
    })
}

/// A list of the pairs one word's merge formed is sorted and deduplicated when it
/// reaches this length (and then twice its distinct length): ordinary words never get
/// there, and a giant word's list stays as long as its distinct pairs, not its
/// occurrences (a 100 MB run pushed 100 M pairs, 1.6 GB, in its first merge).
const COMPACT_NEW_PAIRS_AT: usize = 1024;

/// A word's ids are given back to the allocator when they use less than a quarter of
/// a buffer at least this long (only giant words: runs halve with each merge).
const SHRINK_IDS_FROM: usize = 1 << 16;

/// The result of training: merges in order (merge `i` creates id `256 + i`) and the
/// bytes of every id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trained {
    pub merges: Vec<Pair>,
    pub vocab: Vec<Vec<u8>>,
}

/// What may be merged, besides "the most frequent pair".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Training stops when the best pair occurs fewer times than this (Hugging Face's
    /// `min_frequency`); 0 and 1 never stop it.
    pub min_frequency: u64,
    /// A pair whose merged token would be longer than this many bytes is never merged:
    /// the next best pair is taken instead (so runs like "\n\n\n\n\n\n\n" can be kept
    /// from becoming tokens).
    pub max_token_length: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            min_frequency: 0,
            max_token_length: usize::MAX,
        }
    }
}

/// Learns up to `num_merges` merges from pre-token counts, within `limits`. Stops
/// early when no pair is left. `progress(done)` is called now and then; returning
/// false stops (the merges so far are returned). Memory grows with the merges made,
/// never with `num_merges` itself; failing to allocate is [`OutOfMemory`].
pub fn train_merges<K: AsRef<[u8]>>(
    counts: impl IntoIterator<Item = (K, u64)>,
    num_merges: usize,
    limits: Limits,
    mut progress: impl FnMut(usize) -> bool,
) -> Result<Trained, OutOfMemory> {
    let mut vocab: Vec<Arc<[u8]>> = (0..=255u8).map(|b| Arc::from(vec![b])).collect();
    let mut words: Vec<Word> = Vec::new();
    let mut pair_counts: FxHashMap<Pair, i64> = FxHashMap::default();
    let mut pair_words: FxHashMap<Pair, Vec<u32>> = FxHashMap::default();

    for (token, count) in counts {
        let token = token.as_ref();
        if token.len() < 2 {
            continue;
        }
        let mut ids: Vec<u32> = Vec::new();
        try_reserve(&mut ids, token.len())?;
        ids.extend(token.iter().map(|&b| b as u32));
        let w = words.len() as u32;
        let count = count as i64;
        for pair in ids.windows(2) {
            let pair = (pair[0], pair[1]);
            *pair_counts.entry(pair).or_insert(0) += count;
            let list = pair_words.entry(pair).or_default();
            if list.last() != Some(&w) {
                list.push(w);
            }
        }
        words.push(Word { ids, count });
    }

    let candidate = |pair: Pair, count: i64, vocab: &[Arc<[u8]>]| Candidate {
        count,
        left: vocab[pair.0 as usize].clone(),
        right: vocab[pair.1 as usize].clone(),
        pair,
    };
    // Each merge shortens some word by a symbol: no more merges than that can happen.
    let most_merges: usize = words.iter().map(|w| w.ids.len() - 1).sum();
    let mut heap: BinaryHeap<Candidate> = pair_counts
        .iter()
        .filter(|(_, &c)| c > 0)
        .map(|(&p, &c)| candidate(p, c, &vocab))
        .collect();

    let mut merges: Vec<Pair> = Vec::with_capacity(num_merges.min(most_merges));
    let report_every = (num_merges / 100).max(1);
    let mut new_pairs: Vec<Pair> = Vec::new();
    let mut created: Vec<Pair> = Vec::new();

    while merges.len() < num_merges {
        let Some(top) = heap.pop() else { break };
        let current = pair_counts.get(&top.pair).copied().unwrap_or(0);
        if current != top.count {
            if current > 0 {
                heap.push(candidate(top.pair, current, &vocab));
            }
            continue;
        }
        if current <= 0 || top.left.len() + top.right.len() > limits.max_token_length {
            continue; // gone, or never to be merged (its tokens' bytes never change)
        }
        if (current as u64) < limits.min_frequency {
            break;
        }
        let new_id = vocab.len() as u32;
        let mut bytes = Vec::new();
        try_reserve(&mut bytes, top.left.len() + top.right.len())?;
        bytes.extend_from_slice(&top.left);
        bytes.extend_from_slice(&top.right);
        vocab.push(Arc::from(bytes));
        merges.push(top.pair);

        created.clear();
        let word_ids = pair_words.remove(&top.pair).unwrap_or_default();
        for &w in &word_ids {
            new_pairs.clear();
            merge_word(
                &mut words[w as usize],
                top.pair,
                new_id,
                &mut pair_counts,
                &mut new_pairs,
            );
            new_pairs.sort_unstable();
            new_pairs.dedup();
            for &p in &new_pairs {
                pair_words.entry(p).or_default().push(w);
            }
            created.extend_from_slice(&new_pairs);
        }
        // Only pairs containing the new token can grow; they are new, so they get
        // their (only) heap entry here. Others only shrink: handled lazily on pop.
        created.sort_unstable();
        created.dedup();
        for &pair in &created {
            let c = pair_counts.get(&pair).copied().unwrap_or(0);
            if c > 0 {
                heap.push(candidate(pair, c, &vocab));
            }
        }
        pair_counts.remove(&top.pair);
        if merges.len().is_multiple_of(report_every) && !progress(merges.len()) {
            break;
        }
    }
    let _ = progress(merges.len());
    // The heap's clones of the tokens go first, so each token's bytes are copied out
    // and freed one at a time (the vocabulary of a giant run is held once, not twice).
    drop(heap);
    drop(words);
    let mut out = Vec::with_capacity(vocab.len());
    for token in vocab {
        let mut bytes = Vec::new();
        try_reserve(&mut bytes, token.len())?;
        bytes.extend_from_slice(&token);
        out.push(bytes);
    }
    Ok(Trained { merges, vocab: out })
}

/// Replaces every occurrence of `pair` in the word, left to right and in place,
/// updating the counts of the neighbouring pairs and recording the pairs formed with
/// `new_id`. (The merged pair's own count is dropped by the caller.)
fn merge_word(
    word: &mut Word,
    (a, b): Pair,
    new_id: u32,
    counts: &mut FxHashMap<Pair, i64>,
    new_pairs: &mut Vec<Pair>,
) {
    let c = word.count;
    let ids = &mut word.ids;
    let n = ids.len();
    let mut compact_at = COMPACT_NEW_PAIRS_AT;
    let (mut w, mut r) = (0, 0); // write and read positions; w <= r
    while r < n {
        if r + 1 < n && ids[r] == a && ids[r + 1] == b {
            // The left neighbour is what we already wrote (possibly a new token).
            if w > 0 {
                let prev = ids[w - 1];
                *counts.entry((prev, a)).or_insert(0) -= c;
                *counts.entry((prev, new_id)).or_insert(0) += c;
                new_pairs.push((prev, new_id));
            }
            // The right neighbour is still the original symbol.
            if r + 2 < n {
                let next = ids[r + 2];
                *counts.entry((b, next)).or_insert(0) -= c;
                *counts.entry((new_id, next)).or_insert(0) += c;
                new_pairs.push((new_id, next));
            }
            if new_pairs.len() >= compact_at {
                new_pairs.sort_unstable();
                new_pairs.dedup();
                compact_at = (2 * new_pairs.len()).max(COMPACT_NEW_PAIRS_AT);
            }
            ids[w] = new_id;
            r += 2;
        } else {
            ids[w] = ids[r];
            r += 1;
        }
        w += 1;
    }
    ids.truncate(w);
    if ids.capacity() >= SHRINK_IDS_FROM && ids.len() < ids.capacity() / 4 {
        ids.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn train(words: &[(&str, u64)], n: usize) -> Vec<String> {
        train_with(words, n, Limits::default())
    }

    fn train_with(words: &[(&str, u64)], n: usize, limits: Limits) -> Vec<String> {
        let t = train_merges(
            words.iter().map(|&(w, c)| (w.as_bytes(), c)),
            n,
            limits,
            |_| true,
        )
        .unwrap();
        t.merges
            .iter()
            .map(|&(l, r)| {
                let l = String::from_utf8_lossy(&t.vocab[l as usize]).into_owned();
                let r = String::from_utf8_lossy(&t.vocab[r as usize]).into_owned();
                format!("{l} {r}")
            })
            .collect()
    }

    #[test]
    fn minbpe_example() {
        // "aaabdaaabac": aa (4) first, then aa+a, then aaa+b... as in minbpe's test.
        let m = train(&[("aaabdaaabac", 1)], 3);
        assert_eq!(m, ["a a", "aa a", "aaa b"]);
    }

    #[test]
    fn ties_go_to_the_greatest_pair() {
        // (c, d) and (a, b) both occur once: (c, d) is greater.
        let m = train(&[("ab", 1), ("cd", 1)], 1);
        assert_eq!(m, ["c d"]);
    }

    #[test]
    fn overlapping_pairs_count_every_position() {
        // "aaa" x3 has (a,a) at two positions: 6 beats "bc" x5.
        let m = train(&[("aaa", 3), ("bc", 5)], 1);
        assert_eq!(m, ["a a"]);
    }

    #[test]
    fn stops_when_no_pairs_remain() {
        let t = train_merges([(b"ab".as_slice(), 1u64)], 10, Limits::default(), |_| true).unwrap();
        assert_eq!(t.merges, vec![(97, 98)]);
        assert_eq!(t.vocab.len(), 257);
    }

    #[test]
    fn training_stops_when_the_best_pair_is_below_min_frequency() {
        let words = [("aaaa", 3), ("bc", 2), ("de", 1)];
        let limits = Limits {
            min_frequency: 2,
            ..Limits::default()
        };
        // (a,a) 9, then (aa,aa) 3, then (b,c) 2; (d,e) 1 is below 2.
        assert_eq!(train_with(&words, 10, limits), ["a a", "aa aa", "b c"]);
        assert_eq!(train_with(&words, 10, Limits::default()).len(), 4);
    }

    #[test]
    fn pairs_longer_than_max_token_length_are_skipped_for_the_next_best() {
        let words = [("\n\n\n\n\n\n\n", 10), ("ab", 1)];
        let limits = Limits {
            max_token_length: 3,
            ..Limits::default()
        };
        let merges = train_with(&words, 10, limits);
        assert_eq!(merges, ["\n \n", "\n\n \n", "a b"]);
        // Without the limit, the whole run becomes a token.
        let merges = train_with(&words, 10, Limits::default());
        assert!(merges.contains(&"\n\n\n\n\n\n \n".into()), "{merges:?}");
    }

    #[test]
    fn a_run_longer_than_the_compaction_point_halves_with_each_merge() {
        // 4096 "a": 2048 occurrences of (a, a) form more pairs than are listed before
        // compacting; each merge pairs all the tokens, so lengths double to 4096.
        let run = "a".repeat(4096);
        let t = train_merges([(run.as_bytes(), 3u64)], 20, Limits::default(), |_| true).unwrap();
        let lengths: Vec<usize> = t.vocab[256..].iter().map(|v| v.len()).collect();
        assert_eq!(lengths, (1..=12).map(|k| 1usize << k).collect::<Vec<_>>());
        assert!(t.vocab[256..].iter().all(|v| v.iter().all(|&b| b == b'a')));
    }

    #[test]
    fn asking_for_ten_billion_merges_allocates_only_what_the_counts_can_give() {
        let start = std::time::Instant::now();
        let t = train_merges(
            [(b"hello".as_slice(), 3u64), (b"world".as_slice(), 2)],
            10_000_000_000,
            Limits::default(),
            |_| true,
        )
        .unwrap();
        assert_eq!(t.merges.len(), 8);
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
    }
}
