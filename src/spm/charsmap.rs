//! The precompiled character map of a `NormalizerSpec`: sentencepiece's
//! normalization rules (NFKC and friends) compiled into a Darts-clone
//! double-array trie over UTF-8 bytes, plus a block of NUL-terminated
//! replacement strings.
//!
//! Blob layout (little endian): `u32 trie_size`, `trie_size` bytes of trie units
//! (one `u32` each), then the replacement strings. A trie leaf's value is the
//! offset of its replacement string in that last block.
//!
//! A unit packs, from the low bits: an 8-bit label (the byte that led here; bit 31
//! is also part of the label so that value units never match a label), a
//! has-leaf flag (bit 8), a shift flag (bit 9) and the offset to the children
//! (bits 10–31, shifted left by 8 when the flag is set). Walking a byte `b` from
//! node `n` goes to `n ^ offset(unit[n]) ^ b` and is valid when that unit's label
//! is `b`. A node with a leaf holds the value in the unit at `n ^ offset`.

/// sentencepiece keeps at most this many prefix matches per position, so the
/// longest rule it can apply is the 32nd shortest that matches.
const MAX_MATCHES: usize = 32;

#[derive(Debug, Clone)]
pub struct CharsMap {
    units: Vec<u32>,
    replacements: Vec<u8>,
}

fn has_leaf(unit: u32) -> bool {
    (unit >> 8) & 1 == 1
}

fn value(unit: u32) -> usize {
    (unit & 0x7fff_ffff) as usize
}

fn label(unit: u32) -> u32 {
    unit & (0x8000_0000 | 0xff)
}

fn offset(unit: u32) -> usize {
    ((unit >> 10) << ((unit & (1 << 9)) >> 6)) as usize
}

impl CharsMap {
    /// Splits a `precompiled_charsmap` blob into trie and replacement strings.
    pub fn from_blob(blob: &[u8]) -> Result<CharsMap, String> {
        if blob.len() <= 4 {
            return Err("the precompiled charsmap is shorter than its 4-byte header".into());
        }
        let trie_size = u32::from_le_bytes(blob[..4].try_into().unwrap()) as usize;
        if trie_size > blob.len() - 4 {
            let why = format!("its trie claims {trie_size} bytes of {}", blob.len() - 4);
            return Err(format!("the precompiled charsmap is broken: {why}"));
        }
        let trie = &blob[4..4 + trie_size];
        let units = trie
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()));
        Ok(CharsMap {
            units: units.collect(),
            replacements: blob[4 + trie_size..].to_vec(),
        })
    }

    /// The longest rule matching a prefix of `input`: (bytes matched,
    /// replacement). `None` when no rule applies (the character stays as is).
    ///
    /// With rules "a" -> "x" and "ab" -> "y", `"abc"` gives `(2, "y")`.
    pub fn longest_match(&self, input: &[u8]) -> Option<(usize, &[u8])> {
        let unit = |i: usize| self.units.get(i).copied();
        let mut node = offset(unit(0)?);
        let mut best = None;
        let mut matches = 0;
        for (i, &b) in input.iter().enumerate() {
            node ^= b as usize;
            // A corrupt trie may point outside itself: that ends the walk.
            let Some(u) = unit(node).filter(|&u| label(u) == u32::from(b)) else {
                break;
            };
            node ^= offset(u);
            if has_leaf(u) {
                if matches < MAX_MATCHES {
                    best = unit(node).map(|v| (i + 1, value(v))).or(best);
                }
                matches += 1;
            }
        }
        let (len, at) = best?;
        let rest = self.replacements.get(at..).unwrap_or(&[]);
        let end = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
        Some((len, &rest[..end]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-built trie with the rules "a" -> "x" and "ab" -> "y":
    /// root base 256; 'a' at 256^0x61 = 353 with base 352 (its value unit there);
    /// 'b' at 352^0x62 = 258 with base 259 (its value unit there).
    fn two_rules() -> CharsMap {
        let mut units = vec![0u32; 354];
        units[0] = 256 << 10;
        units[353] = 0x61 | (1 << 8) | (1 << 10);
        units[352] = 1 << 31; // "x" at offset 0
        units[258] = 0x62 | (1 << 8) | (1 << 10);
        units[259] = (1 << 31) | 2; // "y" at offset 2
        let mut blob = ((units.len() * 4) as u32).to_le_bytes().to_vec();
        units
            .iter()
            .for_each(|u| blob.extend_from_slice(&u.to_le_bytes()));
        blob.extend_from_slice(b"x\0y\0");
        CharsMap::from_blob(&blob).unwrap()
    }

    #[test]
    fn the_longest_matching_rule_wins() {
        let map = two_rules();
        assert_eq!(map.longest_match(b"abc"), Some((2, &b"y"[..])));
        assert_eq!(map.longest_match(b"ac"), Some((1, &b"x"[..])));
        assert_eq!(map.longest_match(b"a"), Some((1, &b"x"[..])));
    }

    #[test]
    fn no_rule_means_no_match() {
        let map = two_rules();
        assert_eq!(map.longest_match(b"ba"), None);
        assert_eq!(map.longest_match(b""), None);
    }

    #[test]
    fn a_blob_whose_trie_overruns_it_is_an_error() {
        assert!(CharsMap::from_blob(&[1, 0, 0]).is_err());
        assert!(CharsMap::from_blob(&[9, 0, 0, 0, 1, 2]).is_err());
    }
}
