//! `IdBuffer`: ids lent to Python without a copy, through the buffer protocol (numpy's
//! `frombuffer` views them, read-only): a block of a file's ids, or the ids of one
//! `encode_to_numpy` call.

use std::sync::{Arc, Mutex};

use pyo3::ffi;
use pyo3::prelude::*;

/// Id buffers Python is done with, for the encoder to fill again: a fresh buffer per
/// block made the kernel map and zero its pages every time.
pub type Spare = Arc<Mutex<Vec<Vec<u8>>>>;

/// Buffers kept for reuse: the one Python holds, the one waiting, the one being filled.
const SPARE_BUFFERS: usize = 3;

/// What an [`IdBuffer`] holds: little-endian ids, as bytes.
enum Held {
    /// Ids of the width the bytes' maker chose (a shard block: uint16 or uint32), which
    /// go back to `Spare` when Python lets go of them.
    Bytes(Vec<u8>, Spare),
    /// uint32 ids, already little-endian.
    Ids(Vec<u32>),
}

/// Ids (little-endian bytes: uint32, or a shard block's uint16) lent to Python without
/// a copy.
#[pyclass(module = "bytepair._core", frozen)]
pub struct IdBuffer {
    held: Held,
}

impl IdBuffer {
    /// A buffer of ids as bytes, which goes back to `spare` when Python lets go of it.
    pub fn reused(data: Vec<u8>, spare: &Spare) -> Self {
        Self {
            held: Held::Bytes(data, Arc::clone(spare)),
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

    fn bytes(&self) -> (*const u8, usize) {
        match &self.held {
            Held::Bytes(data, _) => (data.as_ptr(), data.len()),
            Held::Ids(ids) => (ids.as_ptr().cast(), ids.len() * 4),
        }
    }
}

impl Drop for IdBuffer {
    fn drop(&mut self) {
        if let Held::Bytes(data, spare) = &mut self.held {
            let mut spare = spare.lock().unwrap_or_else(|e| e.into_inner());
            if spare.len() < SPARE_BUFFERS {
                spare.push(std::mem::take(data));
            }
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
        let (data, len) = slf.get().bytes();
        let len = ffi::Py_ssize_t::try_from(len).expect("a buffer's length fits");
        // SAFETY: the data lives as long as `slf`, which the view holds a reference to
        // (PyBuffer_FillInfo sets `view.obj`); read-only, so no one writes to it.
        let done = unsafe {
            ffi::PyBuffer_FillInfo(view, slf.as_ptr(), data.cast_mut().cast(), len, 1, flags)
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
