//! `Checksum` and `file_checksum`: the BLAKE3 digest a shard folder's manifest records
//! for each file (`shards/writer.py` hashes a shard while writing it, `shards/reader.py`
//! checks it). BLAKE3 (the `blake3` crate, SIMD on every x86_64 CPU) hashes ids several
//! times faster than SHA-256 does on a CPU without SHA instructions, where the digest of
//! every shard was a tenth of a shard folder's CPU time.

use std::fs::File;
use std::io::Read;

use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

/// Buffers shorter than this are hashed holding the GIL (releasing it costs more).
const DETACH_BYTES: usize = 1 << 16;

/// A running BLAKE3 digest, fed with buffers (bytes, memoryview, numpy arrays).
#[pyclass(module = "bytepair._core")]
#[derive(Default)]
pub struct Checksum {
    hasher: blake3::Hasher,
}

#[pymethods]
impl Checksum {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// Adds the bytes of a C-contiguous buffer.
    fn update(&mut self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let buffer = PyUntypedBuffer::get(data)?;
        if !buffer.is_c_contiguous() {
            return Err(PyValueError::new_err(
                "Checksum.update needs a contiguous buffer",
            ));
        }
        let len = buffer.len_bytes();
        // SAFETY: the buffer is held (and so kept alive and in place) until the end of
        // this call, and is C-contiguous of `len` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(buffer.buf_ptr() as *const u8, len) };
        if len < DETACH_BYTES {
            self.hasher.update(bytes);
        } else {
            // The slice is Send; the writer's ids are not written while they are hashed.
            let hasher = &mut self.hasher;
            py.detach(|| {
                hasher.update(bytes);
            });
        }
        Ok(())
    }

    /// The digest so far, as 64 hex digits.
    fn hexdigest(&self) -> String {
        self.hasher.finalize().to_hex().to_string()
    }
}

/// The BLAKE3 digest of the file at `path`, as 64 hex digits.
#[pyfunction]
pub fn file_checksum(py: Python<'_>, path: std::path::PathBuf) -> PyResult<String> {
    py.detach(|| {
        let mut file = File::open(&path)?;
        let mut hasher = blake3::Hasher::new();
        let mut block = vec![0u8; 1 << 20];
        loop {
            match file.read(&mut block)? {
                0 => return Ok(hasher.finalize().to_hex().to_string()),
                n => {
                    hasher.update(&block[..n]);
                }
            }
        }
    })
    .map_err(|e: std::io::Error| PyOSError::new_err(format!("{}: {e}", path.display())))
}
