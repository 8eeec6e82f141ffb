//! `Encoder`: the BPE encoder over a fixed vocabulary, merges and special tokens.

use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use rustc_hash::FxHashMap;

use super::errors::{load_error, repr, token_id, value_error};
use super::seam::{pymethods_with_seam, Seam};
use super::vocab_by_id;
use crate::bpe::normalizer::{Normalizer, Replace, Step};
use crate::bpe::{BpeModel, Encoder as CoreEncoder};
use crate::pretok::split::{Behavior, Split};
use crate::pretok::{SpecialMatcher, TokenFlags};

#[pyclass(module = "bytepair._core", frozen)]
pub struct Encoder {
    seam: Seam<CoreEncoder>,
}

impl Encoder {
    fn wrap(core: CoreEncoder) -> PyResult<Self> {
        Self::wrap_with_added(core, Vec::new(), FxHashMap::default())
    }

    /// `added`: those of the core's special tokens that are a Hugging Face file's
    /// non-special added tokens: matched whatever a call allows, never refused;
    /// `flags`: how tokens are matched besides their text (`pretok::TokenFlags`).
    fn wrap_with_added(
        core: CoreEncoder,
        added: Vec<String>,
        flags: FxHashMap<String, TokenFlags>,
    ) -> PyResult<Self> {
        let all = core.all_specials().clone();
        let (tokens, max_id) = (core.model().vocab_len(), core.model().max_id());
        let registered = if added.is_empty() {
            all.clone()
        } else {
            let specials = all.tokens().iter().filter(|t| !added.contains(t));
            SpecialMatcher::new(&specials.cloned().collect::<Vec<_>>()).map_err(value_error)?
        };
        Ok(Self {
            seam: Seam::new(core, all, registered, tokens, max_id)?
                .with_always(added)?
                .with_flags(flags)?,
        })
    }

    fn core(&self) -> &CoreEncoder {
        &self.seam.core
    }
}

/// `{token: ["lstrip", ...]}` as Python gives it, as [`TokenFlags`].
pub(crate) fn token_flags_of(
    flags: FxHashMap<String, Vec<String>>,
) -> PyResult<FxHashMap<String, TokenFlags>> {
    flags
        .into_iter()
        .map(|(t, names)| {
            let f =
                TokenFlags::from_names(&names).map_err(|e| value_error(format!("{t:?}: {e}")))?;
            Ok((t, f))
        })
        .collect()
}

/// A normalizer step as Python gives it (`bytepair.normalizers.core_steps`): a name,
/// or a tuple of the step's name and settings.
#[derive(FromPyObject)]
enum StepArg {
    Name(String),
    /// ("Prepend", text)
    Text(String, String),
    /// ("Strip", left, right)
    Flags(String, bool, bool),
    /// ("Replace", pattern, content, regex)
    Replace(String, String, String, bool),
}

impl StepArg {
    fn step(self) -> Result<Step, String> {
        Ok(match self {
            StepArg::Name(name) => Step::from_name(&name)?,
            StepArg::Text(name, text) if name == "Prepend" => Step::Prepend(text),
            StepArg::Flags(name, left, right) if name == "Strip" => Step::Strip { left, right },
            StepArg::Replace(name, pattern, content, regex) if name == "Replace" => {
                Step::Replace(Replace::new(&pattern, &content, regex)?)
            }
            StepArg::Text(name, _) | StepArg::Flags(name, ..) | StepArg::Replace(name, ..) => {
                return Err(format!(
                    "normalizer {name:?} with these settings is not supported"
                ))
            }
        })
    }
}

