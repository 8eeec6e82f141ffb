//! Python binding of SentencePiece training: `bytepair._core.train_sentencepiece`.
//! Argument conversion and GIL handling only; the algorithm is in `spm/train.rs`.

use pyo3::exceptions::{PyKeyboardInterrupt, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::Progress;
use crate::io::blocks::ReadError;
use crate::spm::train::{identity_spec, train_files, TrainError, TrainOptions, TrainProgress};
use crate::spm::ModelProto;

struct Callbacks {
    bytes: Progress,
    pieces: Progress,
}

impl TrainProgress for Callbacks {
    fn bytes_read(&self, n: u64) -> bool {
        self.bytes.report(n)
    }
    fn pieces(&self, n: usize) -> bool {
        self.pieces.report(n as u64)
    }
}

/// Trains a SentencePiece BPE model on the lines of `files` and returns the
/// `.model` bytes. `normalizer_model`: the bytes of a `.model` whose normalizer
/// (rule name and charsmap) to use; None for identity. The other arguments are
/// sentencepiece's options (see `bytepair.train_sentencepiece`).
#[pyfunction]
#[pyo3(signature = (
    files, vocab_size, *, normalizer_model = None, character_coverage = 0.9995,
    byte_fallback = false, add_dummy_prefix = true, remove_extra_whitespaces = true,
    split_digits = false, split_by_whitespace = true, split_by_unicode_script = true,
    split_by_number = true, max_piece_length = 16, treat_whitespace_as_suffix = false,
    allow_whitespace_only_pieces = false, user_defined_symbols = Vec::new(),
    control_symbols = Vec::new(), unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1,
    unk_piece = "<unk>".to_string(), bos_piece = "<s>".to_string(),
    eos_piece = "</s>".to_string(), pad_piece = "<pad>".to_string(),
    max_sentence_length = 4192, input_sentence_size = 0, num_threads = 1,
    on_bytes = None, on_pieces = None,
))]
#[allow(clippy::too_many_arguments)]
pub fn train_sentencepiece<'py>(
    py: Python<'py>,
    files: Vec<String>,
    vocab_size: usize,
    normalizer_model: Option<&[u8]>,
    character_coverage: f32,
    byte_fallback: bool,
    add_dummy_prefix: bool,
    remove_extra_whitespaces: bool,
    split_digits: bool,
    split_by_whitespace: bool,
    split_by_unicode_script: bool,
    split_by_number: bool,
    max_piece_length: usize,
    treat_whitespace_as_suffix: bool,
    allow_whitespace_only_pieces: bool,
    user_defined_symbols: Vec<String>,
    control_symbols: Vec<String>,
    unk_id: i32,
    bos_id: i32,
    eos_id: i32,
    pad_id: i32,
    unk_piece: String,
    bos_piece: String,
    eos_piece: String,
    pad_piece: String,
    max_sentence_length: usize,
    input_sentence_size: u64,
    num_threads: usize,
    on_bytes: Option<Py<PyAny>>,
    on_pieces: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let normalizer = match normalizer_model {
        None => identity_spec(),
        Some(data) => ModelProto::parse(data)
            .map_err(|e| PyValueError::new_err(format!("normalizer_model: {e}")))?
            .normalizer_spec
            .ok_or_else(|| PyValueError::new_err("normalizer_model has no normalizer spec"))?,
    };
    let mut o = TrainOptions::new(vocab_size);
    o.normalizer = normalizer;
    o.character_coverage = character_coverage;
    o.byte_fallback = byte_fallback;
    o.add_dummy_prefix = add_dummy_prefix;
    o.remove_extra_whitespaces = remove_extra_whitespaces;
    o.validity.split_digits = split_digits;
    o.validity.split_by_whitespace = split_by_whitespace;
    o.validity.split_by_unicode_script = split_by_unicode_script;
    o.validity.split_by_number = split_by_number;
    o.validity.max_piece_length = max_piece_length;
    o.validity.treat_whitespace_as_suffix = treat_whitespace_as_suffix;
    o.validity.allow_whitespace_only_pieces = allow_whitespace_only_pieces;
    o.user_defined_symbols = user_defined_symbols;
    o.control_symbols = control_symbols;
    (o.unk_id, o.bos_id, o.eos_id, o.pad_id) = (unk_id, bos_id, eos_id, pad_id);
    (o.unk_piece, o.bos_piece, o.eos_piece, o.pad_piece) =
        (unk_piece, bos_piece, eos_piece, pad_piece);
    o.max_sentence_length = max_sentence_length;
    o.input_sentence_size = input_sentence_size;
    o.num_threads = num_threads;
    let callbacks = Callbacks {
        bytes: Progress::new(on_bytes),
        pieces: Progress::new(on_pieces),
    };
    let result = py.detach(|| train_files(&files, &o, &callbacks));
    let model = match result {
        Ok(model) => model,
        Err(TrainError::Interrupted) => {
            let failure = callbacks.bytes.failure().or(callbacks.pieces.failure());
            return Err(failure.unwrap_or_else(|| PyKeyboardInterrupt::new_err("interrupted")));
        }
        Err(TrainError::Read {
            path,
            error: ReadError::Io(e),
        }) => return Err(PyOSError::new_err(format!("{path}: {e}"))),
        Err(e) => return Err(PyValueError::new_err(e.to_string())),
    };
    let data = py.detach(|| model.to_bytes());
    Ok(PyBytes::new(py, &data))
}
