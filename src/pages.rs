//! Large buffers backed by huge pages where the kernel offers them: output buffers
//! (kept for reuse between batches: [`OutputPool`]), and the hash tables of piece
//! caches and counters ([`crate::packed`]). And large structures freed off the
//! caller's path ([`drop_aside`], [`run_aside`]), plain buffers' pages given back
//! first ([`free_pages_first`]).
//!
//! A batch's ids go into one buffer allocated at its largest possible size and written
//! once (`io::batch::encode_flat`). Each 4 KiB page of it costs a page fault when first
//! written: on this project's 2-core VM, 2,400 faults a 10 MB batch, 4.5 ms of kernel
//! time against 37 ms of encoding. `MADV_HUGEPAGE` asks for 2 MiB pages instead (one
//! fault per 512 small ones) on systems whose transparent huge pages are in `madvise`
//! mode (the default of most distributions). Pages never written still cost nothing.

use std::sync::{Arc, Mutex};

/// Frees `garbage` on a thread of its own when `num_threads` > 1 (a trainer's tables
/// of a few hundred thousand small allocations, whose `free` calls are a cache miss
/// each: the result goes back to the caller meanwhile); here otherwise, or when no
/// thread can start.
pub fn drop_aside<T: Send + 'static>(garbage: T, num_threads: usize) {
    run_aside(move || drop(garbage), num_threads);
}

/// Runs `free` (which frees what it holds) on a thread of its own when `num_threads`
/// is over 1, as [`drop_aside`] does; here otherwise. When no thread can start, `free`
/// is dropped unrun, and what it holds is freed all the same.
pub fn run_aside(free: impl FnOnce() + Send + 'static, num_threads: usize) {
    if num_threads > 1 {
        let spawned = std::thread::Builder::new()
            .name("bytepair-free".into())
            .spawn(free);
        drop(spawned); // if no thread could start, the closure and all it held are freed here
    } else {
        free();
    }
}

/// Frees `buf`, its pages first: `MADV_DONTNEED` on the whole pages inside it (under
/// the address space's shared lock, beside other threads' page faults and allocations),
/// then `free`, whose `munmap` (under the exclusive lock) then has little left to do.
/// For a buffer of plain items freed on a thread of its own ([`run_aside`]): the
/// caller's thread would otherwise wait for the lock while the pages are released.
pub fn free_pages_first<T: Copy>(buf: Vec<T>) {
    // SAFETY: the pages lie inside `buf`'s items, owned here and never read again
    // (`T: Copy`: dropping them reads nothing); they read as zeros after, and `free`
    // looks only at the allocation's edges, outside them.
    #[cfg(target_os = "linux")]
    unsafe {
        advise_inside(&buf[..], 4096, libc::MADV_DONTNEED);
    }
    drop(buf);
}

