//! `Checksum` and `file_checksum`: the digests a shard folder's manifest records for
//! each file (`shards/writer.py` hashes a shard while writing it, `shards/reader.py`
//! checks it). XXH3-128 (the `xxhash-rust` crate) since manifest version 3: it hashes
//! ids at 3-4 times BLAKE3's speed here, and BLAKE3's digest of every shard, made on the
//! thread that writes them beside the two that encode, cost a shard folder 7-10% of
//! its wall time on two cores. BLAKE3 (version 2) and SHA-256 (version 1, in Python)
//! are still checked in older folders.

use std::fs::File;
use std::io::Read;

use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use xxhash_rust::xxh3::Xxh3Default;

/// Buffers shorter than this are hashed holding the GIL (releasing it costs more).
const DETACH_BYTES: usize = 1 << 16;

/// A running XXH3-128 digest, fed with buffers (bytes, memoryview, numpy arrays).
#[pyclass(module = "bytepair._core")]
#[derive(Default)]
pub struct Checksum {
    hasher: Xxh3Default,
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

    /// The digest so far, as 32 hex digits (xxHash's canonical form: big-endian, as
    /// `xxhash.xxh3_128().hexdigest()` and `xxhsum -H2` print it).
    fn hexdigest(&self) -> String {
        format!("{:032x}", self.hasher.digest128())
    }
}

/// The digest of the file at `path`, in hex: `algorithm` "xxh3_128" (what shard folders
/// record now) or "blake3" (manifest version 2).
#[pyfunction]
#[pyo3(signature = (path, algorithm = "xxh3_128"))]
pub fn file_checksum(
    py: Python<'_>,
    path: std::path::PathBuf,
    algorithm: &str,
) -> PyResult<String> {
    enum Hasher {
        Xxh3(Box<Xxh3Default>),
        Blake3(Box<blake3::Hasher>),
    }
    let mut hasher = match algorithm {
        "xxh3_128" => Hasher::Xxh3(Box::default()),
        "blake3" => Hasher::Blake3(Box::default()),
        _ => {
            return Err(PyValueError::new_err(format!(
                "file_checksum: no digest named {algorithm:?} (xxh3_128 or blake3)"
            )))
        }
    };
    py.detach(|| {
        let mut file = File::open(&path)?;
        let mut block = vec![0u8; 1 << 20];
        loop {
            match file.read(&mut block)? {
                0 => break,
                n => match &mut hasher {
                    Hasher::Xxh3(h) => h.update(&block[..n]),
                    Hasher::Blake3(h) => {
                        h.update(&block[..n]);
                    }
                },
            }
        }
        Ok(match &hasher {
            Hasher::Xxh3(h) => format!("{:032x}", h.digest128()),
            Hasher::Blake3(h) => h.finalize().to_hex().to_string(),
        })
    })
    .map_err(|e: std::io::Error| PyOSError::new_err(format!("{}: {e}", path.display())))
}
