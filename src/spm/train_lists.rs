//! The occurrence lists of the BPE trainer's merge loop ([`super::train_merge`]),
//! in one pool.
//!
//! Each pair symbol lists the places it occurs. At 50 MB of English about 140 K
//! lists are made, most of them short; each merge takes one whole and frees it. As
//! a `Vec` each, every list was an allocation of its own: `malloc`, `realloc` and
//! `free` on the loop's path, and 140 K more `free` calls at the end. Here a list is
//! a chunk of one large buffer, of a power-of-two size, grown by doubling; a freed
//! chunk goes to the next list of its size (or is split for a smaller one). The
//! lists of the words' first pairs, whose lengths are known at once, are made whole
//! instead, each exactly its length ([`Lists::make`]).

/// Chunks hold 2^class entries, 4 at the least; a class has its own free list.
const MIN_CLASS: u32 = 2;
const CLASSES: usize = 32;

/// The class of the chunk that fits `len` entries.
fn class_of(len: u32) -> u32 {
    len.next_power_of_two().trailing_zeros().max(MIN_CLASS)
}

/// One list: where its chunk starts, how many entries it holds and how many fit.
/// `Default` is the empty list (no chunk).
#[derive(Clone, Copy, Debug, Default)]
pub struct List {
    at: u32,
    len: u32,
    cap: u32,
}

/// The storage of many [`List`]s of `u64`: chunks of one buffer, which grows at
/// its end (glibc moves a large buffer's pages with `mremap` rather than copy them).
#[derive(Default)]
pub struct Lists {
    store: Vec<u64>,
    /// Freed chunks by class.
    free: [Vec<u32>; CLASSES],
}

impl Lists {
    /// Appends `value` to `list`.
    #[inline]
    pub fn push(&mut self, list: &mut List, value: u64) {
        if list.len == list.cap {
            self.grow(list);
        }
        self.store[(list.at + list.len) as usize] = value;
        list.len += 1;
    }

    /// The entries of `list`, in the order they were pushed.
    pub fn entries(&self, list: &List) -> &[u64] {
        &self.store[list.at as usize..(list.at + list.len) as usize]
    }

    /// Room for `entries` more entries at the buffer's end, for lists to be made
    /// there ([`Lists::make`]) without it growing again and again.
    pub fn reserve(&mut self, entries: usize) {
        self.store.reserve_exact(entries);
    }

    /// Frees the lists, their pages first ([`crate::pages::free_pages_first`]).
    pub fn free_pages_first(self) {
        crate::pages::free_pages_first(self.store);
    }

    /// Gives the empty `list` a chunk of exactly `len` entries at the buffer's end,
    /// and makes them its entries (to be written through [`Lists::entries_mut`]). A
    /// list made whole this way takes no room it does not fill: when it grows it
    /// moves to a chunk of the next power of two, and when it is freed its chunk
    /// goes to the free lists in power-of-two pieces.
    pub fn make(&mut self, list: &mut List, len: u32) {
        debug_assert_eq!(list.cap, 0, "a list made twice");
        *list = List {
            at: self.extend(len as usize),
            len,
            cap: len,
        };
    }

    /// The entries of each of `lists` (different lists), all writable at once, in
    /// the order given.
    pub fn entries_mut(&mut self, lists: &[List]) -> Vec<&mut [u64]> {
        let mut order: Vec<usize> = (0..lists.len()).collect();
        order.sort_unstable_by_key(|&i| lists[i].at);
        let mut out: Vec<&mut [u64]> = lists.iter().map(|_| &mut [][..]).collect();
        let (mut rest, mut at) = (&mut self.store[..], 0);
        for i in order {
            let List { at: start, len, .. } = lists[i];
            let tail = std::mem::take(&mut rest);
            let (_, tail) = tail.split_at_mut(start as usize - at);
            let (entries, tail) = tail.split_at_mut(len as usize);
            (out[i], rest, at) = (entries, tail, (start + len) as usize);
        }
        out
    }

    /// Moves the entries of `list` into `out` (cleared first) and frees the list.
    pub fn take_into(&mut self, list: &mut List, out: &mut Vec<u64>) {
        out.clear();
        out.extend_from_slice(self.entries(list));
        self.release(list);
    }

    /// Frees `list`'s chunk; `list` becomes empty. A chunk of a power-of-two size
    /// goes to its class's free list; one made whole ([`Lists::make`]) goes there
    /// in its power-of-two pieces (pieces under the least class are left unused).
    pub fn release(&mut self, list: &mut List) {
        let mut at = list.at;
        for class in (MIN_CLASS..CLASSES as u32).rev() {
            if list.cap & (1 << class) != 0 {
                self.free[class as usize].push(at);
                at += 1 << class;
            }
        }
        *list = List::default();
    }

    /// Moves a full `list` to a chunk of the next power of two (twice its size, but
    /// for a list made whole).
    #[cold]
    fn grow(&mut self, list: &mut List) {
        let class = class_of(list.cap + 1);
        assert!((class as usize) < CLASSES, "a list of 2^31 entries");
        let at = self.chunk(class);
        let (from, n) = (list.at as usize, list.len as usize);
        self.store.copy_within(from..from + n, at as usize);
        self.release(list);
        *list = List {
            at,
            len: n as u32,
            cap: 1 << class,
        };
    }

