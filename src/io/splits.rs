//! Which split a shard folder's document goes to under `val_fraction`
//! (`shards/writer.py`'s `in_val`): document `i` goes to val when the 8-byte BLAKE2b
//! digest (BLAKE2b with an 8-byte output, as Python's `hashlib.blake2b(...,
//! digest_size=8)`) of `"{seed}:{i}"`, read as a little-endian integer, is below
//! `fraction * 2**64`. The same choice as Python's, for a batch at a time: one Python
//! digest per document was half of a folder's time on short documents.

use std::io::Write;

/// Whether each document of `indices` goes to val. `prefix`: the bytes of
/// `"{seed}:"`; `fraction`: between 0 and 1.
pub fn val_choices(prefix: &[u8], indices: &[u64], fraction: f64) -> Vec<bool> {
    // Python compares the int with the float exactly: x < t holds for an integer x
    // exactly when x < ceil(t) (t = fraction * 2^64 is exact: a power of two times a
    // float).
    let threshold = fraction * 2f64.powi(64);
    let bound: u128 = if threshold <= 0.0 {
        0
    } else {
        threshold.ceil() as u128
    };
    let mut params = blake2b_simd::Params::new();
    params.hash_length(8);
    let mut text = Vec::with_capacity(prefix.len() + 20);
    indices
        .iter()
        .map(|&i| {
            text.clear();
            text.extend_from_slice(prefix);
            write!(text, "{i}").expect("a Vec takes every write");
            let digest = params.hash(&text);
            let value = u64::from_le_bytes(digest.as_bytes().try_into().expect("8 bytes"));
            u128::from(value) < bound
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_pythons_blake2b_of_eight_bytes() {
        // hashlib.blake2b(b"0:0", digest_size=8).digest() == bytes.fromhex("d56c9c7e6769d062"):
        // 7120306904099482837 little-endian, 0.38599 of 2^64.
        let digest = blake2b_simd::Params::new().hash_length(8).hash(b"0:0");
        assert_eq!(
            digest.as_bytes(),
            [0xd5, 0x6c, 0x9c, 0x7e, 0x67, 0x69, 0xd0, 0x62]
        );
        let value = 7120306904099482837u64;
        // Exact at the boundary, as Python's int < float: the nearest float below the
        // value (it rounds down, by 213) takes it out, the next float up takes it in.
        let below = value as f64;
        assert_eq!(below as u64, value - 213);
        assert_eq!(val_choices(b"0:", &[0], below / 2f64.powi(64)), [false]);
        assert_eq!(
            val_choices(b"0:", &[0], (below + 1024.0) / 2f64.powi(64)),
            [true]
        );
        assert_eq!(val_choices(b"0:", &[0], 0.3861), [true]);
        assert_eq!(val_choices(b"0:", &[0], 0.3859), [false]);
    }

    #[test]
    fn no_fraction_takes_nothing_and_all_of_it_takes_everything() {
        let indices: Vec<u64> = (0..1000).collect();
        assert!(val_choices(b"7:", &indices, 0.0).iter().all(|&v| !v));
        assert!(val_choices(b"7:", &indices, 1.0).iter().all(|&v| v));
        let some = val_choices(b"7:", &indices, 0.25);
        let taken = some.iter().filter(|&&v| v).count();
        assert!((180..320).contains(&taken), "{taken}");
    }
}
