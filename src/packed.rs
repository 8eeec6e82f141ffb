//! Short byte strings packed into one integer: hash-map keys that hash and compare
//! without a loop or a call to memcmp. Pieces of text (pre-tokens) are nearly always
//! this short, and looking them up is the hot path of both counting (training) and
//! the encoder's piece cache.

use crate::pages::HugeSlice;

/// One slot of [`PackedMap`]: a packed key (0: empty; a key made by [`packed`] has its
/// length in the top byte, so only the empty string packs to 0, and it is never a
/// key) and its value. 32 bytes, aligned: two slots per cache line, none straddling two.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(32))]
struct Slot<V> {
    key: u128,
    value: V,
}

/// An open-addressing table from packed keys to small values, linear probing: the
/// encoder's piece cache and the pre-token counter's tables.
///
/// Why not a `HashMap`: on natural text most lookups are of a few thousand frequent
/// pieces (in the CPU cache), but the Zipf tail (about 1 lookup in 5 on English) is a
/// random access to memory, and perf put half of a warm encode's time on those
/// stalls. Here a lookup usually touches one cache line (hashbrown's touches two: the
/// control bytes and the bucket), and its address is known from the key alone, so
/// callers prefetch it a few pieces ahead ([`Self::prefetch`]) and the stall overlaps
/// with pre-tokenizing the pieces in between.
#[derive(Debug, Clone)]
pub struct PackedMap<V: Copy> {
    slots: HugeSlice<Slot<V>>,
    len: usize,
    /// Below this many slots the table doubles at half full, from it on at 3/4
    /// ([`PackedMap::sparse_below`]; 0 for a counter's table, always 3/4).
    sparse_below: usize,
}

/// Pieces a caller finds between prefetching a piece's line ([`PackedMap::prefetch`])
/// and reading it: enough pre-tokenizing to cover a memory access.
pub const PREFETCH_AHEAD: usize = 16;

/// Slots a table starts with (2^12: 128 KB).
const FIRST_SLOTS: usize = 1 << 12;

impl<V: Copy + Default> Default for PackedMap<V> {
    fn default() -> Self {
        Self {
            slots: HugeSlice::filled(FIRST_SLOTS, Slot::default()),
            len: 0,
            sparse_below: 0,
        }
    }
}

