//! A hash table from byte strings of any length to small values, for the piece cache's
//! pieces too long to pack into one integer ([`crate::packed`]): 16 bytes or more.
//!
//! Why not a `HashMap<Box<[u8]>, V>`: a lookup there reads the control bytes, then the
//! bucket, then the boxed key, each at an address known only from the one before, and
//! on multilingual text (Cyrillic, Greek and Arabic words are 16 bytes and more in
//! UTF-8) those three misses in a row were a fifth of a warm encode. Here a slot is
//! one cache line holding the hash, the value and the key's first
//! [`INLINE`] bytes, so a lookup of a key that short reads one line, whose address
//! follows from the hash: callers prefetch it ahead ([`BytesMap::prefetch`]). Longer
//! keys keep the rest of their bytes in one arena, read only when the hash, the
//! length and the first bytes already match.

use crate::pages::HugeSlice;

/// Key bytes held in the slot itself.
pub const INLINE: usize = 40;

/// One slot, one cache line: `len == 0` marks an empty one (keys are never empty).
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Slot<V> {
    hash: u64,
    len: u32,
    /// Where the key's bytes past [`INLINE`] begin in the arena.
    rest: u32,
    value: V,
    head: [u8; INLINE],
}

/// Byte strings (not empty, under 4 GiB in all) -> `V`, linear probing, at most 3/4 full.
#[derive(Debug, Clone)]
pub struct BytesMap<V: Copy> {
    slots: HugeSlice<Slot<V>>,
    /// The keys' bytes past their first [`INLINE`], end to end.
    rest: Vec<u8>,
    len: usize,
    /// The bytes of all keys.
    key_bytes: usize,
}

/// Slots a table starts with (64 KB).
const FIRST_SLOTS: usize = 1 << 10;

/// The hash of a key: 16 bytes at a time, each pair of words mixed into the state by
/// one 64×64→128-bit multiply folded in half; the last 16 bytes (overlapping the
/// ones before) for the tail.
#[inline]
pub fn bytes_hash(bytes: &[u8]) -> u64 {
    const K0: u64 = 0x9E37_79B9_7F4A_7C15;
    const K1: u64 = 0xD6E8_FEB8_6659_FD93;
    #[inline(always)]
    fn mix(a: u64, b: u64) -> u64 {
        let r = u128::from(a) * u128::from(b);
        (r as u64) ^ ((r >> 64) as u64)
    }
    let word = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap());
    let n = bytes.len();
    let mut h = (n as u64).wrapping_mul(K0);
    if n < 16 {
        let mut pad = [0u8; 16];
        pad[..n].copy_from_slice(bytes);
        let a = u64::from_le_bytes(pad[..8].try_into().unwrap());
        let b = u64::from_le_bytes(pad[8..].try_into().unwrap());
        return mix(a ^ h ^ K1, b ^ K0);
    }
    let mut i = 0;
    while i + 16 < n {
        h = mix(word(i) ^ h ^ K1, word(i + 8) ^ K0);
        i += 16;
    }
    mix(word(n - 16) ^ h ^ K1, word(n - 8) ^ K0)
}

impl<V: Copy + Default> Default for BytesMap<V> {
    fn default() -> Self {
        Self {
            slots: HugeSlice::filled(FIRST_SLOTS, Self::empty()),
            rest: Vec::new(),
            len: 0,
            key_bytes: 0,
        }
    }
}

impl<V: Copy + Default> BytesMap<V> {
    fn empty() -> Slot<V> {
        Slot {
            hash: 0,
            len: 0,
            rest: 0,
            value: V::default(),
            head: [0; INLINE],
        }
    }

    #[inline]
    fn home(&self, hash: u64) -> usize {
        hash as usize & (self.slots.len() - 1)
    }

