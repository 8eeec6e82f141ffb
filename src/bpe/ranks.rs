//! Vocabularies given as ranks only (tiktoken's `.tiktoken` files): recovering the
//! merges, so they can be encoded like any merges-based tokenizer.
//!
//! minbpe's `recover_merges` idea: a token of rank `r` was made by merging two tokens,
//! and which two is found by running byte-pair encoding on the token's own bytes with
//! only the ranks below `r`: it stops at exactly two parts. (If ranks only grow along
//! merges — true of every BPE-trained vocabulary — this is exactly how tiktoken's
//! rank-based encoder splits text, so both encoders agree.)

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

    /// Adds a token; false if it was there already.
    fn insert(&mut self, token: &'a [u8], rank: u32) -> bool {
        if let Some(slot) = Self::slot(token) {
            let fresh = self.pairs[slot] == u32::MAX;
            self.pairs[slot] = rank;
            fresh
        } else if token.len() <= SMALL {
            self.small.insert(small_key(token), rank).is_none()
        } else if token.len() <= MAX_PACKED {
            self.short
                .insert(packed(token, 0, token.len()), rank)
                .is_none()
        } else {
            self.long.insert(token, rank).is_none()
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

/// Why a vocabulary has no merges.
#[derive(Debug, PartialEq, Eq)]
pub enum RecoverError {
    /// The token of this rank also has a lower rank.
    Duplicate {
        rank: u32,
    },
    MissingByte(u8),
    /// BPE with the lower ranks splits the token of this rank into `parts` parts, not 2.
    Unreachable {
        rank: u32,
        parts: usize,
    },
}

/// `tokens[i]` is the token of rank `i` (`None` for a rank the file skips, e.g. a
/// special token's). Returns `(rank, left rank, right rank)` for every multi-byte
/// token, in rank order.
pub fn recover_merges(tokens: &[Option<Vec<u8>>]) -> Result<Vec<(u32, u32, u32)>, RecoverError> {
    let mut rank_of = RankOf::new();
    rank_of.small.reserve(tokens.len());
    for (r, t) in tokens.iter().enumerate() {
        if let Some(t) = t {
            if !rank_of.insert(t.as_slice(), r as u32) {
                return Err(RecoverError::Duplicate { rank: r as u32 });
            }
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
    let split_one = |r: usize, parts: &mut Vec<Part>| -> Found {
        let t = tokens[r].as_deref().filter(|t| t.len() >= 2)?;
        let r = r as u32;
        Some(match split(&rank_of, t, r, parts) {
            Ok((left, right)) => Ok((r, left, right)),
            Err(parts) => Err(RecoverError::Unreachable { rank: r, parts }),
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
                s.spawn(move || {
                    let mut parts = Vec::new();
                    (k..tokens.len())
                        .step_by(threads)
                        .map(|r| split_one(r, &mut parts))
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
    (0..tokens.len())
        .filter_map(|r| strides[r % threads].next().expect("one result per token"))
        .collect()
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

    fn byte_tokens() -> Vec<Option<Vec<u8>>> {
        (0..=255u8).map(|b| Some(vec![b])).collect()
    }

    #[test]
    fn recovers_the_pair_each_token_was_made_from() {
        let mut tokens = byte_tokens();
        tokens.push(Some(b"ab".to_vec())); // 256
        tokens.push(Some(b"abc".to_vec())); // 257
        tokens.push(None); // 258: a special token's rank
        tokens.push(Some(b"abcab".to_vec())); // 259
        let merges = recover_merges(&tokens).unwrap();
        assert_eq!(merges, vec![(256, 97, 98), (257, 256, 99), (259, 257, 256)]);
    }

    #[test]
    fn unreachable_token_is_an_error() {
        let mut tokens = byte_tokens();
        tokens.push(Some(b"abc".to_vec())); // no "ab" or "bc" below it
        assert_eq!(
            recover_merges(&tokens),
            Err(RecoverError::Unreachable {
                rank: 256,
                parts: 3
            })
        );
    }

    #[test]
    fn large_vocabularies_split_on_threads_and_report_the_first_failure() {
        // Every pair of bytes not starting with 0: 65280 tokens, enough for threads.
        let mut tokens = byte_tokens();
        for a in 1..=255u8 {
            for b in 0..=255u8 {
                tokens.push(Some(vec![a, b]));
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
        tokens.push(Some(vec![0, 0, 0]));
        tokens.push(Some(vec![0, 1, 0]));
        assert_eq!(
            recover_merges(&tokens),
            Err(RecoverError::Unreachable {
                rank: first,
                parts: 3
            })
        );
    }

    #[test]
    fn missing_byte_is_an_error() {
        let mut tokens = byte_tokens();
        tokens[7] = None;
        assert_eq!(recover_merges(&tokens), Err(RecoverError::MissingByte(7)));
    }
}