/// The hash of a packed key: both halves mixed by multiplication, high bits folded
/// down (the table indexes by the low bits).
#[inline]
pub fn key_hash(key: u128) -> u64 {
    let h =
        ((key as u64) ^ ((key >> 64) as u64).rotate_left(23)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^ (h >> 32)
}

impl<V: Copy + Default> PackedMap<V> {
    /// A table that doubles at half full until it has `slots` slots, and then fills
    /// to 3/4: the encoder's piece cache, where a key not in its home line (a lookup
    /// of it leaves the batch's loop) cost a warm English pass 3% of its pieces and a
    /// fifth of its mispredicts at up to 3/4 full; at half, a third as many. Past
    /// `slots` it fills up as densely as a counter's, so its largest table stays the
    /// size it was.
    pub fn sparse_below(slots: usize) -> Self {
        Self {
            sparse_below: slots,
            ..Self::default()
        }
    }

    #[inline]
    fn home(&self, hash: u64) -> usize {
        // The first slot of a line (two slots a line): a key one slot past its home
        // is then in the line a prefetch of its home brought in.
        hash as usize & self.line_mask()
    }

    /// The first slot of the last line: masks a hash to an even slot index.
    #[inline(always)]
    fn line_mask(&self) -> usize {
        (self.slots.len() - 1) & !1
    }

    /// Asks the CPU to bring in the line a lookup of `hash` will read first. A hint:
    /// no effect on results.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        self.lines().prefetch(hash);
    }

    /// Where `key` is, or else the empty slot where it would go (linear probing; the
    /// table is never full).
    #[inline]
    fn find(&self, key: u128, hash: u64) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = self.home(hash);
        while self.slots[i].key != key && self.slots[i].key != 0 {
            i = (i + 1) & mask;
        }
        i
    }

    /// [`PackedMap::get`] of a key in its home line (its home slot or the next), else
    /// None: [`Lines::get_near`].
    #[inline(always)]
    pub fn get_near(&self, key: u128, hash: u64) -> Option<V> {
        self.lines().get_near(key, hash)
    }

    /// The table's lines, for a loop that prefetches or probes many keys and
    /// writes elsewhere: their address and mask, read once (through `&self`, a
    /// write to a batch's keys or ids might have changed them, so the loop reloaded
    /// both a piece).
    #[inline(always)]
    pub fn lines(&self) -> Lines<'_, V> {
        debug_assert!(self.slots.len().is_power_of_two() && self.slots.len() >= 2);
        Lines {
            base: self.slots.as_ptr(),
            line_mask: self.line_mask(),
            table: std::marker::PhantomData,
        }
    }

    #[inline]
    pub fn get(&self, key: u128, hash: u64) -> Option<V> {
        let slot = &self.slots[self.find(key, hash)];
        (slot.key == key).then_some(slot.value)
    }

    /// [`PackedMap::get`], and a key found past its home line is brought into it: it
    /// trades slots with the key in the line's first slot if that one's home is an
    /// earlier line (it is never found near here), else with the key in the second.
    /// Either way both stay where a lookup finds them: the keys from a line on to the
    /// first empty slot are one run, and the key moved out stays in it, further from
    /// its home (so the choice of slot is a preference only, and a hash other than
    /// [`key_hash`] cannot make it wrong). The key looked up now is likely looked up
    /// again (text is Zipfian), and [`PackedMap::get_near`] finds keys in their home
    /// line only: measured before this (gpt2, 20 MB of English), 0.7% of a warm
    /// pass's lookups left the hits loop for a key kept further along, the same
    /// 32,760 in every pass.
    #[inline]
    pub fn get_bringing_near(&mut self, key: u128, hash: u64) -> Option<V> {
        let i = self.find(key, hash);
        let found = self.slots[i];
        if found.key != key {
            return None;
        }
        let home = self.home(hash);
        if i != home && i != home + 1 {
            let homed_here = |at: usize| self.home(key_hash(self.slots[at].key)) == home;
            let to = if homed_here(home) { home + 1 } else { home };
            self.slots[i] = self.slots[to];
            self.slots[to] = found;
        }
        Some(found.value)
    }

    /// Sets the value of `key`.
    pub fn insert(&mut self, key: u128, hash: u64, value: V) {
        *self.entry(key, hash) = value;
    }

    /// The value of `key`, inserted as `V::default()` if absent, to update in place;
    /// the table doubles at 3/4 full (at half while it is smaller than
    /// [`PackedMap::sparse_below`]'s).
    #[inline]
    pub fn entry(&mut self, key: u128, hash: u64) -> &mut V {
        debug_assert!(key != 0);
        let mut i = self.find(key, hash);
        if self.slots[i].key == 0 {
            if self.full_at(self.len + 1) {
                self.grow();
                i = self.find(key, hash);
            }
            self.slots[i] = Slot {
                key,
                value: V::default(),
            };
            self.len += 1;
        }
        &mut self.slots[i].value
    }

    /// The keys and values, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u128, V)> + Clone + '_ {
        self.slots
            .iter()
            .filter(|s| s.key != 0)
            .map(|s| (s.key, s.value))
    }

    /// Whether `len` keys are more than this table should hold before it doubles.
    #[inline]
    fn full_at(&self, len: usize) -> bool {
        if self.slots.len() < self.sparse_below {
            len * 2 > self.slots.len()
        } else {
            len * 4 > self.slots.len() * 3
        }
    }

    #[cold]
    fn grow(&mut self) {
        // Huge pages for a large table ([`HugeSlice`]): a few faults instead of one per
        // 4 KiB (the first call of a process spent a tenth of its time faulting caches
        // in), and a few TLB entries for its random probes.
        let bigger = HugeSlice::filled(self.slots.len() * 2, Slot::<V>::default());
        let old = std::mem::replace(&mut self.slots, bigger);
        for &slot in old.iter().filter(|s| s.key != 0) {
            let i = self.find(slot.key, key_hash(slot.key));
            self.slots[i] = slot;
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn clear(&mut self) {
        *self = Self {
            sparse_below: self.sparse_below,
            ..Self::default()
        };
    }
}

/// A [`PackedMap`]'s lines, borrowed ([`PackedMap::lines`]).
#[derive(Clone, Copy)]
pub struct Lines<'a, V: Copy> {
    base: *const Slot<V>,
    /// The first slot of the last line: slot indexes below the table's length, even.
    line_mask: usize,
    table: std::marker::PhantomData<&'a [Slot<V>]>,
}

