//! The merge loop's pair table: pair → its count and the words it occurs in.
//!
//! Why not a `HashMap`: applying a merge updates a few hundred pairs (the merged
//! pair's neighbours), each a random place in a table of a million pairs, and with
//! hashbrown each update was a cache and TLB miss waited on before the next began:
//! 0.6 s of a 3 s merge loop. Here a pair's slot is known from the pair alone, so the
//! caller asks for the slots of the pairs a few updates ahead ([`PairTable::prefetch`])
//! and the misses overlap. Slots are small (key, count, list index: 24 bytes); the
//! word lists, read only when a pair is merged, sit in a slab of their own.
//!
//! Open addressing with linear probing, at most 3/4 full; a removal shifts the slots
//! after it back (no tombstones), so lookups stay short however many pairs come and go.

use smallvec::SmallVec;

/// Two symbol ids.
pub type Pair = (u32, u32);

/// A pair's words, ascending. Up to 4 are kept inline: most of the million pairs a big
/// training makes occur in a few words.
pub type WordList = SmallVec<[u32; WORDS_INLINE]>;
pub const WORDS_INLINE: usize = 4;

/// No pair: (u32::MAX, u32::MAX) is never one (ids are below the vocabulary's size).
const EMPTY: u64 = u64::MAX;
/// A slot with no word list (a pair only ever counted down, or one whose list was taken).
const NO_LIST: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Slot {
    key: u64,
    count: i64,
    list: u32,
}

const VACANT: Slot = Slot {
    key: EMPTY,
    count: 0,
    list: NO_LIST,
};

#[inline]
fn key((a, b): Pair) -> u64 {
    (a as u64) << 32 | b as u64
}

/// Pair → (count, words).
pub struct PairTable {
    /// A power of two of them.
    slots: Vec<Slot>,
    /// 64 minus log2 of the number of slots: a key's home is its hash's top bits.
    shift: u32,
    len: usize,
    lists: Vec<WordList>,
    /// Indices of `lists` free for reuse.
    free: Vec<u32>,
}

impl Default for PairTable {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl PairTable {
    /// A table that holds `n` pairs before it grows.
    pub fn with_capacity(n: usize) -> Self {
        let slots = (n.saturating_mul(4) / 3 + 1).next_power_of_two().max(16);
        Self {
            slots: vec![VACANT; slots],
            shift: 64 - slots.trailing_zeros(),
            len: 0,
            lists: Vec::new(),
            free: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// Asks the CPU for `pair`'s home slot (a hint: no effect on results).
    #[inline]
    pub fn prefetch(&self, pair: Pair) {
        crate::packed::prefetch(self.slots.get(self.home(key(pair))));
    }

    /// The slot holding `key`, or the empty slot where it would go.
    #[inline]
    fn find(&self, key: u64) -> Result<usize, usize> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let slot = &self.slots[i];
            if slot.key == key {
                return Ok(i);
            }
            if slot.key == EMPTY {
                return Err(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// How often `pair` occurs (0 when it is not in the table).
    pub fn count(&self, pair: Pair) -> i64 {
        self.find(key(pair)).map_or(0, |i| self.slots[i].count)
    }

    /// Adds `delta` to `pair`'s count; a pair not in the table comes in with no words.
    /// Returns the count after.
    #[inline]
    pub fn add(&mut self, pair: Pair, delta: i64) -> i64 {
        let k = key(pair);
        match self.find(k) {
            Ok(i) => {
                self.slots[i].count += delta;
                self.slots[i].count
            }
            Err(i) => {
                self.put(i, k, delta, NO_LIST);
                delta
            }
        }
    }

    /// Adds `delta` to `pair`'s count and, when the count is then above zero, makes
    /// `words()` its words and returns the count; else removes the pair and returns
    /// None. (A pair not in the table counts 0 before.)
    #[inline]
    pub fn add_with_words(
        &mut self,
        pair: Pair,
        delta: i64,
        words: impl FnOnce() -> WordList,
    ) -> Option<i64> {
        let k = key(pair);
        match self.find(k) {
            Ok(i) => {
                let count = self.slots[i].count + delta;
                if count > 0 {
                    self.slots[i].count = count;
                    let list = self.slots[i].list;
                    if list == NO_LIST {
                        self.slots[i].list = self.new_list(words());
                    } else {
                        self.lists[list as usize] = words();
                    }
                    Some(count)
                } else {
                    self.remove_slot(i);
                    None
                }
            }
            Err(i) if delta > 0 => {
                let list = self.new_list(words());
                self.put(i, k, delta, list);
                Some(delta)
            }
            Err(_) => None,
        }
    }

    /// Puts `pair` in, counted `count` times, in `words`; it must not be in yet.
    pub fn insert(&mut self, pair: Pair, count: i64, words: WordList) {
        let k = key(pair);
        let i = self.find(k).expect_err("a pair inserted once");
        let list = self.new_list(words);
        self.put(i, k, count, list);
    }

    /// Takes `pair` out; its count and words.
    pub fn remove(&mut self, pair: Pair) -> Option<(i64, WordList)> {
        let i = self.find(key(pair)).ok()?;
        Some(self.remove_slot(i))
    }

    /// Takes the pair in slot `i` out; its count and words.
    fn remove_slot(&mut self, i: usize) -> (i64, WordList) {
        let Slot { count, list, .. } = self.slots[i];
        self.remove_at(i);
        (count, self.take_list(list))
    }

    /// Every pair and its count, in no particular order.
    pub fn counts(&self) -> impl Iterator<Item = (Pair, i64)> + '_ {
        self.slots
            .iter()
            .filter(|s| s.key != EMPTY)
            .map(|s| (((s.key >> 32) as u32, s.key as u32), s.count))
    }

    fn new_list(&mut self, words: WordList) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.lists[i as usize] = words;
                i
            }
            None => {
                self.lists.push(words);
                (self.lists.len() - 1) as u32
            }
        }
    }