    /// A free chunk of `2^class` entries: a freed one, the first half of the
    /// smallest larger freed one (its other halves freed), or a new one at the end.
    fn chunk(&mut self, class: u32) -> u32 {
        if let Some(at) = self.free[class as usize].pop() {
            return at;
        }
        let larger = (class as usize + 1..CLASSES).find(|&c| !self.free[c].is_empty());
        if let Some(mut c) = larger {
            let at = self.free[c].pop().expect("not empty");
            while c > class as usize {
                c -= 1;
                self.free[c].push(at + (1 << c));
            }
            return at;
        }
        self.extend(1 << class)
    }

    /// A new chunk of `n` entries at the buffer's end: where it starts.
    fn extend(&mut self, n: usize) -> u32 {
        let at = self.store.len();
        let end = at + n;
        assert!(
            end <= 1 << 32,
            "the occurrence lists hold 2^32 entries or more"
        );
        self.store.resize(end, 0);
        at as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lists pushed to, taken and freed in a seeded random order, against `Vec`s:
    /// the same entries, through chunk growth, reuse and splitting.
    #[test]
    fn lists_hold_what_vecs_hold() {
        let mut next = crate::testing::seeded(7u64);
        let mut lists = Lists::default();
        let mut handles = vec![List::default(); 64];
        let mut want: Vec<Vec<u64>> = vec![Vec::new(); 64];
        let mut out = Vec::new();
        let mut value = 0u64;
        let mut split = 0;
        for step in 0..200_000 {
            let k = next(64) as usize;
            // Lists 0 and 1 grow long until 150 000 steps; then, taken, their large
            // chunks are split for the others.
            let keep = k < 2 && step < 150_000;
            match next(100) {
                0 if !keep => {
                    lists.take_into(&mut handles[k], &mut out);
                    assert_eq!(out, std::mem::take(&mut want[k]), "step {step}");
                    assert_eq!(handles[k].len, 0);
                }
                1 if !keep => {
                    lists.release(&mut handles[k]);
                    want[k].clear();
                }
                _ => {
                    let n = if k < 2 { 40 } else { 1 };
                    for _ in 0..n {
                        value += 1;
                        let end = lists.store.len();
                        lists.push(&mut handles[k], value);
                        want[k].push(value);
                        split += usize::from(step > 150_000 && lists.store.len() == end);
                    }
                }
            }
            if step % 997 == 0 {
                for (h, w) in handles.iter().zip(&want) {
                    assert_eq!(lists.entries(h), &w[..], "step {step}");
                    assert_eq!(h.len as usize, w.len());
                }
            }
        }
        assert!(split > 0);
        for (h, w) in handles.iter_mut().zip(&want) {
            lists.take_into(h, &mut out);
            assert_eq!(out, *w);
        }
    }

    #[test]
    fn a_larger_free_chunk_is_split() {
        let mut lists = Lists::default();
        assert_eq!(lists.chunk(MIN_CLASS), 0);
        assert_eq!(lists.chunk(6), 4);
        lists.free[6].push(4);
        // A chunk of 4 is cut from the freed 64 at 4; the rest of it is freed as
        // chunks of 4, 8, 16 and 32 (at 8, 12, 20 and 36).
        assert_eq!(lists.chunk(MIN_CLASS), 4);
        for (class, at) in [(2, 8), (3, 12), (4, 20), (5, 36)] {
            assert_eq!(lists.free[class], vec![at], "class {class}");
        }
        assert_eq!(lists.store.len(), 68);
    }

    /// Lists made whole take exactly their entries, are written in place, grow to
    /// a power of two, and are freed in power-of-two pieces.
    #[test]
    fn lists_made_whole_are_written_in_place_grow_and_free_in_pieces() {
        let mut lists = Lists::default();
        let lens = [3, 1, 9, 4, 17];
        lists.reserve(lens.iter().sum::<u32>() as usize);
        let mut handles = [List::default(); 5];
        for (h, n) in handles.iter_mut().zip(lens) {
            lists.make(h, n);
        }
        assert_eq!(lists.store.len(), 34);
        // Given out of order: each its own entries.
        let order = [4, 0, 3, 1, 2];
        let chosen: Vec<List> = order.iter().map(|&i| handles[i]).collect();
        for (k, entries) in lists.entries_mut(&chosen).into_iter().enumerate() {
            entries.iter_mut().for_each(|e| *e = k as u64);
        }
        for (k, &i) in order.iter().enumerate() {
            assert_eq!(lists.entries(&handles[i]), vec![k as u64; lens[i] as usize]);
        }
        // The list of 9 (at 4) grows to 16 (at 34), then to 32 (at 50): its first
        // chunk is freed as 8 at 4 (the one entry after it is not reused), the
        // second as 16 at 34.
        let mut want = vec![4u64; 9];
        for v in 100..120 {
            lists.push(&mut handles[2], v);
            want.push(v);
        }
        assert_eq!(lists.entries(&handles[2]), &want[..]);
        assert_eq!((handles[2].at, handles[2].cap), (50, 32));
        // The list of 17 (at 17) is freed as 16 at 17; the list of 3 is too small to
        // reuse.
        lists.release(&mut handles[4]);
        lists.release(&mut handles[0]);
        let free = |lists: &Lists| lists.free[..6].to_vec();
        let none = Vec::new;
        assert_eq!(
            free(&lists),
            [none(), none(), none(), vec![4], vec![34, 17], none()]
        );
        // A new list takes the first half of the 8 at 4.
        let mut reused = List::default();
        lists.push(&mut reused, 7);
        assert_eq!((reused.at, reused.cap), (4, 4));
        assert_eq!(
            free(&lists),
            [none(), none(), vec![8], none(), vec![34, 17], none()]
        );
        assert_eq!(lists.store.len(), 82);
    }
}