impl<V: Copy> Lines<'_, V> {
    /// [`PackedMap::home`]'s slot, by address.
    #[inline(always)]
    fn home(&self, hash: u64) -> *const Slot<V> {
        // SAFETY: the index is masked by the table's length less one (a power of two),
        // so it is a slot of the table, which `'a` keeps borrowed.
        unsafe { self.base.add(hash as usize & self.line_mask) }
    }

    /// [`PackedMap::prefetch`].
    #[inline(always)]
    pub fn prefetch(&self, hash: u64) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch reads nothing and cannot fault; the address is a slot's.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(self.home(hash).cast::<i8>());
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = hash;
    }

    /// [`PackedMap::get`] of a key in its home line (its home slot or the next), else
    /// None, with no loop and no branch on which slot: most keys are there (on
    /// English, all but ~1 in 100 at the piece cache's fill), and a probe loop's exit
    /// mispredicts on the others. A caller falls back to `get` on None.
    #[inline(always)]
    pub fn get_near(&self, key: u128, hash: u64) -> Option<V> {
        let home = self.home(hash);
        // SAFETY: a home is even and below the table's length, so the next slot, the
        // rest of its line, is below it too.
        let (a, b) = unsafe { (&*home, &*home.add(1)) };
        // Which slot holds a key is a coin toss for the branch predictor: the slot is
        // selected, and its key compared once (an `or` of two comparisons compiles
        // to a branch on the first).
        let in_a = a.key == key;
        let slot = std::hint::select_unpredictable(in_a, a, b);
        (slot.key == key).then_some(slot.value)
    }
}