    fn take_list(&mut self, list: u32) -> WordList {
        if list == NO_LIST {
            return WordList::new();
        }
        self.free.push(list);
        std::mem::take(&mut self.lists[list as usize])
    }

    /// Fills the empty slot `i` (where `key` probes to), growing when 3/4 full.
    fn put(&mut self, i: usize, key: u64, count: i64, list: u32) {
        self.slots[i] = Slot { key, count, list };
        self.len += 1;
        if self.len * 4 > self.slots.len() * 3 {
            self.grow();
        }
    }

    fn grow(&mut self) {
        let doubled = vec![VACANT; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, doubled);
        self.shift -= 1;
        for slot in old.into_iter().filter(|s| s.key != EMPTY) {
            let i = self.find(slot.key).expect_err("keys are distinct");
            self.slots[i] = slot;
        }
    }

    /// Empties slot `i`, moving back the slots after it that probed past it
    /// (backward-shift deletion: every key stays reachable from its home).
    fn remove_at(&mut self, mut i: usize) {
        let mask = self.slots.len() - 1;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let key = self.slots[j].key;
            if key == EMPTY {
                break;
            }
            let home = self.home(key);
            // Slot j may move to i when its home is not cyclically within (i, j].
            let stays = if i <= j {
                i < home && home <= j
            } else {
                i < home || home <= j
            };
            if !stays {
                self.slots[i] = self.slots[j];
                i = j;
            }
        }
        self.slots[i] = VACANT;
        self.len -= 1;
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

    #[test]
    fn agrees_with_a_hash_map_through_adds_removes_and_growth() {
        let mut table = PairTable::with_capacity(4);
        let mut model: HashMap<Pair, (i64, Vec<u32>)> = HashMap::new();
        let mut state = 0x2545_F491_4F6C_DD1D;
        for step in 0..200_000u32 {
            // Few distinct pairs (clusters and wrap-around), with removals throughout.
            let r = next(&mut state);
            let pair = ((r % 61) as u32, ((r >> 8) % 67) as u32);
            let delta = (r >> 20) as i64 % 7 - 2;
            match r >> 60 {
                0..=5 => {
                    let after = table.add(pair, delta);
                    let e = model.entry(pair).or_insert((0, Vec::new()));
                    e.0 += delta;
                    assert_eq!(after, e.0);
                }
                6..=11 => {
                    let got = table.add_with_words(pair, delta, || WordList::from_slice(&[step]));
                    let before = model.get(&pair).map_or(0, |e| e.0);
                    if before + delta > 0 {
                        model.insert(pair, (before + delta, vec![step]));
                        assert_eq!(got, Some(before + delta));
                    } else {
                        model.remove(&pair);
                        assert_eq!(got, None);
                    }
                }
                _ => {
                    let got = table.remove(pair).map(|(c, w)| (c, w.to_vec()));
                    assert_eq!(got, model.remove(&pair));
                }
            }
            assert_eq!(table.len(), model.len());
            if step % 4096 == 0 {
                let mut counts: Vec<_> = table.counts().collect();
                let mut want: Vec<_> = model.iter().map(|(&p, e)| (p, e.0)).collect();
                counts.sort_unstable();
                want.sort_unstable();
                assert_eq!(counts, want);
            }
        }
        for (&pair, e) in &model {
            assert_eq!(table.count(pair), e.0);
        }
        assert!(table.slots.len() > 16, "the table grew");
    }

    #[test]
    fn a_pair_not_in_the_table_counts_zero_and_removes_to_none() {
        let mut table = PairTable::default();
        assert_eq!(table.count((1, 2)), 0);
        assert!(table.remove((1, 2)).is_none());
        table.insert((1, 2), 5, WordList::from_slice(&[3, 4]));
        assert_eq!(table.count((1, 2)), 5);
        assert_eq!(table.add_with_words((1, 2), -5, WordList::new), None);
        assert_eq!(table.len(), 0);
        assert_eq!(table.add_with_words((7, 8), 0, WordList::new), None);
        assert_eq!(table.len(), 0);
    }
}
