//! Short byte strings packed into one integer: hash-map keys that hash and compare
//! without a loop or a call to memcmp. Pieces of text (pre-tokens) are nearly always
//! this short, and looking them up is the hot path of both counting (training) and
//! the encoder's piece cache.

/// Longest byte string that packs.
pub const MAX_PACKED: usize = 15;

/// `bytes[start..end]` (at most [`MAX_PACKED`] bytes) and its length, in one integer:
/// the bytes little-endian in the low 15 bytes, the length in the top byte, so every
/// byte string has its own key.
#[inline]
pub fn packed(bytes: &[u8], start: usize, end: usize) -> u128 {
    let len = end - start;
    debug_assert!(len <= MAX_PACKED);
    let mut buf = [0u8; 16];
    if start + 16 <= bytes.len() {
        // One unaligned load, then clear what lies past the piece.
        buf.copy_from_slice(&bytes[start..start + 16]);
        let mask = (1u128 << (8 * len)) - 1;
        return (u128::from_le_bytes(buf) & mask) | ((len as u128) << 120);
    }
    buf[..len].copy_from_slice(&bytes[start..end]);
    buf[15] = len as u8;
    u128::from_le_bytes(buf)
}

/// The byte string of a key made by [`packed`].
pub fn unpacked(key: u128) -> Vec<u8> {
    let len = (key >> 120) as usize;
    key.to_le_bytes()[..len].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_the_bytes_and_length() {
        let text = b"ab\0\0cdefghijklmnopqrstuvwxyz0123456789";
        for start in 0..text.len() {
            for end in start..(start + MAX_PACKED + 1).min(text.len() + 1) {
                // Same key whether the 16-byte load fits (inside the text) or not (a copy).
                let key = packed(text, start, end);
                assert_eq!(key, packed(&text[start..end], 0, end - start));
                assert_eq!(unpacked(key), &text[start..end]);
            }
        }
        // Trailing zero bytes still make a different key.
        assert_ne!(packed(text, 0, 2), packed(text, 0, 3));
        assert_ne!(packed(text, 0, 3), packed(text, 0, 4));
        assert_ne!(packed(b"ab", 0, 2), packed(b"ba", 0, 2));
        assert_eq!(unpacked(packed(b"", 0, 0)), b"");
    }
}