/// Asks the CPU to bring `item` into its cache: a hint, no effect on results.
#[inline]
pub fn prefetch<T>(item: Option<&T>) {
    #[cfg(target_arch = "x86_64")]
    if let Some(item) = item {
        // SAFETY: a prefetch reads nothing and cannot fault; the address is an item's.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>((item as *const T).cast::<i8>());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = item;
}

impl PackedMap<u64> {
    /// Adds `other`'s counts to these. The smaller table goes into the larger:
    /// taking a table's keys in slot order into a smaller one piles them into one
    /// long probe run (seconds on a million keys).
    pub fn add_all(&mut self, other: PackedMap<u64>) {
        self.add_smaller(other);
    }

    /// Adds `other`'s counts to these, as [`PackedMap::add_all`] does, and returns the
    /// table that was added, emptied, to count into again: a fresh table per part of
    /// every block made the kernel map and zero new pages all the time (an eighth of
    /// counting a 2.2 GB corpus).
    pub fn absorb(&mut self, other: PackedMap<u64>) -> PackedMap<u64> {
        let mut emptied = self.add_smaller(other);
        emptied.slots.fill(Slot::default());
        emptied.len = 0;
        emptied
    }

    /// Adds the counts of the smaller of the two tables into the larger, which `self`
    /// becomes; returns the smaller, as it was.
    fn add_smaller(&mut self, mut other: PackedMap<u64>) -> PackedMap<u64> {
        if self.len < other.len {
            std::mem::swap(self, &mut other);
        }
        self.add_counts_of(&other);
        other
    }

    /// Adds the counts of `other` (borrowed) to these.
    pub fn add_counts_of(&mut self, other: &PackedMap<u64>) {
        for (key, n) in other.iter() {
            *self.entry(key, key_hash(key)) += n;
        }
    }
}

/// Occurrence counts of packed keys, for counters: each key's slot is prefetched
/// when it is added and its count raised [`PREFETCH_AHEAD`] keys later, so that the
/// memory access overlaps with finding the keys in between.
#[derive(Debug, Clone)]
pub struct Tally {
    counts: PackedMap<u64>,
    queue: [(u128, u64); PREFETCH_AHEAD],
    queued: usize,
}

impl Default for Tally {
    fn default() -> Self {
        Self {
            counts: PackedMap::default(),
            queue: [(0, 0); PREFETCH_AHEAD],
            queued: 0,
        }
    }
}

impl Tally {
    /// A tally adding to the counts of `counts` (an empty table, perhaps a large one
    /// to reuse, or one that is counting a file part after part).
    pub fn with_counts(counts: PackedMap<u64>) -> Self {
        Self {
            counts,
            ..Self::default()
        }
    }

    /// Counts `key` once (soon).
    #[inline]
    pub fn add(&mut self, key: u128) {
        let hash = key_hash(key);
        self.counts.prefetch(hash);
        self.queue[self.queued] = (key, hash);
        self.queued += 1;
        if self.queued == PREFETCH_AHEAD {
            self.flush();
        }
    }

    /// Asks the CPU for `hash`'s slot, ahead of [`Tally::add_now`].
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        self.counts.prefetch(hash);
    }

    /// Counts `key` (of hash `hash`) once, now: for callers that prefetched its slot a
    /// while before ([`Tally::prefetch`]).
    #[inline]
    pub fn add_now(&mut self, key: u128, hash: u64) {
        *self.counts.entry(key, hash) += 1;
    }

    fn flush(&mut self) {
        for &(key, hash) in &self.queue[..self.queued] {
            *self.counts.entry(key, hash) += 1;
        }
        self.queued = 0;
    }

    /// Adds `other`'s counts to these.
    pub fn absorb(&mut self, other: Tally) {
        self.flush();
        self.counts.absorb(other.into_counts());
    }

    /// Every key added and its count.
    pub fn into_counts(mut self) -> PackedMap<u64> {
        self.flush();
        self.counts
    }
}

/// Longest byte string that packs.
pub const MAX_PACKED: usize = 15;

/// `bytes[start..end]` (at most [`MAX_PACKED`] bytes) and its length, in one integer:
/// the bytes little-endian in the low 15 bytes, the length in the top byte, so every
/// byte string has its own key.
#[inline(always)]
pub fn packed(bytes: &[u8], start: usize, end: usize) -> u128 {
    let len = end - start;
    debug_assert!(len <= MAX_PACKED);
    if start + 16 <= bytes.len() {
        // One unaligned load, then clear what lies past the piece.
        let mut buf = [0u8; 16];
        buf.copy_from_slice(&bytes[start..start + 16]);
        return packed_window(buf, len);
    }
    packed_all(&bytes[start..end])
}

/// The key of the piece of `len` bytes (at most [`MAX_PACKED`]) that `window`'s
/// 16 bytes start with.
#[inline(always)]
fn packed_window(window: [u8; 16], len: usize) -> u128 {
    (u128::from_le_bytes(window) & KEEP[len]) | ((len as u128) << 120)
}

