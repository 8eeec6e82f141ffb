//! Module functions: `.tiktoken` parsing, merges from ranks, and the safe-cut rule for
//! the tests.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::errors::{parse_error, recover_error};

/// The contents of a `.tiktoken` file as {token: rank}, in file order. Failures raise
/// ValueError with the args of `parse_error`.
#[pyfunction]
fn parse_tiktoken<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    let entries = py
        .detach(|| crate::io::tiktoken::parse(data))
        .map_err(|e| parse_error(py, e))?;
    let d = PyDict::new(py);
    for (token, rank) in entries {
        d.set_item(PyBytes::new(py, &token), rank)?;
    }
    Ok(d)
}

/// Merges of a rank-only vocabulary: `tokens[rank]` (None for skipped ranks) →
/// `(rank, left rank, right rank)` per multi-byte token, in rank order. Failures raise
/// ValueError with args ("duplicate", rank), ("missing_byte", byte) or
/// ("unreachable", rank, parts), for the Python side to word.
#[pyfunction]
fn recover_merges(py: Python<'_>, tokens: Vec<Option<Vec<u8>>>) -> PyResult<Vec<(u32, u32, u32)>> {
    py.detach(|| crate::bpe::ranks::recover_merges(&tokens))
        .map_err(recover_error)
}

/// Offsets where the built-in patterns allow cutting text (`chunking::is_newline_cut`),
/// for the tests that check that rule.
#[pyfunction]
fn newline_cuts(data: &[u8]) -> Vec<usize> {
    (0..=data.len())
        .filter(|&c| crate::io::chunking::is_newline_cut(data, c))
        .collect()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(newline_cuts, m)?)?;
    m.add_function(wrap_pyfunction!(recover_merges, m)?)?;
    m.add_function(wrap_pyfunction!(parse_tiktoken, m)?)?;
    Ok(())
}
