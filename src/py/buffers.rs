//! `IdBuffer`: ids lent to Python without a copy, through the buffer protocol (numpy's
//! `frombuffer` views them): a block of a file's ids, or the ids of one
//! `encode_to_numpy` call (read-only), or a batch's flat ids (writable, reused:
//! [`crate::pages::OutputPool`]).

use std::ptr::NonNull;

pub use crate::pages::OutputPool;

use pyo3::ffi;
use pyo3::prelude::*;

/// What an [`IdBuffer`] holds: little-endian ids, as bytes.
enum Held {
    /// Ids of the width the bytes' maker chose (a shard block: uint16 or uint32), which
    /// go back to their [`OutputPool`] when Python lets go of them.
    Bytes(Vec<u8>, OutputPool),
    /// uint32 ids, already little-endian.
    Ids(Vec<u32>),
    /// A batch's flat ids, which Python may write to, and which go back to their
    /// [`OutputPool`] when Python lets go of them. `data` is not touched from when it is
    /// lent until then: Python reaches the bytes through `at`, taken from it before.
    Writable {
        data: Vec<u8>,
        at: Lent,
        pool: OutputPool,
    },
}

/// Where a writable buffer's bytes start (see [`Held::Writable`]).
struct Lent(NonNull<u8>);

// SAFETY: a pointer into a `Vec<u8>` the same `Held` owns, used only to hand the bytes
// to Python, which synchronises its own writes (as for a bytearray's).
unsafe impl Send for Lent {}
// SAFETY: as above; Rust never reads or writes through it.
unsafe impl Sync for Lent {}

/// Ids (little-endian bytes: uint32, or a shard block's uint16) lent to Python without
/// a copy.
#[pyclass(module = "bytepair._core", frozen)]
pub struct IdBuffer {
    held: Held,
}

impl IdBuffer {
    /// A buffer of ids as bytes, which goes back to `pool` when Python lets go of it.
    pub fn reused(data: Vec<u8>, pool: &OutputPool) -> Self {
        Self {
            held: Held::Bytes(data, pool.clone()),
        }
    }

    /// A batch's flat ids (little-endian bytes, written into a buffer `pool` gave),
    /// lent to Python writable; the buffer goes back to `pool` when Python lets go.
    pub fn writable(mut data: Vec<u8>, pool: &OutputPool) -> Self {
        let at = Lent(NonNull::new(data.as_mut_ptr()).expect("a Vec's pointer is not null"));
        Self {
            held: Held::Writable {
                data,
                at,
                pool: pool.clone(),
            },
        }
    }

    /// A buffer of `ids` as they are: no copy into a `bytes` object (a tenth of a
    /// warm one-thread `encode_to_numpy`, counting the copy's page faults).
    pub fn of_ids(mut ids: Vec<u32>) -> Self {
        if cfg!(target_endian = "big") {
            ids.iter_mut().for_each(|id| *id = id.to_le());
        }
        // Encoding reserves for a third of the text's bytes; give back what a long
        // text left unused (a large allocation shrinks in place).
        if ids.capacity() - ids.len() > ids.len() / 8 + 1024 {
            ids.shrink_to_fit();
        }
        Self {
            held: Held::Ids(ids),
        }
    }

    /// Where the bytes start, how many there are, and whether Python may write them.
    fn bytes(&self) -> (*mut u8, usize, bool) {
        match &self.held {
            Held::Bytes(data, _) => (data.as_ptr().cast_mut(), data.len(), false),
            Held::Ids(ids) => (ids.as_ptr().cast::<u8>().cast_mut(), ids.len() * 4, false),
            Held::Writable { data, at, .. } => (at.0.as_ptr(), data.len(), true),
        }
    }
}

impl Drop for IdBuffer {
    fn drop(&mut self) {
        match &mut self.held {
            Held::Bytes(data, pool) | Held::Writable { data, pool, .. } => {
                pool.give_back(std::mem::take(data))
            }
            Held::Ids(_) => {}
        }
    }
}

#[pymethods]
impl IdBuffer {
    /// # Safety
    /// Called by Python with a view to fill, as the buffer protocol specifies.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: std::os::raw::c_int,
    ) -> PyResult<()> {
        let (data, len, writable) = slf.get().bytes();
        let len = ffi::Py_ssize_t::try_from(len).expect("a buffer's length fits");
        // SAFETY: the data lives as long as `slf`, which the view holds a reference to
        // (PyBuffer_FillInfo sets `view.obj`). Read-only ones: no one writes to them. A
        // writable one: Rust does not touch its bytes while Python holds it (Drop is
        // after the last view is released).
        let readonly = (!writable).into();
        let done = unsafe {
            ffi::PyBuffer_FillInfo(view, slf.as_ptr(), data.cast(), len, readonly, flags)
        };
        if done == -1 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    fn __len__(&self) -> usize {
        self.bytes().1
    }
}
