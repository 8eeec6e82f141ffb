//! Python binding of the SentencePiece model kind: `bytepair._core.SentencePieceModel`.
//! Argument conversion and GIL handling only; the algorithm is in `spm/`, the shared
//! method set of every model kind in [`super::seam`].

use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::seam::{pymethods_with_seam, Seam};
use crate::pretok::SpecialMatcher;
use crate::spm::{DecodeStep, HfDecoder, PieceType, Prefix, SpmError, SpmModel};

/// A SentencePiece BPE model (`tokenizer.model`), encoding and decoding as the
/// `sentencepiece` library does; its CONTROL pieces are its special tokens.
#[pyclass(module = "bytepair._core", frozen)]
pub struct SentencePieceModel {
    seam: Seam<SpmModel>,
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

pymethods_with_seam!(SentencePieceModel {
    /// Loads the bytes of a `.model` file; `path` (for messages) names it. With
    /// `add_bos` / `add_eos` every text encodes between `<s>` and `</s>`.
    /// A Hugging Face `tokenizer.json` adds its rules: `prefix` (`spm::Prefix` by
    /// name: "spm", "first", "always", "each"), Metaspace `split`,
    /// `added` (non-special added tokens: matched in every text, never refused) and
    /// `specials` (its special tokens, when not only the control pieces) and
    /// `normalized` (those of them and `added` matched as the legacy `Prepend`
    /// normalizer makes Hugging Face match `normalized: true` tokens). With
    /// `hf_decode`, ids decode as `tokenizers` decodes them with the decoder whose
    /// steps are `decoder` (`tokenizer.json` objects, a `Sequence` flattened; None: the
    /// file has no decoder), else as sentencepiece decodes them; `token_flags`:
    /// {token: ["lstrip", "rstrip", "single_word"]} (`pretok::specials`).
    /// Raises ValueError naming the path and, for a corrupt file, the byte offset.
    #[staticmethod]
    #[pyo3(signature = (data, path = "<bytes>", add_bos = false, add_eos = false, prefix = "spm", split = false, added = Vec::new(), specials = None, normalized = Vec::new(), hf_decode = false, decoder = None, token_flags = rustc_hash::FxHashMap::default()))]
    #[allow(clippy::too_many_arguments)]
    fn from_bytes(
        py: Python<'_>,
        data: &[u8],
        path: &str,
        add_bos: bool,
        add_eos: bool,
        prefix: &str,
        split: bool,
        added: Vec<String>,
        specials: Option<Vec<String>>,
        normalized: Vec<String>,
        hf_decode: bool,
        decoder: Option<Vec<Bound<'_, PyDict>>>,
        token_flags: rustc_hash::FxHashMap<String, Vec<String>>,
    ) -> PyResult<Self> {
        let scheme = Prefix::from_name(prefix)
            .ok_or_else(|| PyValueError::new_err(format!("{path}: unknown prefix scheme {prefix:?}")))?;
        let steps = decoder
            .map(|steps| steps.iter().map(decode_step).collect::<PyResult<Vec<_>>>())
            .transpose()
            .map_err(|e| PyValueError::new_err(format!("{path}: {e}")))?;
        let hf_decoder = match hf_decode {
            true => Some(HfDecoder::new(steps).map_err(|e| PyValueError::new_err(format!("{path}: {e}")))?),
            false => None,
        };
        let core = py.detach(|| {
            let mut core = SpmModel::from_bytes(data)?
                .with_metaspace(scheme, split)?
                .with_normalized_tokens(normalized)?;
            if let Some(decoder) = hf_decoder {
                core = core.with_hf_decoder(decoder);
            }
            let frame = core.frame(add_bos, add_eos)?;
            Ok::<_, SpmError>((core, frame))
        });
        let (core, frame) = core.map_err(|e| PyValueError::new_err(format!("{path}: {e}")))?;
        // `allowed_special=None` matches nothing, as sentencepiece does (but the
        // added tokens, matched always); the special tokens (what "all" disallows)
        // are the control pieces.
        let all = SpecialMatcher::new(&added).map_err(PyValueError::new_err)?;
        let specials = specials.unwrap_or_else(|| core.control_pieces());
        let controls = SpecialMatcher::new(&specials).map_err(PyValueError::new_err)?;
        let (tokens, max_id) = (core.len(), core.len().saturating_sub(1) as u32);
        let flags = super::encoder::token_flags_of(token_flags)
            .map_err(|e| PyValueError::new_err(format!("{path}: {e}")))?;
        let seam = Seam::new(core, all, controls, tokens, max_id)?
            .with_always(added)?
            .with_flags(flags)?;
        Ok(Self {
            seam: seam.framed(frame)?,
        })
    }

    /// The dummy-prefix scheme (`spm::Prefix` by name) and Metaspace `split`.
    fn metaspace(&self) -> (&'static str, bool) {
        (self.core().prefix.name(), self.core().split)
    }

    /// Ids -> bytes: byte pieces as raw bytes, otherwise as `decode`.
    fn decode_bytes<'py>(&self, py: Python<'py>, ids: Vec<i64>) -> PyResult<Bound<'py, PyBytes>> {
        let ids = self.checked_ids(&ids)?;
        let bytes = py
            .detach(|| self.core().decode_bytes(&ids))
            .map_err(error)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// What each id adds to `decode_bytes(ids)` (`spm::decode`); None for a model
    /// with a denormalizer.
    fn surfaces<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<i64>,
    ) -> PyResult<Option<Vec<Bound<'py, PyBytes>>>> {
        let ids = self.checked_ids(&ids)?;
        let surfaces = py.detach(|| self.core().surfaces(&ids)).map_err(error)?;
        Ok(surfaces.map(|all| all.iter().map(|s| PyBytes::new(py, s)).collect()))
    }

    /// Ids -> text, as `SentencePieceProcessor.decode(ids)`; IndexError for an
    /// id outside the vocabulary.
    fn decode(&self, py: Python<'_>, ids: Vec<i64>) -> PyResult<String> {
        let ids = self.checked_ids(&ids)?;
        py.detach(|| self.core().decode(&ids)).map_err(error)
    }

    /// How many of the last ids a later id can still change the surfaces of
    /// (`SpmModel::open_tail`).
    fn open_tail(&self, ids: Vec<i64>) -> PyResult<usize> {
        let ids = self.checked_ids(&ids)?;
        self.core().open_tail(&ids).map_err(error)
    }

    /// Whether ids decode as `tokenizers` decodes them (a `tokenizer.json`'s decoder)
    /// rather than as sentencepiece does.
    #[getter]
    fn hf_decode(&self) -> bool {
        self.core().hf_decoder.is_some()
    }

    /// Whether a long text is encoded in parts, cut before spaces (`SpmModel::cuts_words`):
    /// on all cores and a block at a time; else it is encoded whole.
    #[getter]
    fn cuts_words(&self) -> bool {
        self.core().cuts_words()
    }

    /// The largest id.
    fn max_id(&self) -> u32 {
        self.core().len().saturating_sub(1) as u32
    }

    /// Number of pieces.
    fn vocab_len(&self) -> usize {
        self.core().len()
    }

    /// The CONTROL pieces in id order: the special tokens.
    fn control_pieces(&self) -> Vec<String> {
        self.core().control_pieces()
    }

    /// The settings other formats need: normalizer (`name`, `add_dummy_prefix`,
    /// `remove_extra_whitespaces`, `escape_whitespaces`, `has_charsmap`) and trainer
    /// (`byte_fallback`, `treat_whitespace_as_suffix`, `unk_piece`, `bos_piece`,
    /// `eos_piece`).
    fn settings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let proto = &self.core().proto;
        let (trainer, normalizer) = (proto.trainer(), proto.normalizer_spec.clone());
        let normalizer = normalizer.unwrap_or_default();
        let d = PyDict::new(py);
        d.set_item("name", normalizer.name())?;
        d.set_item("add_dummy_prefix", normalizer.add_dummy_prefix())?;
        d.set_item(
            "remove_extra_whitespaces",
            normalizer.remove_extra_whitespaces(),
        )?;
        d.set_item("escape_whitespaces", normalizer.escape_whitespaces())?;
        d.set_item(
            "has_charsmap",
            !normalizer.precompiled_charsmap().is_empty(),
        )?;
        d.set_item("byte_fallback", trainer.byte_fallback())?;
        d.set_item(
            "treat_whitespace_as_suffix",
            trainer.treat_whitespace_as_suffix(),
        )?;
        d.set_item("unk_piece", trainer.unk_piece())?;
        d.set_item("bos_piece", trainer.bos_piece())?;
        d.set_item("eos_piece", trainer.eos_piece())?;
        Ok(d)
    }

    /// Whether every text starts with `<s>` (the frame has ids before).
    #[getter]
    fn add_bos(&self) -> bool {
        !self.seam.frame.before.is_empty()
    }

    /// Whether every text ends with `</s>`.
    #[getter]
    fn add_eos(&self) -> bool {
        !self.seam.frame.after.is_empty()
    }

    fn id_to_piece(&self, id: usize) -> PyResult<String> {
        let entry = self.core().entries.get(id);
        let entry =
            entry.ok_or_else(|| PyIndexError::new_err(format!("id {id} is out of range")))?;
        Ok(entry.piece.clone())
    }

    /// The id of `piece`, or the unknown id (as sentencepiece answers).
    fn piece_to_id(&self, piece: &str) -> u32 {
        self.core().piece_to_id(piece)
    }

    /// Every piece in id order: (piece, score, type name such as "NORMAL", "BYTE").
    fn pieces(&self) -> Vec<(String, f32, &'static str)> {
        let entries = self.core().entries.iter();
        entries
            .map(|e| (e.piece.clone(), e.score, type_name(e.kind)))
            .collect()
    }

    /// The text as the model's normalizer rewrites it before encoding.
    fn normalize(&self, py: Python<'_>, text: &str) -> String {
        py.detach(|| self.core().normalizer.normalize(text))
    }

    /// The model serialized back to `.model` bytes (identical for a loaded,
    /// unchanged model).
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.core().proto.to_bytes())
    }

    #[getter]
    fn vocab_size(&self) -> usize {
        self.core().len()
    }

    #[getter]
    fn unk_id(&self) -> u32 {
        self.core().unk_id
    }

    #[getter]
    fn bos_id(&self) -> Option<u32> {
        self.core().bos_id
    }

    #[getter]
    fn eos_id(&self) -> Option<u32> {
        self.core().eos_id
    }

    fn __len__(&self) -> usize {
        self.core().len()
    }
});

