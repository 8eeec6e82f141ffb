//! Python binding of SentencePiece training: `bytepair._core.SentencePieceTrainer`.
//! Argument conversion and GIL handling only; the algorithm is in `spm/train.rs`.

use pyo3::exceptions::{PyKeyboardInterrupt, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::documents::{input_of, Failure};
use super::errors::kept_or;
use super::{utf8_errors, Progress};
use crate::io::blocks::ReadError;
use crate::spm::train::{identity_spec, TrainError, TrainOptions, TrainProgress, Trainer};
use crate::spm::ModelProto;

/// Training fed as the corpus is read (`spm::train::Trainer`): `add_file` reads a
/// plain text file here, in blocks; `add_texts` takes documents read elsewhere
/// (their lines are sentences); `train` learns the model once and returns the
/// `.model` bytes. `normalizer_model`: the bytes of a `.model` whose normalizer
/// (rule name and charsmap) to use; None for identity. The other arguments are
/// sentencepiece's options (see `bytepair.train_sentencepiece`).
#[pyclass(module = "bytepair._core")]
pub struct SentencePieceTrainer {
    /// None once trained.
    trainer: Option<Trainer>,
}

impl SentencePieceTrainer {
    fn trainer(&mut self) -> PyResult<&mut Trainer> {
        self.trainer
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("this trainer has trained already"))
    }
}

#[pymethods]
impl SentencePieceTrainer {
    #[new]
    #[pyo3(signature = (
        vocab_size, *, normalizer_model = None, character_coverage = 0.9995,
        byte_fallback = false, add_dummy_prefix = true, remove_extra_whitespaces = true,
        split_digits = false, split_by_whitespace = true, split_by_unicode_script = true,
        split_by_number = true, max_piece_length = 16, treat_whitespace_as_suffix = false,
        allow_whitespace_only_pieces = false, user_defined_symbols = Vec::new(),
        control_symbols = Vec::new(), unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1,
        unk_piece = "<unk>".to_string(), bos_piece = "<s>".to_string(),
        eos_piece = "</s>".to_string(), pad_piece = "<pad>".to_string(),
        max_sentence_length = 4192, input_sentence_size = 0, num_threads = 1,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
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
    ) -> PyResult<Self> {
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
        let trainer = Trainer::new(o).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(Self {
            trainer: Some(trainer),
        })
    }

    /// True once the first `input_sentence_size` sentences are taken: what is
    /// added from then on is ignored.
    #[getter]
    fn full(&self) -> bool {
        self.trainer.as_ref().is_some_and(Trainer::is_full)
    }

    /// Counts the lines of a text file, read in blocks; `progress(bytes of it read so
    /// far)` after each block; `chunks`: the file's bytes, when Python decompresses them
    /// ([`input_of`]). Returns the bytes read.
    #[pyo3(signature = (path, errors = "strict", progress = None, chunks = None))]
    fn add_file(
        &mut self,
        py: Python<'_>,
        path: &str,
        errors: &str,
        progress: Option<Py<PyAny>>,
        chunks: Option<Py<PyAny>>,
    ) -> PyResult<u64> {
        let errors = utf8_errors(errors)?;
        let trainer = self.trainer()?;
        let progress = Progress::new(progress);
        let failure = Failure::default();
        let result = py.detach(|| {
            let input = input_of(path, chunks, &failure).map_err(|error| TrainError::Read {
                path: path.to_string(),
                error,
            })?;
            trainer.add_file(path, input, errors, &|n| progress.report(n))
        });
        result.map_err(|e| kept_or(&failure, || train_error(e, progress)))
    }

    /// Counts the lines of each text (the end of a text ends a line).
    fn add_texts(&mut self, py: Python<'_>, texts: Vec<String>) -> PyResult<()> {
        let trainer = self.trainer()?;
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        py.detach(|| trainer.add_texts(&texts))
            .map_err(|e| train_error(e, Progress::new(None)))
    }

    /// Learns the model and returns the `.model` bytes; `inputs` name what was read
    /// (recorded in the trainer spec, as sentencepiece records its input files);
    /// `progress(pieces learned so far)`.
    #[pyo3(signature = (inputs, progress = None))]
    fn train<'py>(
        &mut self,
        py: Python<'py>,
        inputs: Vec<String>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.trainer()?;
        let trainer = self.trainer.take().expect("checked above");
        let progress = Pieces(Progress::new(progress));
        let result = py.detach(|| trainer.train(&inputs, &progress).map(|m| m.to_bytes()));
        let data = result.map_err(|e| train_error(e, progress.0))?;
        Ok(PyBytes::new(py, &data))
    }
}

/// Progress in pieces learned.
struct Pieces(Progress);

impl TrainProgress for Pieces {
    fn pieces(&self, n: usize) -> bool {
        self.0.report(n as u64)
    }
}

fn train_error(e: TrainError, progress: Progress) -> PyErr {
    match e {
        TrainError::Interrupted => progress
            .failure()
            .unwrap_or_else(|| PyKeyboardInterrupt::new_err("interrupted")),
        TrainError::Read {
            path,
            error: ReadError::Io(e),
        } => PyOSError::new_err(format!("{path}: {e}")),
        e => PyValueError::new_err(e.to_string()),
    }
}
