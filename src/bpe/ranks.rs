//! Vocabularies given as ranks only (tiktoken's `.tiktoken` files): recovering the
//! merges, so they can be encoded like any merges-based tokenizer, and tiktoken's own
//! rule for the vocabularies merges cannot build.
//!
//! minbpe's `recover_merges` idea: a token of rank `r` was made by merging two tokens,
//! and which two is found by running byte-pair encoding on the token's own bytes with
//! only the ranks below `r`: it stops at exactly two parts. (If ranks only grow along
//! merges — true of every BPE-trained vocabulary — this is exactly how tiktoken's
//! rank-based encoder splits text, so both encoders agree.)
//!
//! Some files hold tokens no merge of two lower-ranked tokens makes (Llama 3's
//! `tokenizer.model`: 678 of them, such as `.:.:`). tiktoken still produces them: it
//! looks a whole piece up first, and merges the adjacent pair of parts whose
//! *concatenation* has the lowest rank, whatever pair of tokens that concatenation
//! was made from. [`all_splits`] gives that rule as a pair table — every way of
//! cutting every token in two tokens, keyed to the whole token's rank — so the merge
//! loops of `merge.rs`, with the whole-piece lookup first, encode exactly as tiktoken.

use rustc_hash::FxHashMap;

use crate::packed::{packed, MAX_PACKED};

/// Longest token under a `u64` key.
const SMALL: usize = 7;

/// Up to [`SMALL`] bytes and their length in one integer.
#[inline]
fn small_key(bytes: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    buf[..bytes.len()].copy_from_slice(bytes);
    buf[7] = bytes.len() as u8;
    u64::from_le_bytes(buf)
}

/// Rank of each token, by its bytes: short tokens (nearly all) under packed-integer
/// keys, which hash without a loop; the lookups are the whole cost of recovering.
struct RankOf<'a> {
    /// Tokens of one or two bytes, indexed by their bytes (u32::MAX: none).
    pairs: Vec<u32>,
    /// Tokens of 3 to 7 bytes: 16-byte entries, so more of the table stays in cache.
    small: FxHashMap<u64, u32>,
    short: FxHashMap<u128, u32>,
    long: FxHashMap<&'a [u8], u32>,
}

impl<'a> RankOf<'a> {
    fn new() -> Self {
        Self {
            pairs: vec![u32::MAX; 1 << 16 | 1 << 8],
            small: FxHashMap::default(),
            short: FxHashMap::default(),
            long: FxHashMap::default(),
        }
    }

    /// Adds a token; the rank it had already, if any.
    fn insert(&mut self, token: &'a [u8], rank: u32) -> Option<u32> {
        if let Some(slot) = Self::slot(token) {
            let old = std::mem::replace(&mut self.pairs[slot], rank);
            (old != u32::MAX).then_some(old)
        } else if token.len() <= SMALL {
            self.small.insert(small_key(token), rank)
        } else if token.len() <= MAX_PACKED {
            self.short.insert(packed(token, 0, token.len()), rank)
        } else {
            self.long.insert(token, rank)
        }
    }

    #[inline]
    fn slot(token: &[u8]) -> Option<usize> {
        match *token {
            [a, b] => Some((a as usize) << 8 | b as usize),
            [a] => Some(1 << 16 | a as usize),
            _ => None,
        }
    }

    /// The rank of `bytes[start..end]`.
    #[inline]
    fn get(&self, bytes: &[u8], start: usize, end: usize) -> Option<u32> {
        if end - start <= 2 {
            let rank = Self::slot(&bytes[start..end]).map_or(u32::MAX, |slot| self.pairs[slot]);
            (rank != u32::MAX).then_some(rank)
        } else if end - start <= SMALL {
            self.small.get(&small_key(&bytes[start..end])).copied()
        } else if end - start <= MAX_PACKED {
            self.short.get(&packed(bytes, start, end)).copied()
        } else {
            self.long.get(&bytes[start..end]).copied()
        }
    }
}

/// The largest rank: a rank is a token id, so the largest id ([`crate::model::MAX_ID`],
/// below 2**31; `u32::MAX` stands for "no token" here and in the encoder).
pub const MAX_RANK: u32 = crate::model::MAX_ID;