/// One decoder step from its `tokenizer.json` object (as `formats.hf_sentencepiece`
/// checked it).
fn decode_step(step: &Bound<'_, PyDict>) -> PyResult<DecodeStep> {
    let item = |key: &str| -> PyResult<Bound<'_, PyAny>> {
        step.get_item(key)?
            .ok_or_else(|| PyValueError::new_err(format!("decoder step without {key:?}: {step}")))
    };
    let one_char = |key: &str| -> PyResult<char> {
        let text: String = item(key)?.extract()?;
        let mut chars = text.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => Ok(c),
            _ => Err(PyValueError::new_err(format!(
                "decoder {key} {text:?} is not one character"
            ))),
        }
    };
    let kind: String = item("type")?.extract()?;
    Ok(match kind.as_str() {
        "Replace" => DecodeStep::Replace {
            pattern: item("pattern")?.get_item("String")?.extract()?,
            content: item("content")?.extract()?,
        },
        "ByteFallback" => DecodeStep::ByteFallback,
        "Fuse" => DecodeStep::Fuse,
        "Strip" => {
            let stop: usize = item("stop")?.extract()?;
            if stop != 0 {
                return Err(PyValueError::new_err(format!(
                    "decoder Strip stop {stop} is not supported"
                )));
            }
            DecodeStep::Strip {
                content: one_char("content")?,
                start: item("start")?.extract()?,
            }
        }
        "Metaspace" => {
            let scheme: String = item("prepend_scheme")?.extract()?;
            DecodeStep::Metaspace {
                replacement: one_char("replacement")?,
                prepend: scheme != "never",
            }
        }
        other => {
            return Err(PyValueError::new_err(format!(
                "decoder {other} is not supported"
            )))
        }
    })
}

impl SentencePieceModel {
    fn core(&self) -> &SpmModel {
        &self.seam.core
    }

    /// `ids` as u32, or IndexError naming the first outside the vocabulary.
    fn checked_ids(&self, ids: &[i64]) -> PyResult<Vec<u32>> {
        let n = self.core().len();
        let id_of = |&id: &i64| {
            u32::try_from(id)
                .ok()
                .filter(|&i| (i as usize) < n)
                .ok_or(id)
        };
        ids.iter()
            .map(id_of)
            .collect::<Result<_, i64>>()
            .map_err(|id| PyIndexError::new_err(format!("id {id} is not in the vocabulary of {n}")))
    }
}
