//! `Encoder`: the BPE encoder over a fixed vocabulary, merges and special tokens.

use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyString};
use rustc_hash::FxHashMap;

use super::errors::{encode_error, load_error, value_error};
use super::seam::Seam;
use crate::bpe::Encoder as CoreEncoder;
use crate::io::shards::ENCODE_BLOCK_BYTES;

#[pyclass(module = "bytepair._core", frozen)]
pub struct Encoder {
    seam: Seam<CoreEncoder>,
}

impl Encoder {
    fn wrap(core: CoreEncoder) -> Self {
        let (all, max_id) = (core.all_specials().clone(), core.model().max_id());
        Self {
            seam: Seam::new(core, all, max_id),
        }
    }

    fn core(&self) -> &CoreEncoder {
        &self.seam.core
    }
}

#[pymethods]
impl Encoder {
    #[new]
    #[pyo3(signature = (vocab, merges, special_tokens, pattern))]
    fn new(
        vocab: FxHashMap<u32, Vec<u8>>,
        merges: Vec<(u32, u32, u32)>,
        special_tokens: FxHashMap<String, u32>,
        pattern: Option<&str>,
    ) -> PyResult<Self> {
        CoreEncoder::new(vocab, &merges, special_tokens, pattern)
            .map(Self::wrap)
            .map_err(value_error)
    }

    /// An encoder straight from the bytes of a `.tiktoken` file, and the special
    /// tokens' ids in the order given (`io::tiktoken::load`): `special_tokens` are
    /// `(token, id or None)` pairs; a fault is a ValueError naming `path`.
    #[staticmethod]
    fn from_tiktoken(
        py: Python<'_>,
        data: &[u8],
        path: &str,
        special_tokens: Vec<(String, Option<u32>)>,
        pattern: Option<&str>,
    ) -> PyResult<(Self, Vec<(String, u32)>)> {
        py.detach(|| crate::io::tiktoken::load(data, &special_tokens, pattern))
            .map(|(core, specials)| (Self::wrap(core), specials))
            .map_err(|e| load_error(py, path, e))
    }

    /// Every token, special tokens included: {id: bytes} in id order.
    fn vocab<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (id, bytes) in self.core().model().tokens() {
            d.set_item(id, PyBytes::new(py, bytes))?;
        }
        Ok(d)
    }

    /// The merges in rank order as pairs of bytes.
    fn merges<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let model = self.core().model();
        let bytes = |id: u32| PyBytes::new(py, model.token_bytes(id).unwrap_or_default());
        let pairs: Vec<_> = model
            .merge_pairs()
            .into_iter()
            .map(|(l, r)| (bytes(l), bytes(r)))
            .collect();
        PyList::new(py, pairs)
    }

    /// Number of tokens, special tokens included.
    fn vocab_len(&self) -> usize {
        self.core().model().vocab_len()
    }

    /// Number of distinct merges.
    fn merge_count(&self) -> usize {
        self.core().model().merge_count()
    }

    /// The largest token id.
    fn max_id(&self) -> u32 {
        self.core().model().max_id()
    }

    /// Encodes `text`: `allowed_special` are encoded as special tokens (None: all); any
    /// of `disallowed_special` in the text raises ValueError.
    #[pyo3(signature = (text, allowed_special=None, disallowed_special=None))]
    fn encode<'py>(
        &self,
        py: Python<'py>,
        text: &str,
        allowed_special: Option<Vec<String>>,
        disallowed_special: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.seam
            .encode(py, text, allowed_special, disallowed_special)
    }

    /// Like `encode`, as little-endian uint32 bytes (for numpy, no list in between).
    #[pyo3(signature = (text, allowed_special=None, disallowed_special=None))]
    fn encode_to_bytes<'py>(
        &self,
        py: Python<'py>,
        text: &str,
        allowed_special: Option<Vec<String>>,
        disallowed_special: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.seam
            .encode_to_bytes(py, text, allowed_special, disallowed_special)
    }

    /// How many tokens `text` encodes to.
    #[pyo3(signature = (text, allowed_special=None, disallowed_special=None))]
    fn count(
        &self,
        py: Python<'_>,
        text: &str,
        allowed_special: Option<Vec<String>>,
        disallowed_special: Option<Vec<String>>,
    ) -> PyResult<usize> {
        self.seam
            .count(py, text, allowed_special, disallowed_special)
    }

    /// Encodes many texts on `num_threads` threads (see `py::seam`).
    #[pyo3(signature = (texts, allowed_special=None, num_threads=1, disallowed_special=None))]
    fn encode_batch<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyString>>,
        allowed_special: Option<Vec<String>>,
        num_threads: usize,
        disallowed_special: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let seam = &self.seam;
        seam.encode_batch(py, texts, allowed_special, num_threads, disallowed_special)
    }

    /// Encodes many texts into one flat array of ids and offsets (see `py::seam`).
    #[pyo3(signature = (texts, allowed_special=None, num_threads=1, disallowed_special=None))]
    fn encode_batch_to_bytes<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyString>>,
        allowed_special: Option<Vec<String>>,
        num_threads: usize,
        disallowed_special: Option<Vec<String>>,
    ) -> PyResult<(Bound<'py, PyByteArray>, Bound<'py, PyBytes>)> {
        let seam = &self.seam;
        seam.encode_batch_to_bytes(py, texts, allowed_special, num_threads, disallowed_special)
    }

    /// Streaming: the ids of the part of `text` later text cannot change, and how
    /// many characters that part is (see `py::seam`).
    #[pyo3(signature = (text, allowed_special, last, disallowed_special=None))]
    fn encode_prefix(
        &self,
        py: Python<'_>,
        text: &str,
        allowed_special: Option<Vec<String>>,
        last: bool,
        disallowed_special: Option<Vec<String>>,
    ) -> PyResult<(Vec<u32>, usize)> {
        let seam = &self.seam;
        seam.encode_prefix(py, text, allowed_special, last, disallowed_special)
    }

    /// Encodes the UTF-8 file at `path` into `out_path` as ids of `width` bytes
    /// (see `py::seam`). Returns the number of tokens.
    #[pyo3(signature = (path, out_path, width, allowed_special, disallowed_special, errors="strict", num_threads=1, progress=None, block_bytes=ENCODE_BLOCK_BYTES))]
    #[allow(clippy::too_many_arguments)]
    fn encode_file(
        &self,
        py: Python<'_>,
        path: &str,
        out_path: &str,
        width: usize,
        allowed_special: Vec<String>,
        disallowed_special: Vec<String>,
        errors: &str,
        num_threads: usize,
        progress: Option<Py<PyAny>>,
        block_bytes: usize,
    ) -> PyResult<u64> {
        let (allowed, forbidden) = (allowed_special, disallowed_special);
        self.seam.encode_file(
            py,
            path,
            out_path,
            width,
            allowed,
            forbidden,
            errors,
            num_threads,
            progress,
            block_bytes,
        )
    }

    fn encode_ordinary<'py>(&self, py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyList>> {
        let ids = py
            .detach(|| self.core().encode(text, self.core().no_specials()))
            .map_err(|e| encode_error(py, e))?;
        self.seam.id_list(py, &ids)
    }

    fn decode_bytes<'py>(&self, py: Python<'py>, ids: Vec<u32>) -> PyResult<Bound<'py, PyBytes>> {
        match py.detach(|| self.core().model().decode_bytes(&ids)) {
            Ok(b) => Ok(PyBytes::new(py, &b)),
            Err(id) => Err(PyKeyError::new_err(format!("unknown token id {id}"))),
        }
    }
}