/// The packed keys and hashes of a batch of consecutive pieces of `bytes`, the first
/// starting at `first` and each ending at the next of `ends`, into `keys`; `prefetch`
/// is called with each hash (to bring in a table line the caller reads later). A piece
/// longer than [`MAX_PACKED`] gets key 0 and the hash `long` returns for its bytes
/// (which may prefetch too; 0 for a caller that looks such pieces up otherwise).
#[inline(always)]
pub fn pack_pieces(
    bytes: &[u8],
    first: usize,
    ends: &[usize],
    keys: &mut [(u128, u64)],
    prefetch: impl Fn(u64),
    long: impl Fn(&[u8]) -> u64,
) {
    let n = ends.len().min(keys.len());
    // A piece starting at or before this is read with one 16-byte load.
    let loads_below = bytes.len().saturating_sub(15);
    let (mut start, mut i) = (first, 0);
    while i < n {
        // Pieces of up to 15 bytes away from the text's end (nearly all): a loop
        // with no other case in it, over pointers (so that its values fit in
        // registers).
        let (mut end_at, ends_end) = (ends[i..n].as_ptr(), ends[..n].as_ptr_range().end);
        let mut key_at = keys[i..n].as_mut_ptr();
        while end_at != ends_end {
            // SAFETY: `end_at` is one of `ends[i..n]`.
            let end = unsafe { *end_at };
            let len = end.wrapping_sub(start);
            if len > MAX_PACKED || start >= loads_below {
                break;
            }
            // SAFETY: `start + 16 <= bytes.len()`.
            let window = unsafe {
                bytes
                    .as_ptr()
                    .add(start)
                    .cast::<[u8; 16]>()
                    .read_unaligned()
            };
            let key = packed_window(window, len);
            let hash = key_hash(key);
            prefetch(hash);
            // SAFETY: `key_at` is the key of the piece `end_at` ends, below `n`.
            unsafe {
                *key_at = (key, hash);
                (end_at, key_at) = (end_at.add(1), key_at.add(1));
            }
            start = end;
        }
        // SAFETY: `end_at` moved on within `ends[..n]`.
        i = unsafe { end_at.offset_from(ends.as_ptr()) } as usize;
        if i == n {
            break;
        }
        let end = ends[i];
        keys[i] = if end - start <= MAX_PACKED {
            let key = packed_all(&bytes[start..end]);
            let hash = key_hash(key);
            prefetch(hash);
            (key, hash)
        } else {
            (0, long(&bytes[start..end]))
        };
        start = end;
        i += 1;
    }
}

/// `KEEP[len]`: the low `len` bytes set. A shift of a u128 by a variable amount is a
/// branchy sequence of instructions; a load from this table (256 bytes, in L1) is one.
static KEEP: [u128; 16] = {
    let mut masks = [0u128; 16];
    let mut len = 1;
    while len < 16 {
        masks[len] = (1u128 << (8 * len)) - 1;
        len += 1;
    }
    masks
};

/// [`packed`] of all of `bytes` (at most [`MAX_PACKED`]), read with two
/// overlapping loads instead of copying into a buffer first (a copy of a
/// variable length, then one 16-byte load of it, stalls on store forwarding).
#[inline]
pub fn packed_all(bytes: &[u8]) -> u128 {
    let len = bytes.len();
    debug_assert!(len <= MAX_PACKED);
    let u32_at = |i: usize| u64::from(u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap()));
    let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap());
    let (lo, hi) = match len {
        0 => (0, 0),
        1..=3 => {
            let b = |i: usize| u64::from(bytes[i]);
            (
                b(0) | b(len / 2) << (8 * (len / 2)) | b(len - 1) << (8 * (len - 1)),
                0,
            )
        }
        4..=7 => {
            let tail = u32_at(len - 4) >> (8 * (8 - len)) << 32;
            (u32_at(0) | if len > 4 { tail } else { 0 }, 0)
        }
        _ => {
            let tail = if len > 8 {
                u64_at(len - 8) >> (8 * (16 - len))
            } else {
                0
            };
            (u64_at(0), tail)
        }
    };
    u128::from(lo) | (u128::from(hi) << 64) | ((len as u128) << 120)
}