/// Why a vocabulary has no merges.
#[derive(Debug, PartialEq, Eq)]
pub enum RecoverError {
    /// A rank past [`MAX_RANK`].
    TooLarge {
        token: Vec<u8>,
        rank: u32,
    },
    /// Two tokens were given the same rank (`first` came first).
    SameRank {
        rank: u32,
        first: Vec<u8>,
        second: Vec<u8>,
    },
    /// The same token at two ranks.
    Duplicate {
        token: Vec<u8>,
        first: u32,
        rank: u32,
    },
    MissingByte(u8),
    /// BPE with the lower ranks splits `token` (of this rank) into `parts` parts, not 2.
    Unreachable {
        token: Vec<u8>,
        rank: u32,
        parts: usize,
    },
}

impl RecoverError {
    /// The message, quoting bytes with `repr` (the bindings pass Python's `repr()`).
    pub fn message(&self, repr: &dyn Fn(&[u8]) -> String) -> String {
        match self {
            RecoverError::TooLarge { token, rank } => format!(
                "token {} has the rank {rank}; ranks go up to {MAX_RANK}",
                repr(token)
            ),
            RecoverError::SameRank {
                rank,
                first,
                second,
            } => format!(
                "tokens {} and {} have the same rank {rank}",
                repr(first),
                repr(second)
            ),
            RecoverError::Duplicate { token, first, rank } => {
                format!("token {} has two ranks, {first} and {rank}", repr(token))
            }
            RecoverError::MissingByte(b) => format!(
                "the single byte {} has no rank: a byte-level BPE vocabulary holds all 256 bytes",
                repr(&[*b])
            ),
            RecoverError::Unreachable { token, rank, parts } => format!(
                "token {} (rank {rank}) cannot be made by BPE from the tokens of lower rank: \
                 they merge its bytes into {parts} parts, not 2",
                repr(token)
            ),
        }
    }
}

/// `entries` are `(token, rank)` in any order; ranks may skip numbers (a special
/// token's) and be as large as `u32` goes: nothing here is sized by the largest rank.
/// Returns `(rank, left rank, right rank)` for every multi-byte token, in rank order;
/// the first token no merge makes is the error ([`recover`] gives the others too).
pub fn recover_merges<T: AsRef<[u8]> + Sync>(
    entries: &[(T, u32)],
) -> Result<Vec<(u32, u32, u32)>, RecoverError> {
    let recovered = recover(entries)?;
    match recovered.unbuildable.first() {
        Some(&(rank, parts)) => {
            let token = entries
                .iter()
                .find(|(_, r)| *r == rank)
                .map(|(t, _)| t.as_ref().to_vec())
                .expect("an unbuildable rank is a token's");
            Err(RecoverError::Unreachable { token, rank, parts })
        }
        None => Ok(recovered.merges),
    }
}

/// What [`recover`] finds: the merges of the tokens merges can build, and the others.
#[derive(Debug, PartialEq, Eq)]
pub struct Recovered {
    /// `(rank, left rank, right rank)` for every multi-byte token a merge makes, in
    /// rank order.
    pub merges: Vec<(u32, u32, u32)>,
    /// `(rank, parts)` of every token BPE with the lower ranks stops short of (at
    /// `parts` parts, not 2), in rank order: tiktoken makes them only by looking a
    /// whole piece up.
    pub unbuildable: Vec<(u32, usize)>,
}