/// Asks the kernel to back the whole 2 MiB pages inside `buf` with huge pages. A hint:
/// no effect on what the buffer holds, and none at all off Linux or when refused.
pub fn advise_huge_pages<T>(buf: &mut [T]) {
    // SAFETY: the pages lie inside `buf`, which this call borrows mutably;
    // MADV_HUGEPAGE changes how they are backed, never their contents.
    #[cfg(target_os = "linux")]
    unsafe {
        advise_inside(buf, 2 << 20, libc::MADV_HUGEPAGE);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

/// `madvise(advice)` on the whole pages of `page` bytes inside `buf` (none when
/// it holds no whole page).
///
/// # Safety
/// `advice` must suit memory the caller owns as `buf`: one that may change what
/// the pages hold (`MADV_DONTNEED`) only where nothing reads them again.
#[cfg(target_os = "linux")]
unsafe fn advise_inside<T>(buf: &[T], page: usize, advice: libc::c_int) {
    let start = buf.as_ptr() as usize;
    let end = start + std::mem::size_of_val(buf);
    let (first, last) = (start.next_multiple_of(page), end / page * page);
    if last > first {
        // SAFETY: the range lies inside `buf`; the advice is the caller's to justify.
        unsafe { libc::madvise(first as *mut libc::c_void, last - first, advice) };
    }
}

/// Output buffers their caller is done with, for the next output to be written into:
/// a batch's flat ids (the binding's `encode_batch_to_bytes`), a file's blocks of ids
/// (`py::documents`); a buffer goes back when Python lets go of the ids in it.
///
/// A batch's flat ids used to go into a new buffer each call: memory the kernel maps
/// and zeroes as it is first written (5 huge pages, or 2,400 small ones, for the ids
/// of 10 MB of English), which cost two threads a tenth of their speed. A buffer
/// whose pages were written before costs none of that. A program encoding batch
/// after batch (a data loader, a shard writer) lets go of one batch's ids before or
/// soon after its next call; two buffers kept cover both orders.
///
/// A batch's buffers are kept only while small enough that holding on to them is
/// cheap: a buffer keeps the pages it was written in, and a batch of a gigabyte of
/// text is not to keep its 4 GB of room after its caller let go of it.
#[derive(Clone)]
pub struct OutputPool {
    kept: Arc<Mutex<Vec<Vec<u8>>>>,
    /// How many buffers are kept at most, and the largest room one is kept with.
    most: usize,
    largest: usize,
    /// Whether a new buffer's pages are advised huge.
    huge: bool,
}

/// Buffers the default [`OutputPool`] (a batch's) keeps, and the largest room it keeps
/// one of.
pub const POOLED_OUTPUTS: usize = 2;
pub const POOLED_OUTPUT_BYTES: usize = 256 << 20;

/// A batch's outputs: [`POOLED_OUTPUTS`] kept, of [`POOLED_OUTPUT_BYTES`] of room at most.
impl Default for OutputPool {
    fn default() -> Self {
        Self::new(POOLED_OUTPUTS, POOLED_OUTPUT_BYTES)
    }
}

impl OutputPool {
    /// A pool keeping up to `most` buffers, each of `largest` bytes of room at most.
    pub fn new(most: usize, largest: usize) -> Self {
        Self {
            kept: Arc::default(),
            most,
            largest,
            huge: true,
        }
    }

    /// The default pool, its new buffers on small pages: for buffers with much more
    /// room than they are likely to fill (a batch's UTF-8, whose room is three or four
    /// bytes a character), where a huge page would make resident the room around
    /// what was written.
    pub fn on_small_pages() -> Self {
        Self {
            huge: false,
            ..Self::default()
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Vec<u8>>> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A kept buffer, if any (empty, whatever its room: the caller sees if it fits).
    pub fn pop(&self) -> Option<Vec<u8>> {
        self.lock().pop()
    }

    /// An empty buffer with room for `bytes`: a kept one if one is large enough (those
    /// too small for this caller's batches are dropped), else a new one, its pages
    /// advised to be huge ([`advise_huge_pages`]); an error when there is no memory
    /// for a new one.
    pub fn take(&self, bytes: usize) -> Result<Vec<u8>, std::collections::TryReserveError> {
        let kept = {
            let mut kept = self.lock();
            match kept.iter().position(|b| b.capacity() >= bytes) {
                Some(i) => Some(kept.swap_remove(i)),
                None => {
                    kept.clear();
                    None
                }
            }
        };
        if let Some(kept) = kept {
            return Ok(kept);
        }
        let mut fresh = Vec::new();
        fresh.try_reserve_exact(bytes)?;
        if self.huge {
            advise_huge_pages(fresh.spare_capacity_mut());
        }
        Ok(fresh)
    }

    /// Keeps `buf` for a later [`OutputPool::take`] or [`OutputPool::pop`], if there
    /// is room and it is small enough.
    pub fn give_back(&self, mut buf: Vec<u8>) {
        if buf.capacity() > self.largest {
            return;
        }
        buf.clear();
        let mut kept = self.lock();
        if kept.len() < self.most {
            kept.push(buf);
        }
    }

    /// How many buffers are kept.
    pub fn kept(&self) -> usize {
        self.lock().len()
    }
}

/// A fixed-length slice of `Copy` items, 2 MiB-aligned and backed by huge pages when it
/// spans at least one, for hash tables read at random ([`crate::packed::PackedMap`]).
///
/// Why not a `Vec` and [`advise_huge_pages`]: a `Vec`'s memory starts anywhere, so
/// only the whole 2 MiB pages inside it can be huge; a 4 MiB table got one and kept
/// the other half in 4 KiB pages. Every random probe of that half then needs its own
/// TLB entry, and AMD's cores drop a software prefetch that misses the TLB, so the
/// encoder's prefetched piece-cache probes stalled anyway. Aligned and advised before
/// its first write (the write faults it in), the whole table takes a few TLB entries.
pub struct HugeSlice<T: Copy> {
    ptr: std::ptr::NonNull<T>,
    len: usize,
}

// SAFETY: a HugeSlice owns its items as a Box<[T]> would.
unsafe impl<T: Copy + Send> Send for HugeSlice<T> {}
// SAFETY: shared access only reads, as through a &[T].
unsafe impl<T: Copy + Sync> Sync for HugeSlice<T> {}

const HUGE_PAGE: usize = 2 << 20;

impl<T: Copy> HugeSlice<T> {
    /// `len` copies of `value`.
    pub fn filled(len: usize, value: T) -> Self {
        let layout = Self::layout(len);
        if layout.size() == 0 {
            return Self {
                ptr: std::ptr::NonNull::dangling(),
                len,
            };
        }
        // SAFETY: the layout's size is not zero.
        let raw = unsafe { std::alloc::alloc(layout) };
        let Some(ptr) = std::ptr::NonNull::new(raw.cast::<T>()) else {
            std::alloc::handle_alloc_error(layout)
        };
        // SAFETY: `raw` is a fresh allocation of `layout.size()` bytes, nothing reads
        // it before it is written below.
        advise_huge_pages(unsafe { std::slice::from_raw_parts_mut(raw, layout.size()) });
        for i in 0..len {
            // SAFETY: `i < len`, inside the allocation; writing does not read the old bytes.
            unsafe { ptr.as_ptr().add(i).write(value) };
        }
        Self { ptr, len }
    }

    fn layout(len: usize) -> std::alloc::Layout {
        let size = len
            .checked_mul(std::mem::size_of::<T>())
            .expect("HugeSlice size overflows");
        let align = if size >= HUGE_PAGE {
            HUGE_PAGE
        } else {
            std::mem::align_of::<T>()
        };
        std::alloc::Layout::from_size_align(size, align).expect("HugeSlice layout")
    }
}

impl<T: Copy> std::ops::Deref for HugeSlice<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialised items (dangling only when the size is 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> std::ops::DerefMut for HugeSlice<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> Drop for HugeSlice<T> {
    fn drop(&mut self) {
        let layout = Self::layout(self.len);
        if layout.size() != 0 {
            // SAFETY: allocated in `filled` with this same layout.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr().cast::<u8>(), layout) };
        }
    }
}

impl<T: Copy> Clone for HugeSlice<T> {
    fn clone(&self) -> Self {
        match self.first() {
            Some(&first) => {
                let mut copy = Self::filled(self.len, first);
                copy.copy_from_slice(self);
                copy
            }
            None => Self {
                ptr: std::ptr::NonNull::dangling(),
                len: 0,
            },
        }
    }
}

impl<T: Copy + std::fmt::Debug> std::fmt::Debug for HugeSlice<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_pools_give_back_kept_buffers_that_fit_and_keep_only_small_ones() {
        let pool = OutputPool::default();
        let mut first = pool.take(1000).unwrap();
        assert!(first.is_empty() && first.capacity() >= 1000);
        first.extend_from_slice(&[1, 2, 3]);
        let at = first.as_ptr();
        pool.give_back(first);
        assert_eq!(pool.kept(), 1);
        // A kept buffer with room enough comes back empty.
        let again = pool.take(500).unwrap();
        assert!(again.as_ptr() == at && again.is_empty());
        assert_eq!(pool.kept(), 0);
        // No more than POOLED_OUTPUTS are kept.
        for _ in 0..POOLED_OUTPUTS + 2 {
            pool.give_back(Vec::with_capacity(100));
        }
        assert_eq!(pool.kept(), POOLED_OUTPUTS);
        // Those too small for what is asked are dropped, and a new buffer is made.
        let bigger = pool.take(10_000).unwrap();
        assert!(bigger.capacity() >= 10_000);
        assert_eq!(pool.kept(), 0);
        // A buffer with more room than POOLED_OUTPUT_BYTES is not kept (its room is
        // only reserved: its pages are never written, so it costs no memory here).
        pool.give_back(Vec::with_capacity(POOLED_OUTPUT_BYTES + 1));
        assert_eq!(pool.kept(), 0);
        pool.give_back(Vec::with_capacity(POOLED_OUTPUT_BYTES));
        assert_eq!(pool.kept(), 1);
        // Clones share what is kept.
        assert_eq!(
            pool.clone().take(1).unwrap().capacity(),
            POOLED_OUTPUT_BYTES
        );
        assert_eq!(pool.kept(), 0);
        // A pool of other limits (a file's blocks): pop gives any buffer kept, emptied.
        // No memory for the room asked: an error, not an abort.
        assert!(pool.take(isize::MAX as usize).is_err());
        let blocks = OutputPool::new(3, usize::MAX);
        assert!(blocks.pop().is_none());
        for n in [10usize, 20, 30, 40] {
            blocks.give_back(vec![1; n]);
        }
        assert_eq!(blocks.kept(), 3);
        let last = blocks.pop().expect("kept");
        assert!(last.is_empty() && last.capacity() >= 30);
        blocks.give_back(Vec::with_capacity(POOLED_OUTPUT_BYTES + 1));
        assert_eq!(blocks.kept(), 3, "no largest room");
    }

    #[test]
    fn huge_slices_are_filled_aligned_and_cloned() {
        // 2 MiB and more: aligned to a huge page; less: to the item.
        let big = HugeSlice::filled(3 << 18, 7u64); // 6 MiB
        assert_eq!(big.as_ptr() as usize % HUGE_PAGE, 0);
        assert!(big.iter().all(|&x| x == 7) && big.len() == 3 << 18);
        let mut small = HugeSlice::filled(5, [1u32, 2]);
        small[4] = [3, 4];
        let copy = small.clone();
        assert_eq!(&*copy, &[[1, 2], [1, 2], [1, 2], [1, 2], [3, 4]]);
        let empty = HugeSlice::filled(0, 0u8);
        assert!(empty.is_empty() && empty.clone().is_empty());
        assert_eq!(format!("{:?}", HugeSlice::filled(2, 1u8)), "[1, 1]");
    }

    /// Buffers freed pages first leave every other buffer as it was: sizes under,
    /// at and over a page, at any offset, among buffers of known content.
    #[test]
    fn freeing_pages_first_touches_no_other_buffer() {
        let mut next = crate::testing::seeded(11);
        let mut kept: Vec<Vec<u64>> = Vec::new();
        for round in 0..200u64 {
            let len = [1, 511, 512, 513, 4096, 100_000][next(6) as usize] + next(3) as usize;
            let buf: Vec<u64> = (0..len as u64).map(|i| i ^ round).collect();
            if round % 2 == 0 {
                kept.push(buf);
            } else {
                free_pages_first(buf);
            }
        }
        for (k, buf) in kept.iter().enumerate() {
            let round = 2 * k as u64;
            assert!(
                buf.iter().enumerate().all(|(i, &v)| v == i as u64 ^ round),
                "buffer {k}"
            );
        }
    }
}
