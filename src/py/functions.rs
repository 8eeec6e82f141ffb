//! Module functions: `.tiktoken` parsing, merges from ranks, special-token ids, shard
//! framing, and the safe-cut rule for the tests.

use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use rustc_hash::FxHashMap;

use super::errors::{parse_error, recover_error, repr, repr_bytes, value_error};
use crate::bpe::ranks::{recover_merges, MAX_RANK};
use crate::bpe::special_ids::{assign_special_ids as assign_special_ids_core, Unnumbered};
use crate::io::chunking::TextCuts;
use crate::io::framing;

/// The contents of a `.tiktoken` file as {token: rank}, in file order; a fault is a
/// ValueError naming `path` and the line (`io::tiktoken` has the grammar).
#[pyfunction]
fn parse_tiktoken<'py>(py: Python<'py>, data: &[u8], path: &str) -> PyResult<Bound<'py, PyDict>> {
    let entries = py
        .detach(|| crate::io::tiktoken::parse(data))
        .map_err(|e| parse_error(py, path, e))?;
    let d = PyDict::new(py);
    for (token, rank) in entries {
        d.set_item(PyBytes::new(py, &token), rank)?;
    }
    Ok(d)
}

/// The merges a {token: rank} table stands for, as `(left, right)` bytes in rank order
/// (`bpe::ranks::recover_merges`); ValueError says which token is at fault.
#[pyfunction]
fn merges_from_ranks<'py>(
    py: Python<'py>,
    ranks: &Bound<'py, PyDict>,
) -> PyResult<Vec<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
    let mut entries: Vec<(Vec<u8>, u32)> = Vec::with_capacity(ranks.len());
    for (token, rank) in ranks.iter() {
        let token: Vec<u8> = token.extract()?;
        let rank = rank
            .extract::<u32>()
            .ok()
            .filter(|&r| r <= MAX_RANK)
            .ok_or_else(|| {
                value_error(format!(
                    "token {} has rank {}, outside 0..{MAX_RANK}",
                    repr_bytes(py, &token),
                    rank.repr().map_or_else(|_| "?".into(), |r| r.to_string())
                ))
            })?;
        entries.push((token, rank));
    }
    let triples = py
        .detach(|| recover_merges(&entries))
        .map_err(|e| recover_error(py, e))?;
    let token_at: FxHashMap<u32, &[u8]> = entries.iter().map(|(t, r)| (*r, &t[..])).collect();
    let bytes = |rank: u32| PyBytes::new(py, token_at[&rank]);
    Ok(triples
        .into_iter()
        .map(|(_, left, right)| (bytes(left), bytes(right)))
        .collect())
}

/// Ids for special tokens given as `(token, id or None)` over the ordinary `vocab`
/// (`bpe::special_ids`): an unnumbered token takes the id of its own bytes when
/// `same_bytes` (the CS336 constructor), else the next free id (`with_special_tokens`).
#[pyfunction]
fn assign_special_ids(
    py: Python<'_>,
    vocab: &Bound<'_, PyDict>,
    special_tokens: Vec<(String, Option<u32>)>,
    same_bytes: bool,
) -> PyResult<Vec<(String, u32)>> {
    let vocab = super::vocab_by_id(vocab)?;
    let token_at: FxHashMap<u32, &[u8]> = vocab.iter().map(|(&i, t)| (i, &t[..])).collect();
    let rule = if same_bytes {
        Unnumbered::SameBytesOrNext
    } else {
        Unnumbered::Next
    };
    assign_special_ids_core(&token_at, &special_tokens, rule)
        .map_err(|e| value_error(e.message(&|s| repr(py, s), &|b| repr_bytes(py, b))))
}

/// Offsets where the built-in patterns allow cutting text (newline and space cuts,
/// `io::chunking`): what the Python planners cut files and documents at.
#[pyfunction]
fn pattern_cuts(data: &[u8]) -> Vec<usize> {
    (0..=data.len())
        .filter(|&c| TextCuts::Pattern.at(data, c))
        .collect()
}