/// The merges of every token merges can build, and which tokens they cannot: see
/// [`recover_merges`], which takes the same entries; faults other than an unbuildable
/// token are errors here too.
pub fn recover<T: AsRef<[u8]> + Sync>(entries: &[(T, u32)]) -> Result<Recovered, RecoverError> {
    // In rank order; on equal ranks, in the given order (a stable sort).
    let mut tokens: Vec<(u32, &[u8])> = entries.iter().map(|(t, r)| (*r, t.as_ref())).collect();
    tokens.sort_by_key(|&(r, _)| r);
    if let Some(&(rank, t)) = tokens.last().filter(|&&(r, _)| r > MAX_RANK) {
        return Err(RecoverError::TooLarge {
            token: t.to_vec(),
            rank,
        });
    }
    if let Some(w) = tokens.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(RecoverError::SameRank {
            rank: w[0].0,
            first: w[0].1.to_vec(),
            second: w[1].1.to_vec(),
        });
    }
    let mut rank_of = RankOf::new();
    rank_of.small.reserve(tokens.len());
    for &(r, t) in &tokens {
        if let Some(first) = rank_of.insert(t, r) {
            return Err(RecoverError::Duplicate {
                token: t.to_vec(),
                first,
                rank: r,
            });
        }
    }
    for b in 0..=255u8 {
        if rank_of.get(&[b], 0, 1).is_none() {
            return Err(RecoverError::MissingByte(b));
        }
    }
    // Each token is split on its own: on a few threads for large vocabularies (thread
    // k takes every n-th token, as later tokens are longer), then the first failure in
    // rank order is the one reported. Scoped threads, not rayon's global pool, which
    // would not survive a fork (a DataLoader worker loading an encoding).
    type Found = Option<Result<(u32, u32, u32), RecoverError>>;
    let split_one = |i: usize, parts: &mut Vec<Part>| -> Found {
        let (r, t) = tokens[i];
        if t.len() < 2 {
            return None;
        }
        Some(match split(&rank_of, t, r, parts) {
            Ok((left, right)) => Ok((r, left, right)),
            Err(parts) => Err(RecoverError::Unreachable {
                token: t.to_vec(),
                rank: r,
                parts,
            }),
        })
    };
    let threads = if tokens.len() >= 1 << 14 {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
    } else {
        1
    };
    let strides: Vec<Vec<Found>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|k| {
                let split_one = &split_one;
                let n = tokens.len();
                s.spawn(move || {
                    let mut parts = Vec::new();
                    (k..n)
                        .step_by(threads)
                        .map(|i| split_one(i, &mut parts))
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a recover thread panicked"))
            .collect()
    });
    let mut strides: Vec<_> = strides.into_iter().map(Vec::into_iter).collect();
    let mut recovered = Recovered {
        merges: Vec::with_capacity(tokens.len()),
        unbuildable: Vec::new(),
    };
    for i in 0..tokens.len() {
        match strides[i % threads].next().expect("one result per token") {
            None => {}
            Some(Ok(merge)) => recovered.merges.push(merge),
            Some(Err(RecoverError::Unreachable { rank, parts, .. })) => {
                recovered.unbuildable.push((rank, parts))
            }
            Some(Err(e)) => return Err(e),
        }
    }
    Ok(recovered)
}

/// tiktoken's rule as a pair table: `(left rank, right rank, rank)` for every way of
/// cutting every token of `entries` into two tokens (`"abc"` of rank 9 gives
/// `(a, bc, 9)` and `(ab, c, 9)` when `a`, `bc`, `ab` and `c` are tokens), in rank
/// order. tiktoken merges the adjacent parts whose concatenation has the lowest rank;
/// this table gives that rank to every pair of parts that concatenate to a token.
/// `entries` must be free of faults ([`recover`] checks them).
pub fn all_splits<T: AsRef<[u8]>>(entries: &[(T, u32)]) -> Vec<(u32, u32, u32)> {
    let mut rank_of = RankOf::new();
    rank_of.small.reserve(entries.len());
    for (t, r) in entries {
        rank_of.insert(t.as_ref(), *r);
    }
    // Only cuts where both halves have the length of some token can give two tokens:
    // trying every cut hashed O(n^2) bytes for a token of n bytes (a damaged file with
    // one 750 KB token took 80 s to load).
    let mut lengths: Vec<usize> = entries.iter().map(|(t, _)| t.as_ref().len()).collect();
    lengths.sort_unstable();
    lengths.dedup();
    let mut splits = Vec::with_capacity(entries.len() * 3);
    for (t, r) in entries {
        let t = t.as_ref();
        for &cut in lengths.iter().take_while(|&&cut| cut < t.len()) {
            if cut == 0 || lengths.binary_search(&(t.len() - cut)).is_err() {
                continue;
            }
            if let (Some(left), Some(right)) =
                (rank_of.get(t, 0, cut), rank_of.get(t, cut, t.len()))
            {
                splits.push((left, right, *r));
            }
        }
    }
    splits.sort_unstable_by_key(|&(l, r, rank)| (rank, l, r));
    splits
}