/// The byte string of a key made by [`packed`], on the stack (no allocation: a
/// table's keys are unpacked by the hundred thousand).
pub fn unpacked(key: u128) -> Unpacked {
    Unpacked {
        bytes: key.to_le_bytes(),
        len: (key >> 120) as usize,
    }
}

/// The bytes of a packed key (see [`unpacked`]).
pub struct Unpacked {
    bytes: [u8; 16],
    len: usize,
}

impl std::ops::Deref for Unpacked {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_a_whole_string_equals_packing_it_inside_a_longer_one() {
        let text = b"0123456789abcdefghijklmnopqrstuvwxyz";
        for start in 0..8 {
            for len in 0..=MAX_PACKED {
                let bytes = &text[start..start + len];
                assert_eq!(packed_all(bytes), packed(text, start, start + len));
                assert_eq!(&*unpacked(packed_all(bytes)), bytes);
            }
        }
    }

    #[test]
    fn the_table_finds_every_key_it_holds_through_growth_and_collisions() {
        let mut t: PackedMap<(u32, u32)> = PackedMap::default();
        let key = |i: u128| (i * 0x0101_0101_0101) | (5u128 << 120);
        for i in 0..20_000u128 {
            assert_eq!(t.get(key(i), key_hash(key(i))), None);
            t.insert(key(i), key_hash(key(i)), (i as u32, 1));
        }
        assert_eq!(t.len(), 20_000);
        for i in 0..20_000u128 {
            assert_eq!(t.get(key(i), key_hash(key(i))), Some((i as u32, 1)));
        }
        // Keys that all land on one home slot are found by probing.
        let mut crowded: PackedMap<(u32, u32)> = PackedMap::default();
        for i in 1..100u128 {
            crowded.insert(i, 7, (i as u32, 0));
        }
        assert!((1..100u128).all(|i| crowded.get(i, 7) == Some((i as u32, 0))));
        assert_eq!(crowded.get(100, 7), None);
        t.clear();
        assert!(t.is_empty() && t.get(key(3), key_hash(key(3))).is_none());
    }

    #[test]
    fn a_sparse_table_doubles_at_half_full_below_its_size_and_at_three_quarters_from_it() {
        let key = |i: u128| (i + 1) | (3u128 << 120);
        let fill = |t: &mut PackedMap<u32>, upto: usize| {
            for i in t.len()..upto {
                t.insert(key(i as u128), key_hash(key(i as u128)), i as u32);
            }
        };
        let (mut sparse, mut dense) = (
            PackedMap::<u32>::sparse_below(2 * FIRST_SLOTS),
            PackedMap::<u32>::default(),
        );
        fill(&mut sparse, FIRST_SLOTS / 2);
        fill(&mut dense, FIRST_SLOTS * 3 / 4);
        assert_eq!(
            (sparse.slots.len(), dense.slots.len()),
            (FIRST_SLOTS, FIRST_SLOTS)
        );
        fill(&mut sparse, FIRST_SLOTS / 2 + 1);
        fill(&mut dense, FIRST_SLOTS * 3 / 4 + 1);
        assert_eq!(
            (sparse.slots.len(), dense.slots.len()),
            (2 * FIRST_SLOTS, 2 * FIRST_SLOTS)
        );
        // At its size, the sparse table fills to 3/4 like any other.
        fill(&mut sparse, FIRST_SLOTS * 3 / 2);
        assert_eq!(sparse.slots.len(), 2 * FIRST_SLOTS);
        fill(&mut sparse, FIRST_SLOTS * 3 / 2 + 1);
        assert_eq!(sparse.slots.len(), 4 * FIRST_SLOTS);
        // Cleared, it is sparse still, and holds every key it was given.
        sparse.clear();
        fill(&mut sparse, FIRST_SLOTS / 2 + 1);
        assert_eq!(sparse.slots.len(), 2 * FIRST_SLOTS);
        assert!((0..=FIRST_SLOTS / 2)
            .all(|i| { sparse.get(key(i as u128), key_hash(key(i as u128))) == Some(i as u32) }));
    }