    /// Asks the CPU to bring in the line a lookup of `hash` reads first. A hint: no
    /// effect on results.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        crate::packed::prefetch(self.slots.get(self.home(hash)));
    }

    /// Whether `slot` holds `key` (of hash `hash`).
    #[inline]
    fn holds(&self, slot: &Slot<V>, key: &[u8], hash: u64) -> bool {
        if slot.hash != hash || slot.len as usize != key.len() {
            return false;
        }
        let head = key.len().min(INLINE);
        slot.head[..head] == key[..head]
            && (key.len() <= INLINE || {
                let at = slot.rest as usize;
                self.rest[at..at + key.len() - INLINE] == key[INLINE..]
            })
    }

    /// Where `key` is, or else the empty slot where it would go.
    #[inline]
    fn find(&self, key: &[u8], hash: u64) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = hash as usize & mask;
        loop {
            let slot = &self.slots[i];
            if slot.len == 0 || self.holds(slot, key, hash) {
                return i;
            }
            i = (i + 1) & mask;
        }
    }

    /// The value of `key`, whose hash is `hash` ([`bytes_hash`]).
    #[inline]
    pub fn get(&self, key: &[u8], hash: u64) -> Option<V> {
        let slot = &self.slots[self.find(key, hash)];
        (slot.len != 0).then_some(slot.value)
    }

    /// Sets the value of `key` (not empty), whose hash is `hash`.
    pub fn insert(&mut self, key: &[u8], hash: u64, value: V) {
        assert!(!key.is_empty(), "BytesMap keys are not empty");
        let mut i = self.find(key, hash);
        if self.slots[i].len == 0 {
            if (self.len + 1) * 4 > self.slots.len() * 3 {
                self.grow();
                i = self.find(key, hash);
            }
            let head = key.len().min(INLINE);
            let mut slot = Slot {
                hash,
                len: u32::try_from(key.len()).expect("BytesMap key under 4 GiB"),
                rest: u32::try_from(self.rest.len()).expect("BytesMap keys under 4 GiB"),
                value,
                head: [0; INLINE],
            };
            slot.head[..head].copy_from_slice(&key[..head]);
            self.rest.extend_from_slice(&key[head..]);
            self.slots[i] = slot;
            self.len += 1;
            self.key_bytes += key.len();
        }
        self.slots[i].value = value;
    }

    #[cold]
    fn grow(&mut self) {
        let bigger = HugeSlice::filled(self.slots.len() * 2, Self::empty());
        let old = std::mem::replace(&mut self.slots, bigger);
        let mask = self.slots.len() - 1;
        for &slot in old.iter().filter(|s| s.len != 0) {
            let mut i = slot.hash as usize & mask;
            while self.slots[i].len != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = slot;
        }
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes of all keys.
    pub fn key_bytes(&self) -> usize {
        self.key_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A small generator, so the test needs no dependency and runs the same each time.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// A key of 1 to 120 bytes from a small alphabet: many keys share their first
    /// [`INLINE`] bytes and differ only past them, or only in length.
    fn key(state: &mut u64) -> Vec<u8> {
        let r = next(state);
        let len = 1 + (r % 120) as usize;
        let tail = (r >> 8) % 5;
        let mut k = vec![b'a'; len];
        k[len - 1] = b'a' + tail as u8;
        if (r >> 16).is_multiple_of(3) {
            k[len / 2] = b'b';
        }
        k
    }

    #[test]
    fn agrees_with_a_hash_map_through_inserts_and_growth() {
        let mut table: BytesMap<u64> = BytesMap::default();
        let mut model: HashMap<Vec<u8>, u64> = HashMap::new();
        let mut state = 0x2545_F491_4F6C_DD1D;
        for step in 0..50_000u64 {
            let k = key(&mut state);
            let hash = bytes_hash(&k);
            assert_eq!(table.get(&k, hash), model.get(&k).copied(), "{k:?}");
            if !next(&mut state).is_multiple_of(3) {
                table.insert(&k, hash, step);
                model.insert(k, step);
            }
        }
        assert_eq!(table.len(), model.len());
        assert!(table.len() > 1_000, "grew past its first slots");
        assert_eq!(table.key_bytes(), model.keys().map(Vec::len).sum::<usize>());
        for (k, &v) in &model {
            assert_eq!(table.get(k, bytes_hash(k)), Some(v));
        }
        // Absent keys: one byte more or less, or one byte changed past the slot's.
        let mut absent = vec![b'a'; INLINE + 7];
        absent.push(b'z');
        assert_eq!(table.get(&absent, bytes_hash(&absent)), None);
    }

    #[test]
    fn keys_that_differ_only_past_the_slot_or_only_by_hash_collision_stay_apart() {
        let mut table: BytesMap<u32> = BytesMap::default();
        let long = |last: u8| {
            let mut k = vec![b'x'; 100];
            k[99] = last;
            k
        };
        // The same hash for all: every key probes the same run of slots.
        for i in 0..200u32 {
            table.insert(&long(i as u8), 7, i);
        }
        for i in 0..200u32 {
            assert_eq!(table.get(&long(i as u8), 7), Some(i));
        }
        assert_eq!(table.get(&long(222), 7), None);
        assert_eq!(table.get(&[b'x'; 99], 7), None, "a prefix is another key");
        assert_eq!(table.len(), 200);
    }

    #[test]
    fn the_hash_reads_every_byte() {
        let base = vec![7u8; 77];
        let h = bytes_hash(&base);
        for i in 0..base.len() {
            let mut other = base.clone();
            other[i] ^= 1;
            assert_ne!(bytes_hash(&other), h, "byte {i}");
        }
        assert_ne!(bytes_hash(&base[..76]), h, "and the length");
        assert_ne!(bytes_hash(b"ab"), bytes_hash(b"ab\0"));
    }
}
