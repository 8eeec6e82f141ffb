//! Vocabularies given as ranks only (tiktoken's `.tiktoken` files): recovering the
//! merges, so they can be encoded like any merges-based tokenizer.
//!
//! minbpe's `recover_merges` idea: a token of rank `r` was made by merging two tokens,
//! and which two is found by running byte-pair encoding on the token's own bytes with
//! only the ranks below `r`: it stops at exactly two parts. (If ranks only grow along
//! merges — true of every BPE-trained vocabulary — this is exactly how tiktoken's
//! rank-based encoder splits text, so both encoders agree.)

use rustc_hash::FxHashMap;

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
    let mut rank_of: FxHashMap<&[u8], u32> = FxHashMap::default();
    for (r, t) in tokens.iter().enumerate() {
        if let Some(t) = t {
            if rank_of.insert(t.as_slice(), r as u32).is_some() {
                return Err(RecoverError::Duplicate { rank: r as u32 });
            }
        }
    }
    for b in 0..=255u8 {
        if !rank_of.contains_key([b].as_slice()) {
            return Err(RecoverError::MissingByte(b));
        }
    }
    let mut merges = Vec::new();
    for (r, t) in tokens.iter().enumerate() {
        let Some(t) = t else { continue };
        if t.len() < 2 {
            continue;
        }
        let r = r as u32;
        // Part boundaries: parts are t[bounds[i]..bounds[i+1]].
        let mut bounds: Vec<usize> = (0..=t.len()).collect();
        loop {
            let mut best: Option<(u32, usize)> = None;
            for i in 0..bounds.len() - 2 {
                if let Some(&pr) = rank_of.get(&t[bounds[i]..bounds[i + 2]]) {
                    if pr < r && best.is_none_or(|(br, _)| pr < br) {
                        best = Some((pr, i));
                    }
                }
            }
            match best {
                Some((_, i)) => {
                    bounds.remove(i + 1);
                }
                None => break,
            }
        }
        if bounds.len() != 3 {
            return Err(RecoverError::Unreachable {
                rank: r,
                parts: bounds.len() - 1,
            });
        }
        merges.push((r, rank_of[&t[..bounds[1]]], rank_of[&t[bounds[1]..]]));
    }
    Ok(merges)
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
    fn missing_byte_is_an_error() {
        let mut tokens = byte_tokens();
        tokens[7] = None;
        assert_eq!(recover_merges(&tokens), Err(RecoverError::MissingByte(7)));
    }
}