pymethods_with_seam!(Encoder {
    /// `vocab`: {id: bytes}; `merges`: (left id, right id, merged id) in rank order;
    /// `special_tokens`: {token: id}. An id that is no valid id (negative, or past
    /// `crate::model::MAX_ID`) is a ValueError naming the token and the id.
    /// `added_tokens`: {token: id}, matched in the text as special tokens are, but
    /// whatever a call allows and never refused (a Hugging Face file's non-special
    /// added tokens); `normalizer`: the steps applied to the text between them
    /// (`bpe::normalizer`: "NFC", "NFKC", "NFD", "NFKD", "Lowercase", or the tuples
    /// ("Replace", pattern, content, regex), ("Prepend", text), ("Strip", left,
    /// right): `bytepair.normalizers`); `splits`:
    /// `(pattern, behavior, invert)` of the Splits applied after the pattern, in order
    /// (`pretok::split`); `ignore_merges`: a piece that is a token is that token,
    /// before any merge (Hugging Face's BPE option); `token_flags`: {token: ["lstrip",
    /// "rstrip", "single_word"]}, how those special and added tokens are matched
    /// besides their text (`pretok::specials`).
    #[new]
    #[pyo3(signature = (vocab, merges, special_tokens, pattern, added_tokens=None, normalizer=Vec::new(), splits=Vec::new(), ignore_merges=false, token_flags=FxHashMap::default()))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        vocab: &Bound<'_, PyDict>,
        merges: Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>, Bound<'_, PyAny>)>,
        special_tokens: FxHashMap<String, Bound<'_, PyAny>>,
        pattern: Option<&str>,
        added_tokens: Option<FxHashMap<String, Bound<'_, PyAny>>>,
        normalizer: Vec<StepArg>,
        splits: Vec<(String, String, bool)>,
        ignore_merges: bool,
        token_flags: FxHashMap<String, Vec<String>>,
    ) -> PyResult<Self> {
        let ids = vocab_by_id(vocab)?;
        let merges = merges
            .iter()
            .enumerate()
            .map(|(n, (l, r, id))| {
                let what = || format!("merge #{n}");
                Ok((token_id(l, what)?, token_id(r, what)?, token_id(id, what)?))
            })
            .collect::<PyResult<Vec<_>>>()?;
        let mut specials = special_tokens
            .iter()
            .map(|(t, id)| Ok((t.clone(), token_id(id, || format!("special token {}", repr(id.py(), t)))?)))
            .collect::<PyResult<FxHashMap<_, _>>>()?;
        let mut added = Vec::new();
        for (t, id) in added_tokens.iter().flatten() {
            if specials.contains_key(t) {
                return Err(value_error(format!("added token {} is also a special token", repr(id.py(), t))));
            }
            specials.insert(t.clone(), token_id(id, || format!("added token {}", repr(id.py(), t)))?);
            added.push(t.clone());
        }
        added.sort();
        let normalizer = normalizer
            .into_iter()
            .map(StepArg::step)
            .collect::<Result<Vec<_>, String>>()
            .map_err(value_error)?;
        let normalizer = Normalizer::new(normalizer);
        let steps = splits
            .iter()
            .map(|(p, behavior, invert)| Split::new(p, Behavior::from_name(behavior)?, *invert))
            .collect::<Result<Vec<_>, String>>()
            .map_err(value_error)?;
        let mut model = BpeModel::new(ids, &merges, specials).map_err(value_error)?;
        if ignore_merges {
            model = model.looking_up_whole_pieces();
        }
        let core = CoreEncoder::from_model(model, pattern).map_err(value_error)?;
        let flags = token_flags_of(token_flags)?;
        Self::wrap_with_added(core.with_normalizer(normalizer).with_steps(steps), added, flags)
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
        let (core, specials) = py
            .detach(|| crate::io::tiktoken::load(data, &special_tokens, pattern))
            .map_err(|e| load_error(py, path, e))?;
        Ok((Self::wrap(core)?, specials))
    }

    /// An encoder over `(token, id)` pairs that encodes as tiktoken does with the ids
    /// as ranks (`io::tiktoken::from_ranks`), and the special tokens' ids as
    /// `from_tiktoken` gives them; a fault is a ValueError naming `path`.
    #[staticmethod]
    fn from_ranks(
        py: Python<'_>,
        ranks: Vec<(Vec<u8>, u32)>,
        path: &str,
        special_tokens: Vec<(String, Option<u32>)>,
        pattern: Option<&str>,
    ) -> PyResult<(Self, Vec<(String, u32)>)> {
        let (core, specials) = py
            .detach(|| crate::io::tiktoken::from_ranks(ranks, &special_tokens, pattern))
            .map_err(|e| load_error(py, path, e))?;
        Ok((Self::wrap(core)?, specials))
    }

    /// The ids of the tokens no merge of two lower-ranked tokens makes, which only
    /// tiktoken's whole-piece lookup produces (empty for a merges-based model).
    fn unbuildable(&self) -> Vec<u32> {
        self.core().model().unbuildable().to_vec()
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

    /// The normalizer's steps, in order ("NFC", ...; empty: none).
    fn normalizer(&self) -> Vec<&'static str> {
        self.core().normalizer().names()
    }

    /// The largest token id.
    fn max_id(&self) -> u32 {
        self.core().model().max_id()
    }


    fn decode_bytes<'py>(&self, py: Python<'py>, ids: Vec<u32>) -> PyResult<Bound<'py, PyBytes>> {
        match py.detach(|| self.core().model().decode_bytes(&ids)) {
            Ok(b) => Ok(PyBytes::new(py, &b)),
            Err(id) => Err(PyKeyError::new_err(format!("unknown token id {id}"))),
        }
    }
});