    #[test]
    fn a_lookup_near_home_finds_what_get_finds_in_the_home_line_and_nothing_else() {
        // Keys crowded onto few homes (hashes 0..8), so that many sit past their line.
        let mut t: PackedMap<u32> = PackedMap::default();
        for i in 1..=40u128 {
            t.insert(i, (i % 8) as u64, i as u32);
        }
        let (mut near, mut far) = (0, 0);
        for i in 1..=60u128 {
            let hash = (i % 8) as u64;
            match (t.get_near(i, hash), t.get(i, hash)) {
                (Some(v), got) => {
                    assert_eq!(got, Some(v));
                    near += 1;
                }
                (None, Some(_)) => far += 1,
                (None, None) => assert!(i > 40),
            }
        }
        assert!(near >= 8 && far > 0, "{near} near, {far} further along");
        // A key in its home slot or the next is near: homes are the first of a line.
        let mut two: PackedMap<u32> = PackedMap::default();
        two.insert(5, 3, 50);
        two.insert(6, 3, 60);
        two.insert(7, 3, 70);
        assert_eq!(
            (two.get_near(5, 3), two.get_near(6, 3)),
            (Some(50), Some(60))
        );
        assert_eq!((two.get_near(7, 3), two.get(7, 3)), (None, Some(70)));
        assert_eq!(two.get_near(8, 3), None);
    }

    #[test]
    fn a_key_looked_up_far_from_home_is_brought_near_and_every_key_stays_found() {
        // Keys crowded onto four lines (hashes 0..8), most of them past their line.
        let mut t: PackedMap<u32> = PackedMap::default();
        for i in 1..=40u128 {
            t.insert(i, (i % 8) as u64, i as u32);
        }
        let mut brought = 0;
        for round in 0..3 {
            for i in (1..=50u128).rev() {
                let hash = (i % 8) as u64;
                let was_near = t.get_near(i, hash).is_some();
                let got = t.get_bringing_near(i, hash);
                assert_eq!(got, (i <= 40).then_some(i as u32), "round {round}, key {i}");
                if got.is_some() {
                    // The key just looked up is in its home line now.
                    assert_eq!(t.get_near(i, hash), got, "round {round}, key {i}");
                    brought += usize::from(!was_near);
                }
                // And no key was lost or changed on the way.
                assert_eq!(t.len(), 40);
                assert!((1..=40u128).all(|k| t.get(k, (k % 8) as u64) == Some(k as u32)));
            }
        }
        assert!(brought > 0, "no key was ever past its line");
    }

    #[test]
    fn entries_count_in_place_and_iterate() {
        let mut t: PackedMap<u64> = PackedMap::default();
        for i in 0..10_000u128 {
            let key = (i % 1000 + 1) | (3u128 << 120);
            *t.entry(key, key_hash(key)) += 1;
        }
        assert_eq!(t.len(), 1000);
        assert!(t.iter().all(|(_, n)| n == 10));
        assert_eq!(t.iter().count(), 1000);
    }

    #[test]
    fn keys_are_the_bytes_and_length() {
        let text = b"ab\0\0cdefghijklmnopqrstuvwxyz0123456789";
        for start in 0..text.len() {
            for end in start..(start + MAX_PACKED + 1).min(text.len() + 1) {
                // Same key whether the 16-byte load fits (inside the text) or not (a copy).
                let key = packed(text, start, end);
                assert_eq!(key, packed(&text[start..end], 0, end - start));
                assert_eq!(&*unpacked(key), &text[start..end]);
            }
        }
        // Trailing zero bytes still make a different key.
        assert_ne!(packed(text, 0, 2), packed(text, 0, 3));
        assert_ne!(packed(text, 0, 3), packed(text, 0, 4));
        assert_ne!(packed(b"ab", 0, 2), packed(b"ba", 0, 2));
        assert_eq!(&*unpacked(packed(b"", 0, 0)), b"");
    }
}
