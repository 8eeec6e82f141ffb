//! Python bindings (module `bytepair._core`): argument conversion and GIL handling
//! only, split by what they bind — [`counter`] (PreTokenCounter), [`encoder`]
//! (Encoder), [`documents`] (DocumentBatches), [`checksum`] (Checksum: shard digests), [`spm`] (SentencePieceModel), [`spm_train`] (SentencePieceTrainer), [`functions`] (module functions), [`texts`] (a batch's strings as UTF-8) — with one mapping of the core's errors
//! to Python exceptions ([`errors`]). The algorithms are in the other modules.

mod buffers;
mod checksum;
mod counter;
mod documents;
mod encoder;
mod errors;
mod functions;
mod seam;
mod spm;
mod spm_train;
mod texts;

use std::sync::Mutex;

use pyo3::exceptions::{PyMemoryError, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rustc_hash::FxHashMap;

use crate::io::blocks::Utf8Errors;

/// The `errors=` argument of file readers.
fn utf8_errors(errors: &str) -> PyResult<Utf8Errors> {
    match errors {
        "strict" => Ok(Utf8Errors::Strict),
        "replace" => Ok(Utf8Errors::Replace),
        other => Err(PyValueError::new_err(format!(
            "errors must be 'strict' or 'replace', not {other:?}"
        ))),
    }
}

/// A vocabulary `{id: bytes}` from Python; an id that is no valid id is a ValueError
/// naming the token and the id (`errors::token_id`).
fn vocab_by_id(vocab: &Bound<'_, PyDict>) -> PyResult<FxHashMap<u32, Vec<u8>>> {
    let mut ids = FxHashMap::default();
    ids.try_reserve(vocab.len())
        .map_err(|_| PyMemoryError::new_err("no memory for the vocabulary"))?;
    for (id, bytes) in vocab {
        let bytes: Vec<u8> = bytes.extract()?;
        let token = || {
            format!(
                "token {}",
                errors::repr_bytes(vocab.py(), &bytes[..bytes.len().min(64)])
            )
        };
        ids.insert(errors::token_id(&id, token)?, bytes);
    }
    Ok(ids)
}

/// A pool of `num_threads` threads, made for one call: a pool kept in an object would
/// have no threads in a forked child, which would then wait for them forever. (The one
/// exception, `DocumentBatches`, runs threads of its own for its whole life anyway.)
fn thread_pool(num_threads: usize) -> PyResult<rayon::ThreadPool> {
    let n = num_threads.max(1);
    rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build()
        .map_err(|e| PyOSError::new_err(format!("cannot start {n} threads: {e}")))
}

/// A Python progress callback called from native code, and the exception that stopped
/// the work, if any.
struct Progress {
    callback: Option<Py<PyAny>>,
    failure: Mutex<Option<PyErr>>,
}

impl Progress {
    fn new(callback: Option<Py<PyAny>>) -> Self {
        Self {
            callback,
            failure: Mutex::new(None),
        }
    }

    /// Calls the callback with `value`. False means "stop": the callback raised (for
    /// example KeyboardInterrupt from a Ctrl-C signal check).
    fn report(&self, value: u64) -> bool {
        Python::attach(|py| {
            let result = py.check_signals().and_then(|()| match &self.callback {
                Some(cb) => cb.call1(py, (value,)).map(drop),
                None => Ok(()),
            });
            match result {
                Ok(()) => true,
                Err(e) => {
                    *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                    false
                }
            }
        })
    }

    /// The exception that stopped the work.
    fn failure(self) -> Option<PyErr> {
        self.failure.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    functions::register(m)?;
    m.add_class::<counter::PreTokenCounter>()?;
    m.add_class::<encoder::Encoder>()?;
    m.add_class::<documents::DocumentBatches>()?;
    m.add_class::<buffers::IdBuffer>()?;
    m.add_class::<checksum::Checksum>()?;
    m.add_function(wrap_pyfunction!(checksum::file_checksum, m)?)?;
    m.add_class::<spm::SentencePieceModel>()?;
    m.add_class::<spm_train::SentencePieceTrainer>()?;
    m.add("GPT2_PATTERN", crate::pretok::GPT2_PATTERN)?;
    m.add("CL100K_PATTERN", crate::pretok::CL100K_PATTERN)?;
    m.add("O200K_PATTERN", crate::pretok::O200K_PATTERN)?;
    m.add("LLAMA3_PATTERN", crate::pretok::LLAMA3_PATTERN)?;
    m.add("QWEN2_PATTERN", crate::pretok::QWEN2_PATTERN)?;
    m.add("QWEN3_5_PATTERN", crate::pretok::QWEN3_5_PATTERN)?;
    m.add("TEKKEN_PATTERN", crate::pretok::TEKKEN_PATTERN)?;
    m.add("BUILTIN_PATTERNS", crate::pretok::BUILTIN_PATTERNS)?;
    Ok(())
}
