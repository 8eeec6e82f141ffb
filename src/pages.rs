//! Large buffers backed by huge pages where the kernel offers them: output buffers,
//! and the hash tables of piece caches and counters ([`crate::packed`]).
//!
//! A batch's ids go into one buffer allocated at its largest possible size and written
//! once (`io::batch::encode_flat`). Each 4 KiB page of it costs a page fault when first
//! written: on this project's 2-core VM, 2,400 faults a 10 MB batch, 4.5 ms of kernel
//! time against 37 ms of encoding. `MADV_HUGEPAGE` asks for 2 MiB pages instead (one
//! fault per 512 small ones) on systems whose transparent huge pages are in `madvise`
//! mode (the default of most distributions). Pages never written still cost nothing.

/// Asks the kernel to back the whole 2 MiB pages inside `buf` with huge pages. A hint:
/// no effect on what the buffer holds, and none at all off Linux or when refused.
pub fn advise_huge_pages<T>(buf: &mut [T]) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = buf.as_mut_ptr() as usize;
        let end = start + std::mem::size_of_val(buf);
        let first = start.next_multiple_of(HUGE);
        let last = end / HUGE * HUGE;
        if last > first {
            // SAFETY: the range lies inside `buf`, which this call borrows mutably;
            // MADV_HUGEPAGE changes how its pages are backed, never their contents.
            unsafe {
                libc::madvise(
                    first as *mut libc::c_void,
                    last - first,
                    libc::MADV_HUGEPAGE,
                );
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}
