//! The one mapping of the core's errors to Python exceptions. Messages are worded by
//! the core; quoted text and bytes get Python's own `repr()`.

use std::sync::Mutex;

use pyo3::exceptions::{PyKeyboardInterrupt, PyMemoryError, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyString};

use super::Progress;
use crate::bpe::ranks::RecoverError;
use crate::io::batch::BatchError;
use crate::io::blocks::ReadError;
use crate::io::tiktoken::{LoadError, ParseError, Quote};
use crate::model::{id_error, EncodeError};

/// `id` as a token id: a Python int no u32 holds (negative, or 2**32 and past) is a
/// ValueError naming `what` (the token) and the id, as the core words one past
/// [`crate::model::MAX_ID`]; ids up to 2**32 - 1 reach the core, which checks them.
pub fn token_id(id: &Bound<'_, PyAny>, what: impl FnOnce() -> String) -> PyResult<u32> {
    match id.extract::<u32>() {
        Ok(id) => Ok(id),
        Err(_) if id.is_instance_of::<PyInt>() => {
            Err(value_error(id_error(&what(), &id.to_string())))
        }
        Err(e) => Err(e),
    }
}

pub fn value_error(message: impl Into<String>) -> PyErr {
    PyValueError::new_err(message.into())
}

/// Quoted values longer than this many characters or bytes are cut (a damaged file can
/// hold a 10 MB "token"), as Python's `bytepair.quoting.short` cuts them.
const QUOTE_LIMIT: usize = 60;

/// Python's `repr()` of a string, cut after [`QUOTE_LIMIT`] characters.
pub fn repr(py: Python<'_>, text: &str) -> String {
    let head = match text.char_indices().nth(QUOTE_LIMIT) {
        Some((at, _)) => &text[..at],
        None => text,
    };
    let quoted = PyString::new(py, head)
        .repr()
        .map_or_else(|_| format!("{head:?}"), |r| r.to_string());
    if head.len() == text.len() {
        quoted
    } else {
        format!("{quoted}… ({} characters)", text.chars().count())
    }
}

/// ValueError with the core's message, quoting with Python's `repr()`; MemoryError
/// when memory for the encoding could not be had.
pub fn encode_error(py: Python<'_>, e: EncodeError) -> PyErr {
    let message = e.message(&|s| repr(py, s));
    match e {
        EncodeError::OutOfMemory { .. } => PyMemoryError::new_err(message),
        _ => value_error(message),
    }
}

/// A batch failed: the text's error, or the exception the receiving side raised.
pub fn batch_error(py: Python<'_>, e: BatchError<PyErr>) -> PyErr {
    match e {
        BatchError::Encode(e) => encode_error(py, e),
        BatchError::Receive(e) => e,
    }
}

/// Keeps `e`, a Python exception met where it cannot be raised (on a reading thread),
/// in `failure` for the caller to raise again ([`kept_or`]); what it says.
pub fn keep(failure: &Mutex<Option<PyErr>>, e: PyErr) -> String {
    let said = e.to_string();
    *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
    said
}

/// The exception [`keep`] kept in `failure`, as it was raised, or else `otherwise()`.
pub fn kept_or(failure: &Mutex<Option<PyErr>>, otherwise: impl FnOnce() -> PyErr) -> PyErr {
    let kept = failure.lock().unwrap_or_else(|e| e.into_inner()).take();
    kept.unwrap_or_else(otherwise)
}

/// A failure reading the file at `path`: OSError for I/O, the callback's exception
/// when it stopped the work, else ValueError naming the file.
pub fn read_error(path: &str, e: ReadError, progress: Progress) -> PyErr {
    match e {
        ReadError::Interrupted => progress
            .failure()
            .unwrap_or_else(|| PyKeyboardInterrupt::new_err("interrupted")),
        ReadError::Io(e) => PyOSError::new_err(format!("{path}: {e}")),
        e => value_error(format!("{path}: {e}")),
    }
}

/// Python's `repr()` of bytes, cut after [`QUOTE_LIMIT`] bytes.
pub fn repr_bytes(py: Python<'_>, bytes: &[u8]) -> String {
    let head = &bytes[..bytes.len().min(QUOTE_LIMIT)];
    let quoted = PyBytes::new(py, head)
        .repr()
        .map_or_else(|_| format!("{head:?}"), |r| r.to_string());
    if head.len() == bytes.len() {
        quoted
    } else {
        format!("{quoted}… ({} bytes)", bytes.len())
    }
}

/// ValueError for a `.tiktoken` file at `path` that did not parse.
pub fn parse_error(py: Python<'_>, path: &str, e: ParseError) -> PyErr {
    load_error(py, path, LoadError::Parse(e))
}

/// ValueError for ranks that stand for no merges.
pub fn recover_error(py: Python<'_>, e: RecoverError) -> PyErr {
    value_error(e.message(&|b| repr_bytes(py, b)))
}

/// ValueError for a `.tiktoken` file at `path` that made no encoder.
pub fn load_error(py: Python<'_>, path: &str, e: LoadError) -> PyErr {
    let quote = Quote {
        text: &|s| repr(py, s),
        bytes: &|b| repr_bytes(py, b),
    };
    value_error(e.message(path, &quote))
}
