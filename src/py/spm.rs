//! Python binding of the SentencePiece model kind: `bytepair._core.SentencePieceModel`.
//! Argument conversion and GIL handling only; the algorithm is in `spm/`.

use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::spm::{PieceType, SpmError, SpmModel};

/// A SentencePiece BPE model (`tokenizer.model`), encoding and decoding as the
/// `sentencepiece` library does.
#[pyclass(module = "bytepair._core", frozen)]
pub struct SentencePieceModel {
    core: SpmModel,
}

fn error(e: SpmError) -> PyErr {
    match e {
        SpmError::OutOfRange(why) => PyIndexError::new_err(why),
        other => PyValueError::new_err(other.to_string()),
    }
}

fn type_name(kind: PieceType) -> &'static str {
    match kind {
        PieceType::Normal => "NORMAL",
        PieceType::Unknown => "UNKNOWN",
        PieceType::Control => "CONTROL",
        PieceType::UserDefined => "USER_DEFINED",
        PieceType::Unused => "UNUSED",
        PieceType::Byte => "BYTE",
    }
}

#[pymethods]
impl SentencePieceModel {
    /// Loads the bytes of a `.model` file; `path` (for messages) names it.
    /// Raises ValueError naming the path and, for a corrupt file, the byte offset.
    #[staticmethod]
    #[pyo3(signature = (data, path = "<bytes>"))]
    fn from_bytes(py: Python<'_>, data: &[u8], path: &str) -> PyResult<Self> {
        let core = py.detach(|| SpmModel::from_bytes(data));
        let core = core.map_err(|e| PyValueError::new_err(format!("{path}: {e}")))?;
        Ok(Self { core })
    }

    /// Text -> ids, as `SentencePieceProcessor.encode(text, add_bos=, add_eos=)`.
    #[pyo3(signature = (text, add_bos = false, add_eos = false))]
    fn encode(
        &self,
        py: Python<'_>,
        text: &str,
        add_bos: bool,
        add_eos: bool,
    ) -> PyResult<Vec<u32>> {
        py.detach(|| self.core.encode(text, add_bos, add_eos))
            .map_err(error)
    }

    /// Many texts -> ids, on `num_threads` threads.
    #[pyo3(signature = (texts, add_bos = false, add_eos = false, num_threads = 1))]
    fn encode_batch(
        &self,
        py: Python<'_>,
        texts: Vec<String>,
        add_bos: bool,
        add_eos: bool,
        num_threads: usize,
    ) -> PyResult<Vec<Vec<u32>>> {
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        py.detach(|| {
            self.core
                .encode_batch(&texts, add_bos, add_eos, num_threads)
        })
        .map_err(error)
    }

    /// Ids -> text, as `SentencePieceProcessor.decode(ids)`; IndexError for an
    /// id outside the vocabulary.
    fn decode(&self, py: Python<'_>, ids: Vec<i64>) -> PyResult<String> {
        let n = self.core.len();
        let ids = ids
            .iter()
            .map(|&id| {
                u32::try_from(id)
                    .ok()
                    .filter(|&i| (i as usize) < n)
                    .ok_or(id)
            })
            .collect::<Result<Vec<u32>, i64>>()
            .map_err(|id| {
                PyIndexError::new_err(format!("id {id} is not in the vocabulary of {n}"))
            })?;
        py.detach(|| self.core.decode(&ids)).map_err(error)
    }

    fn id_to_piece(&self, id: usize) -> PyResult<String> {
        let entry = self.core.entries.get(id);
        let entry =
            entry.ok_or_else(|| PyIndexError::new_err(format!("id {id} is out of range")))?;
        Ok(entry.piece.clone())
    }

    /// The id of `piece`, or the unknown id (as sentencepiece answers).
    fn piece_to_id(&self, piece: &str) -> u32 {
        self.core.piece_to_id(piece)
    }

    /// Every piece in id order: (piece, score, type name such as "NORMAL", "BYTE").
    fn pieces(&self) -> Vec<(String, f32, &'static str)> {
        let entries = self.core.entries.iter();
        entries
            .map(|e| (e.piece.clone(), e.score, type_name(e.kind)))
            .collect()
    }

    /// The text as the model's normalizer rewrites it before encoding.
    fn normalize(&self, py: Python<'_>, text: &str) -> String {
        py.detach(|| self.core.normalizer.normalize(text))
    }

    /// The model serialized back to `.model` bytes (identical for a loaded,
    /// unchanged model).
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.core.proto.to_bytes())
    }

    #[getter]
    fn vocab_size(&self) -> usize {
        self.core.len()
    }

    #[getter]
    fn unk_id(&self) -> u32 {
        self.core.unk_id
    }

    #[getter]
    fn bos_id(&self) -> Option<u32> {
        self.core.bos_id
    }

    #[getter]
    fn eos_id(&self) -> Option<u32> {
        self.core.eos_id
    }

    fn __len__(&self) -> usize {
        self.core.len()
    }
}