/// One part of a token being split: where it starts, its own rank, and the rank (below
/// the token's, else u32::MAX) of it joined with the next part.
#[derive(Clone, Copy)]
struct Part {
    start: usize,
    rank: u32,
    pair: u32,
}

/// The ranks of the two tokens BPE with only the ranks below `r` splits `t` into, or
/// how many parts it stops at instead. tiktoken's merge loop: after a merge only the
/// neighbours' pair ranks are looked up again.
fn split(
    rank_of: &RankOf<'_>,
    t: &[u8],
    r: u32,
    parts: &mut Vec<Part>,
) -> Result<(u32, u32), usize> {
    let pair = |parts: &[Part], i: usize| -> u32 {
        match parts.get(i + 2) {
            // The whole token has rank r itself, not below it: no need to look.
            Some(&Part { start: end, .. }) if !(i == 0 && end == t.len()) => {
                match rank_of.get(t, parts[i].start, end) {
                    Some(pr) if pr < r => pr,
                    _ => u32::MAX,
                }
            }
            _ => u32::MAX,
        }
    };
    parts.clear();
    parts.extend((0..=t.len()).map(|i| Part {
        start: i,
        rank: t.get(i).map_or(u32::MAX, |&b| {
            rank_of.get(&[b], 0, 1).expect("every byte has a rank")
        }),
        pair: u32::MAX,
    }));
    for i in 0..parts.len() - 2 {
        parts[i].pair = pair(parts, i);
    }
    loop {
        // The lowest rank; the leftmost on ties.
        let (i, best) =
            parts[..parts.len() - 1]
                .iter()
                .enumerate()
                .fold((0, u32::MAX), |acc, (i, p)| {
                    if p.pair < acc.1 {
                        (i, p.pair)
                    } else {
                        acc
                    }
                });
        if best == u32::MAX {
            break;
        }
        parts.remove(i + 1);
        parts[i].rank = best;
        parts[i].pair = pair(parts, i);
        if i > 0 {
            parts[i - 1].pair = pair(parts, i - 1);
        }
    }
    if parts.len() != 3 {
        return Err(parts.len() - 1);
    }
    Ok((parts[0].rank, parts[1].rank))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn byte_tokens() -> Vec<(Vec<u8>, u32)> {
        (0..=255u8).map(|b| (vec![b], b as u32)).collect()
    }

    #[test]
    fn recovers_the_pair_each_token_was_made_from() {
        let mut tokens = byte_tokens();
        tokens.push((b"abcab".to_vec(), 259)); // any order; 258 skipped (a special's)
        tokens.push((b"ab".to_vec(), 256));
        tokens.push((b"abc".to_vec(), 257));
        let merges = recover_merges(&tokens).unwrap();
        assert_eq!(merges, vec![(256, 97, 98), (257, 256, 99), (259, 257, 256)]);
    }

    #[test]
    fn huge_ranks_need_no_table_of_their_size() {
        let mut tokens = byte_tokens();
        tokens.push((b"ab".to_vec(), MAX_RANK));
        assert_eq!(recover_merges(&tokens).unwrap(), vec![(MAX_RANK, 97, 98)]);
        tokens.push((b"bc".to_vec(), u32::MAX));
        assert!(matches!(
            recover_merges(&tokens),
            Err(RecoverError::TooLarge { rank: u32::MAX, .. })
        ));
    }

    #[test]
    fn unreachable_token_is_an_error() {
        let mut tokens = byte_tokens();
        tokens.push((b"abc".to_vec(), 256)); // no "ab" or "bc" below it
        let e = recover_merges(&tokens).unwrap_err();
        assert_eq!(
            e,
            RecoverError::Unreachable {
                token: b"abc".to_vec(),
                rank: 256,
                parts: 3
            }
        );
        assert_eq!(
            e.message(&|b| format!("{b:?}")),
            "token [97, 98, 99] (rank 256) cannot be made by BPE from the tokens of lower \
             rank: they merge its bytes into 3 parts, not 2"
        );
    }

    #[test]
    fn large_vocabularies_split_on_threads_and_report_the_first_failure() {
        // Every pair of bytes not starting with 0: 65280 tokens, enough for threads.
        let mut tokens = byte_tokens();
        for a in 1..=255u8 {
            for b in 0..=255u8 {
                let rank = tokens.len() as u32;
                tokens.push((vec![a, b], rank));
            }
        }
        let merges = recover_merges(&tokens).unwrap();
        assert_eq!(merges.len(), 255 * 256);
        assert_eq!(merges[0], (256, 1, 0));
        assert_eq!(
            merges[merges.len() - 1],
            (tokens.len() as u32 - 1, 255, 255)
        );
        // Two tokens no merge can make (no pair starts with 0), on different threads.
        let first = tokens.len() as u32;
        tokens.push((vec![0, 0, 0], first));
        tokens.push((vec![0, 1, 0], first + 1));
        assert_eq!(
            recover_merges(&tokens),
            Err(RecoverError::Unreachable {
                token: vec![0, 0, 0],
                rank: first,
                parts: 3
            })
        );
    }

    #[test]
    fn recover_lists_every_token_merges_cannot_make() {
        let mut tokens = byte_tokens();
        tokens.push((b"ab".to_vec(), 256));
        tokens.push((b"xyz".to_vec(), 257)); // no "xy" or "yz" below it
        tokens.push((b"abc".to_vec(), 258));
        tokens.push((b"cab".to_vec(), 259)); // "ca" is not a token: c + ab
        tokens.push((b"xyzab".to_vec(), 260)); // x, y, z, ab: "xyz" is no pair
        tokens.push((b"abab".to_vec(), 261));
        tokens.push((b"qq".to_vec(), 262));
        tokens.push((b"qqqq".to_vec(), 263));
        tokens.push((b"qqq".to_vec(), 264)); // above "qqqq": still qq + q
        tokens.push((b"mnop".to_vec(), 265)); // m n o p: 4 parts
        let recovered = recover(&tokens).unwrap();
        assert_eq!(recovered.unbuildable, vec![(257, 3), (260, 4), (265, 4)]);
        assert_eq!(
            recovered.merges,
            vec![
                (256, 97, 98),
                (258, 256, 99),
                (259, 99, 256),
                (261, 256, 256),
                (262, 113, 113),
                (263, 262, 262),
                (264, 262, 113),
            ]
        );
        // recover_merges reports the first of them.
        assert_eq!(
            recover_merges(&tokens),
            Err(RecoverError::Unreachable {
                token: b"xyz".to_vec(),
                rank: 257,
                parts: 3
            })
        );
    }

    #[test]
    fn all_splits_cuts_every_token_into_two_tokens() {
        let mut tokens = byte_tokens();
        tokens.push((b"bc".to_vec(), 256));
        tokens.push((b"abc".to_vec(), 257));
        tokens.push((b"ab".to_vec(), 258));
        tokens.push((b"xyz".to_vec(), 259));
        let splits = all_splits(&tokens);
        assert_eq!(
            splits,
            vec![(98, 99, 256), (97, 256, 257), (258, 99, 257), (97, 98, 258),]
        );
    }

    #[test]
    fn missing_byte_same_rank_and_repeated_token_are_errors() {
        let mut tokens = byte_tokens();
        tokens.remove(7);
        assert_eq!(recover_merges(&tokens), Err(RecoverError::MissingByte(7)));
        let mut tokens = byte_tokens();
        tokens.push((b"ab".to_vec(), 5));
        assert_eq!(
            recover_merges(&tokens),
            Err(RecoverError::SameRank {
                rank: 5,
                first: vec![5],
                second: b"ab".to_vec()
            })
        );
        let mut tokens = byte_tokens();
        tokens.push((b"a".to_vec(), 300));
        assert_eq!(
            recover_merges(&tokens),
            Err(RecoverError::Duplicate {
                token: b"a".to_vec(),
                first: 97,
                rank: 300
            })
        );
    }
}