/// The last offset, in characters, where the built-in patterns allow cutting `text`
/// (as [`pattern_cuts`]), or 0 if there is none: where long documents are split into
/// parts (`bytepair.sources.text.last_cut`).
#[pyfunction]
fn last_pattern_cut(text: &str) -> usize {
    let bytes = text.as_bytes();
    let cut = (1..bytes.len())
        .rev()
        .find(|&c| TextCuts::Pattern.at(bytes, c))
        .unwrap_or(0);
    text[..cut].chars().count()
}

/// A batch's items framed for a shard folder (`io::framing`): `ids` and `offsets`
/// (buffers of little-endian ids, 2 or 4 bytes each, and int64 item offsets) with
/// `before` ahead of each item that begins a document and `after` behind each that
/// ends one, as `width`-byte ids. Returns `(ids, lengths)`; `ids` is None when it
/// would equal the input's bytes. A ValueError names what is wrong.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn frame_items<'py>(
    py: Python<'py>,
    ids: &Bound<'py, PyAny>,
    offsets: &Bound<'py, PyAny>,
    firsts: &[u8],
    lasts: &[u8],
    before: Vec<u32>,
    after: Vec<u32>,
    width: usize,
) -> PyResult<(Option<Bound<'py, PyBytes>>, Vec<u64>)> {
    let ids = PyUntypedBuffer::get(ids)?;
    let offsets = PyUntypedBuffer::get(offsets)?;
    if !ids.is_c_contiguous() || !offsets.is_c_contiguous() {
        return Err(PyValueError::new_err(
            "frame_items needs contiguous buffers of ids and offsets",
        ));
    }
    // SAFETY: both buffers are held (alive and in place) until the end of this call,
    // and are C-contiguous of `len_bytes()` bytes.
    let (id_bytes, offset_bytes) = unsafe {
        (
            std::slice::from_raw_parts(ids.buf_ptr() as *const u8, ids.len_bytes()),
            std::slice::from_raw_parts(offsets.buf_ptr() as *const u8, offsets.len_bytes()),
        )
    };
    let items = framing::Items {
        ids: id_bytes,
        id_width: ids.item_size(),
        offsets: offset_bytes,
        firsts,
        lasts,
    };
    let framed =
        framing::frame_items(&items, &before, &after, width).map_err(PyValueError::new_err)?;
    let out = framed.ids.map(|bytes| PyBytes::new(py, &bytes));
    Ok((out, framed.lengths))
}

/// Whether each document of `indices` goes to a shard folder's val split under
/// `val_fraction` (`io::splits`; `prefix`: the bytes of `"{seed}:"`): the choice
/// `shards/writer.py`'s `in_val` makes, for a batch at a time.
#[pyfunction]
fn val_choices(prefix: &[u8], indices: Vec<u64>, fraction: f64) -> Vec<bool> {
    crate::io::splits::val_choices(prefix, &indices, fraction)
}

/// Whether the built-in pre-tokenizers find runs with SIMD instructions in this
/// process: on x86_64, unless `BYTEPAIR_SCALAR` was set when first asked.
#[pyfunction]
fn simd_in_use() -> bool {
    crate::pretok::Simd::detected() != crate::pretok::Simd::Scalar
}

/// The instructions the built-in pre-tokenizers use in this process: "scalar",
/// "sse2" or "avx2" (the widest this CPU has, capped by `BYTEPAIR_SCALAR`
/// or `BYTEPAIR_SIMD` when first asked).
#[pyfunction]
fn simd_level() -> &'static str {
    crate::pretok::Simd::detected().name()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simd_in_use, m)?)?;
    m.add_function(wrap_pyfunction!(simd_level, m)?)?;
    m.add_function(wrap_pyfunction!(assign_special_ids, m)?)?;
    m.add_function(wrap_pyfunction!(pattern_cuts, m)?)?;
    m.add_function(wrap_pyfunction!(last_pattern_cut, m)?)?;
    m.add_function(wrap_pyfunction!(merges_from_ranks, m)?)?;
    m.add_function(wrap_pyfunction!(parse_tiktoken, m)?)?;
    m.add_function(wrap_pyfunction!(frame_items, m)?)?;
    m.add_function(wrap_pyfunction!(val_choices, m)?)?;
    Ok(())
}
