//! The one mapping of the core's errors to Python exceptions. Messages are worded by
//! the core; quoted text gets Python's own `repr()`.

use pyo3::exceptions::{PyKeyboardInterrupt, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;

use super::Progress;
use crate::io::batch::BatchError;
use crate::io::blocks::ReadError;
use crate::model::EncodeError;

pub fn value_error(message: impl Into<String>) -> PyErr {
    PyValueError::new_err(message.into())
}

/// Python's `repr()` of a string.
pub fn repr(py: Python<'_>, text: &str) -> String {
    PyString::new(py, text)
        .repr()
        .map_or_else(|_| format!("{text:?}"), |r| r.to_string())
}

/// ValueError with the core's message, quoting with Python's `repr()`.
pub fn encode_error(py: Python<'_>, e: EncodeError) -> PyErr {
    value_error(e.message(&|s| repr(py, s)))
}

/// A batch failed: the text's error, or the exception the receiving side raised.
pub fn batch_error(py: Python<'_>, e: BatchError<PyErr>) -> PyErr {
    match e {
        BatchError::Encode(e) => encode_error(py, e),
        BatchError::Receive(e) => e,
    }
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

/// A `.tiktoken` parse failure as ValueError args: ("unsure",) when the Python reader
/// must decide, ("line", lineno) for a line the Python reader words, else
/// ("duplicate_token", lineno, first lineno, token) / ("duplicate_rank", lineno, first
/// lineno, rank).
pub fn parse_error(py: Python<'_>, e: crate::io::tiktoken::ParseError) -> PyErr {
    use crate::io::tiktoken::ParseError;
    match e {
        ParseError::Unsure => PyValueError::new_err(("unsure",)),
        ParseError::Fields { line } | ParseError::Base64 { line } | ParseError::Rank { line } => {
            PyValueError::new_err(("line", line))
        }
        ParseError::DuplicateToken { line, first, token } => PyValueError::new_err((
            "duplicate_token",
            line,
            first,
            pyo3::types::PyBytes::new(py, &token).unbind(),
        )),
        ParseError::DuplicateRank { line, first, rank } => {
            PyValueError::new_err(("duplicate_rank", line, first, rank))
        }
    }
}

pub fn recover_error(e: crate::bpe::ranks::RecoverError) -> PyErr {
    use crate::bpe::ranks::RecoverError;
    match e {
        RecoverError::Duplicate { rank } => PyValueError::new_err(("duplicate", rank)),
        RecoverError::MissingByte(b) => PyValueError::new_err(("missing_byte", b)),
        RecoverError::Unreachable { rank, parts } => {
            PyValueError::new_err(("unreachable", rank, parts))
        }
    }
}

pub fn tiktoken_error(py: Python<'_>, e: crate::io::tiktoken::LoadError) -> PyErr {
    use crate::io::tiktoken::LoadError;
    match e {
        LoadError::Parse(e) => parse_error(py, e),
        LoadError::Recover(e) => recover_error(e),
        LoadError::SpecialIsRank => PyValueError::new_err(("unsure",)),
        LoadError::Encoder(message) => PyValueError::new_err(message),
    }
}
