//! The method set every model kind's binding shares (`bytepair.models`: `encode`,
//! `encode_to_buffer`, `count`, `encode_batch`, `encode_batch_to_bytes`,
//! `encode_prefix`, `encode_file`), written once over the model seam
//! ([`crate::model::Model`]). Each pyclass holds a [`Seam`] and gets the methods from
//! [`pymethods_with_seam`].

use std::sync::{Arc, Mutex, OnceLock};

use pyo3::exceptions::{PyMemoryError, PyRuntimeError};
use pyo3::ffi;
use pyo3::marker::Ungil;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};
use rustc_hash::{FxHashMap, FxHashSet};

use super::buffers::{IdBuffer, OutputPool};
use super::documents::{input_of, DocumentBatches, Failure, JsonlItems, ReadItems, TextItems};
use super::errors::{batch_error, encode_error, kept_or, read_error, value_error};
use super::texts::{Text, Texts};
use super::{thread_pool, utf8_errors, Progress};
use crate::io::batch::{encode_each, encode_flat, most_ids, Specials, Workers};
use crate::io::blocks::{BlockReader, ReadError};
use crate::io::chunking::{last_cut, TextCuts};
use crate::io::documents::DocumentReader;
use crate::io::jsonl::JsonlReader;
use crate::io::pipeline::encode_blocks;
use crate::io::shards;
use crate::io::stream;
use crate::model::{check_disallowed, try_reserve, EncodeError, Frame, Model, SafeCuts};
use crate::pages::advise_huge_pages;
use crate::pretok::{SpecialMatcher, TokenFlags};

/// `disallowed_special` as the binding takes it: None or a list of strings (these
/// raise), or "all" (every special token of the model that the call does not allow:
/// tiktoken's default, resolved here once per model instead of per call in Python).
pub enum Disallowed {
    Listed(Vec<String>),
    Rest,
}

impl Disallowed {
    pub fn from_py(value: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let Some(value) = value.filter(|v| !v.is_none()) else {
            return Ok(Disallowed::Listed(Vec::new()));
        };
        if let Ok(text) = value.cast::<PyString>() {
            return match text.to_str()? {
                "all" => Ok(Disallowed::Rest),
                other => Err(value_error(format!(
                    "disallowed_special must be \"all\" or a list of strings, not {other:?}"
                ))),
            };
        }
        Ok(Disallowed::Listed(value.extract()?))
    }
}

/// Bytes of one text encoded between two checks for signals (Ctrl-C), when the
/// model's text can be cut (a few milliseconds of work).
const SIGNAL_BLOCK: usize = 4 << 20;

/// Texts of up to this many bytes are encoded holding the GIL ([`detach_for`]).
const KEEP_GIL_BYTES: usize = 256;

/// Runs `f`, the work on `len` bytes of text, without the GIL, unless the text is short
/// (at most [`KEEP_GIL_BYTES`]): releasing the GIL and taking it back was 7% of the
/// instructions of an `encode_ordinary` call on a 44-byte sentence (6,687 -> 6,221,
/// callgrind), more than the half microsecond of work it would let other threads
/// run beside, each of which needs the GIL for its own call anyway.
fn detach_for<T: Ungil>(py: Python<'_>, len: usize, f: impl Ungil + FnOnce() -> T) -> T {
    if len <= KEEP_GIL_BYTES {
        f()
    } else {
        py.detach(f)
    }
}

/// A model and what its binding keeps between calls.
pub struct Seam<M> {
    /// Shared by the seams of the same model with other frames ([`Seam::framed`]).
    pub core: Arc<M>,
    /// Put around every text (BOS/EOS; see [`Frame`]).
    pub frame: Frame,
    /// What `allowed_special=None` allows (the model's default).
    all: Arc<SpecialMatcher>,
    /// The model's special tokens: what `disallowed_special="all"` refuses (less the
    /// ones the call allows). Built once, so the default policy costs no per-call work.
    registered: Arc<SpecialMatcher>,
    /// No special tokens (but the always-matched tokens, when the model has some).
    none: Arc<SpecialMatcher>,
    /// Tokens matched in the text whatever the call allows, never refused: a Hugging
    /// Face file's non-special added tokens (Qwen2.5's `<tool_call>`).
    always: Vec<String>,
    /// How tokens are matched besides their text (a Hugging Face file's `lstrip`,
    /// `rstrip`, `single_word`), for every matcher of the seam; empty for most models.
    flags: Arc<FxHashMap<String, TokenFlags>>,
    /// How many ids, from 0, have a shared Python int in `ints`.
    dense_ids: usize,
    /// The model's largest id.
    max_id: u32,
    matchers: Mutex<FxHashMap<Vec<String>, Arc<SpecialMatcher>>>,
    /// One Python int per id below `dense_ids`, made once: results share them instead
    /// of allocating an int per token, which took a third of `encode`'s time. Bounded
    /// by the number of tokens the model has, never by its largest id (one special
    /// token at 2**31 - 1 made this 16 GiB); ids past it get an int of their own.
    ints: OnceLock<Vec<Py<PyAny>>>,
    /// Output buffers of `encode_batch_to_bytes` that Python let go of, written into
    /// again (shared with the seams of other frames).
    outputs: OutputPool,
    /// Buffers a batch's strings were converted to UTF-8 in ([`Texts`]), for the next
    /// batch's (their pages written before, so the kernel zeroes none).
    utf8: OutputPool,
}

/// A new Python int for `id`; MemoryError when Python has no memory for it.
fn new_int(py: Python<'_>, id: u32) -> PyResult<*mut ffi::PyObject> {
    // SAFETY: a plain C-API call with the GIL held; a null result sets the exception.
    let int = unsafe { ffi::PyLong_FromUnsignedLong(id.into()) };
    if int.is_null() {
        Err(PyErr::fetch(py))
    } else {
        Ok(int)
    }
}

impl<M: Model> Seam<M> {
    /// `all`: what `allowed_special=None` allows; `registered`: the model's special
    /// tokens; `tokens`: how many tokens it has, and `max_id` its largest id (the ints
    /// shared are those of the ids up to both).
    pub fn new(
        core: M,
        all: SpecialMatcher,
        registered: SpecialMatcher,
        tokens: usize,
        max_id: u32,
    ) -> PyResult<Self> {
        Ok(Self {
            core: Arc::new(core),
            frame: Frame::default(),
            all: Arc::new(all),
            registered: Arc::new(registered),
            none: Arc::new(SpecialMatcher::new(&[]).map_err(value_error)?),
            always: Vec::new(),
            flags: Arc::default(),
            dense_ids: tokens.min(max_id as usize + 1),
            max_id,
            matchers: Mutex::new(FxHashMap::default()),
            ints: OnceLock::new(),
            outputs: OutputPool::default(),
            utf8: OutputPool::on_small_pages(),
        })
    }

    /// The same seam, matching `tokens` in every text (see [`Seam::always`]); `all` and
    /// `registered` given to [`Seam::new`] are to hold them and not to, respectively.
    pub fn with_always(mut self, tokens: Vec<String>) -> PyResult<Self> {
        if !tokens.is_empty() {
            self.none = Arc::new(SpecialMatcher::new(&tokens).map_err(value_error)?);
            self.always = tokens;
        }
        Ok(self)
    }

    /// The same seam, matching the tokens of `flags` with their flags in every call
    /// (`pretok::specials`); call it after [`Seam::with_always`].
    pub fn with_flags(mut self, flags: FxHashMap<String, TokenFlags>) -> PyResult<Self> {
        let flags: FxHashMap<String, TokenFlags> =
            flags.into_iter().filter(|(_, f)| f.any()).collect();
        if flags.is_empty() {
            return Ok(self);
        }
        let matcher = |tokens: &[String]| SpecialMatcher::with_flags(tokens, &flags);
        self.all = Arc::new(matcher(self.all.tokens()).map_err(value_error)?);
        self.none = Arc::new(matcher(&self.always).map_err(value_error)?);
        self.flags = Arc::new(flags);
        Ok(self)
    }

    /// The same model (shared, not copied) putting `frame` around every text; an id
    /// of the frame that is no id of the model is a ValueError.
    pub fn framed(&self, frame: Frame) -> PyResult<Self> {
        let ids = frame.before.iter().chain(&frame.after);
        if let Some(id) = ids.copied().find(|&id| id > self.max_id) {
            return Err(value_error(format!(
                "BOS/EOS id {id} is not an id of this model (its largest is {})",
                self.max_id
            )));
        }
        Ok(Self {
            core: Arc::clone(&self.core),
            frame,
            all: Arc::clone(&self.all),
            registered: Arc::clone(&self.registered),
            none: Arc::clone(&self.none),
            always: self.always.clone(),
            flags: Arc::clone(&self.flags),
            dense_ids: self.dense_ids,
            max_id: self.max_id,
            matchers: Mutex::new(FxHashMap::default()),
            ints: OnceLock::new(),
            outputs: self.outputs.clone(),
            utf8: self.utf8.clone(),
        })
    }

    /// The shared ints, made on first use.
    fn ints(&self, py: Python<'_>) -> PyResult<&[Py<PyAny>]> {
        if let Some(ints) = self.ints.get() {
            return Ok(ints);
        }
        let mut ints = Vec::new();
        ints.try_reserve_exact(self.dense_ids).map_err(|_| {
            PyMemoryError::new_err(format!("no memory for {} ints", self.dense_ids))
        })?;
        for id in 0..self.dense_ids as u32 {
            // SAFETY: `new_int` returns a new (owned) reference.
            ints.push(unsafe { Bound::from_owned_ptr(py, new_int(py, id)?) }.unbind());
        }
        // Another thread may have set it first (both made the same ints).
        Ok(self.ints.get_or_init(|| ints))
    }

    /// `ids` as a Python list of ints.
    pub fn id_list<'py>(&self, py: Python<'py>, ids: &[u32]) -> PyResult<Bound<'py, PyList>> {
        let ints = self.ints(py)?;
        let len = ffi::Py_ssize_t::try_from(ids.len())
            .map_err(|_| PyMemoryError::new_err(format!("a list of {} ids", ids.len())))?;
        // SAFETY: a new list of `len` empty slots, each set exactly once to a new
        // (owned) reference before the list is seen by Python code (a failure leaves
        // the rest null, which freeing the list allows). Its slots are only
        // written (PyList_SET_ITEM, not PyList_SetItem, which reads the old item first:
        // a read of the never-touched memory would map the shared zero page, and the
        // write replacing it interrupts the cores of a batch's workers to flush their
        // TLBs, once for each 4 KiB of the list).
        unsafe {
            let list = ffi::PyList_New(len);
            if list.is_null() {
                return Err(PyErr::fetch(py));
            }
            let list = Bound::from_owned_ptr(py, list).cast_into_unchecked::<PyList>();
            for (i, &id) in ids.iter().enumerate() {
                let item = match ints.get(id as usize) {
                    Some(int) => int.clone_ref(py).into_ptr(),
                    None => new_int(py, id)?,
                };
                ffi::PyList_SET_ITEM(list.as_ptr(), i as ffi::Py_ssize_t, item);
            }
            Ok(list)
        }
    }

    /// The matcher of what a call allows: `tokens` (`None`: all special tokens) and the
    /// always-matched tokens, cached.
    pub fn matcher(&self, tokens: Option<Vec<String>>) -> PyResult<Arc<SpecialMatcher>> {
        let Some(mut list) = tokens else {
            return Ok(self.all.clone());
        };
        if list.is_empty() {
            return Ok(self.none.clone());
        }
        list.extend(self.always.iter().cloned());
        self.cached(list)
    }

    /// What a file reader matches: the tokens it encodes as special and those it
    /// refuses, both listed (blocks are never cut inside either), and their matchers.
    #[allow(clippy::type_complexity)]
    fn file_specials(
        &self,
        allowed: Vec<String>,
        disallowed: Vec<String>,
    ) -> PyResult<(Vec<String>, Arc<SpecialMatcher>, Arc<SpecialMatcher>)> {
        let both: Vec<String> = allowed.iter().chain(&disallowed).cloned().collect();
        Ok((
            both,
            self.matcher(Some(allowed))?,
            self.refusing(disallowed)?,
        ))
    }

    /// The matcher of `tokens` alone (what a call refuses), cached.
    fn refusing(&self, list: Vec<String>) -> PyResult<Arc<SpecialMatcher>> {
        if self.always.is_empty() {
            return self.matcher(Some(list));
        }
        self.cached(list)
    }

    fn cached(&self, mut list: Vec<String>) -> PyResult<Arc<SpecialMatcher>> {
        list.sort();
        list.dedup();
        let mut cache = self.matchers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = cache.get(&list) {
            return Ok(m.clone());
        }
        let m = Arc::new(SpecialMatcher::with_flags(&list, &self.flags).map_err(value_error)?);
        if cache.len() > 64 {
            cache.clear();
        }
        cache.insert(list, m.clone());
        Ok(m)
    }

    /// Matchers for (`allowed_special`, `disallowed_special`). The default policy
    /// (none allowed, the rest disallowed) takes no lock and builds nothing.
    pub fn matchers(
        &self,
        allowed: Option<Vec<String>>,
        disallowed: Disallowed,
    ) -> PyResult<(Arc<SpecialMatcher>, Arc<SpecialMatcher>)> {
        let allowed = self.matcher(allowed)?;
        let disallowed = match disallowed {
            Disallowed::Listed(list) => self.refusing(list)?,
            Disallowed::Rest if allowed.is_empty() || Arc::ptr_eq(&allowed, &self.none) => {
                self.registered.clone()
            }
            Disallowed::Rest => {
                let taken: FxHashSet<&String> = allowed.tokens().iter().collect();
                let rest = self.registered.tokens().iter();
                self.refusing(rest.filter(|t| !taken.contains(t)).cloned().collect())?
            }
        };
        Ok((allowed, disallowed))
    }

    /// Where the block of `text` starting at the safe cut `from` ends: about
    /// [`SIGNAL_BLOCK`] bytes on, at a safe cut (`io::chunking`), or the end of the
    /// text when it has none (SentencePiece, or no cut in the rest).
    fn block_end(&self, text: &str, from: usize, allowed: &SpecialMatcher) -> usize {
        let SafeCuts::AtSpecials { text: cuts } = self.core.safe_cuts() else {
            return text.len();
        };
        let mut size = SIGNAL_BLOCK;
        loop {
            let window_end = from + size + allowed.max_len() + 1;
            if window_end >= text.len() {
                return text.len();
            }
            let window = &text.as_bytes()[from..window_end];
            if let Some(cut) = last_cut(window, size, cuts, allowed) {
                return from + cut;
            }
            size *= 2; // no cut yet: look further (each look twice the last)
        }
    }

    /// Runs `f` on consecutive blocks of `text` (see [`Seam::block_end`]), each with
    /// whether it starts the text ([`Model::encode_part_cached`]), without the GIL (a
    /// short text holding it: [`detach_for`]), with one cache, and checks for signals
    /// between blocks: Ctrl-C stops a long text within a block's time
    /// (KeyboardInterrupt), not at its end.
    fn for_each_block(
        &self,
        py: Python<'_>,
        text: &str,
        allowed: &SpecialMatcher,
        mut f: impl FnMut(&str, bool, &mut M::Cache) -> Result<(), EncodeError> + Send,
    ) -> PyResult<()> {
        let mut cache = self.core.take_cache();
        let mut from = 0;
        let result = loop {
            let step = detach_for(py, text.len() - from, || {
                let end = self.block_end(text, from, allowed);
                f(&text[from..end], from == 0, &mut cache).map(|()| end)
            });
            match step {
                Err(e) => break Err(encode_error(py, e)),
                Ok(end) if end >= text.len() => break Ok(()),
                Ok(end) => from = end,
            }
            if let Err(e) = py.check_signals() {
                break Err(e);
            }
        };
        self.core.give_back_cache(cache);
        result
    }

    /// Checks `text` for disallowed tokens, then encodes it, without the GIL (a short
    /// text holding it: [`detach_for`]).
    pub fn encode_checked(
        &self,
        py: Python<'_>,
        text: &str,
        allowed: Option<Vec<String>>,
        disallowed: Disallowed,
    ) -> PyResult<Vec<u32>> {
        let (allowed, disallowed) = self.matchers(allowed, disallowed)?;
        if text.len() <= SIGNAL_BLOCK {
            // A text of up to a block crosses once: the check and the encoding in one
            // release of the GIL, or none for a short one (most calls; a long text is
            // encoded in blocks, below).
            let (core, frame) = (&*self.core, &self.frame);
            return detach_for(py, text.len(), || {
                check_disallowed(text, &disallowed)?;
                let mut ids = Vec::new();
                // Two slots a piece of one byte in two: the encoder's batches
                // write two lanes a piece, and then need no more room.
                try_reserve(&mut ids, text.len() / 2 + 2 + frame.len())?;
                core.with_cache(|cache| {
                    frame.around(&mut ids, |ids| {
                        core.encode_cached(text, &allowed, cache, ids)
                    })
                })?;
                Ok(ids)
            })
            .map_err(|e| encode_error(py, e));
        }
        py.detach(|| check_disallowed(text, &disallowed))
            .map_err(|e| encode_error(py, e))?;
        let mut ids = Vec::new();
        ids.try_reserve(text.len() / 3).map_err(|_| {
            PyMemoryError::new_err(format!("no memory for the ids of {} bytes", text.len()))
        })?;
        advise_huge_pages(ids.spare_capacity_mut());
        ids.extend_from_slice(&self.frame.before);
        let core = &*self.core;
        self.for_each_block(py, text, &allowed, |block, starts, cache| {
            core.encode_part_cached(block, starts, &allowed, cache, &mut ids)
        })?;
        ids.extend_from_slice(&self.frame.after);
        Ok(ids)
    }

    /// The texts of a batch as UTF-8 (borrowed, or converted on `threads` threads:
    /// [`Texts`]), and its matchers.
    fn batch_args<'a>(
        &self,
        py: Python<'_>,
        texts: &'a [Bound<'_, PyString>],
        threads: usize,
        allowed: Option<Vec<String>>,
        disallowed: Disallowed,
    ) -> PyResult<(Texts<'a>, Arc<SpecialMatcher>, Arc<SpecialMatcher>)> {
        let (allowed, disallowed) = self.matchers(allowed, disallowed)?;
        Ok((
            Texts::new(py, texts, threads, &self.utf8)?,
            allowed,
            disallowed,
        ))
    }

    /// Runs `f` on the UTF-8 of `text` ([`Text`]: borrowed from CPython, or converted
    /// by the core for a long string met for the first time).
    pub fn with_text<R>(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyString>,
        f: impl FnOnce(&str) -> PyResult<R>,
    ) -> PyResult<R> {
        let text = Text::new(py, text, &self.utf8)?;
        let result = f(text.as_str());
        text.give_back(&self.utf8);
        result
    }

    /// [`Seam::encode_checked`] of a Python string (see [`Seam::with_text`]).
    pub fn encode_string(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyString>,
        allowed: Option<Vec<String>>,
        disallowed: Disallowed,
    ) -> PyResult<Vec<u32>> {
        self.with_text(py, text, |text| {
            self.encode_checked(py, text, allowed, disallowed)
        })
    }

    /// Encodes `text`: `allowed_special` are encoded as special tokens (None: the
    /// seam's `all`); any of `disallowed_special` in the text raises ValueError.
    pub fn encode<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'_, PyString>,
        allowed_special: Option<Vec<String>>,
        disallowed_special: Disallowed,
    ) -> PyResult<Bound<'py, PyList>> {
        let ids = self.encode_string(py, text, allowed_special, disallowed_special)?;
        self.id_list(py, &ids)
    }

    /// Like `encode`, as a buffer of little-endian uint32 (for numpy: no list in
    /// between, and no copy).
    pub fn encode_to_buffer<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'_, PyString>,
        allowed_special: Option<Vec<String>>,
        disallowed_special: Disallowed,
    ) -> PyResult<Bound<'py, IdBuffer>> {
        let ids = self.encode_string(py, text, allowed_special, disallowed_special)?;
        Bound::new(py, IdBuffer::of_ids(ids))
    }

    /// How many tokens `text` encodes to.
    pub fn count(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyString>,
        allowed_special: Option<Vec<String>>,
        disallowed_special: Disallowed,
    ) -> PyResult<usize> {
        self.with_text(py, text, |text| {
            self.count_str(py, text, allowed_special, disallowed_special)
        })
    }

    /// [`Seam::count`] of text already in UTF-8.
    fn count_str(
        &self,
        py: Python<'_>,
        text: &str,
        allowed_special: Option<Vec<String>>,
        disallowed_special: Disallowed,
    ) -> PyResult<usize> {
        let (allowed, disallowed) = self.matchers(allowed_special, disallowed_special)?;
        detach_for(py, text.len(), || check_disallowed(text, &disallowed))
            .map_err(|e| encode_error(py, e))?;
        let (core, mut count) = (&*self.core, self.frame.len());
        self.for_each_block(py, text, &allowed, |block, starts, cache| {
            count += core.count_cached(block, starts, &allowed, cache)?;
            Ok(())
        })?;
        Ok(count)
    }

    /// Encodes many texts on `num_threads` threads (`io::batch`); this thread turns
    /// finished results into Python lists (the part that needs the GIL) while the
    /// workers encode. The first text holding a disallowed token raises.
    pub fn encode_batch<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyString>>,
        allowed_special: Option<Vec<String>>,
        num_threads: usize,
        disallowed_special: Disallowed,
    ) -> PyResult<Bound<'py, PyList>> {
        let (utf8, allowed, disallowed) =
            self.batch_args(py, &texts, num_threads, allowed_special, disallowed_special)?;
        let texts = utf8.strs();
        let specials = Specials {
            allowed: &allowed,
            disallowed: &disallowed,
        };
        let mut lists: Vec<Option<Bound<'py, PyList>>> = texts.iter().map(|_| None).collect();
        encode_each(
            &*self.core,
            &texts,
            specials,
            &self.frame,
            Workers::Spawned(num_threads),
            |next| py.detach(next), // wait without the GIL
            |i, ids| {
                lists[i] = Some(self.id_list(py, ids)?);
                py.check_signals() // Ctrl-C stops the batch at the next text received
            },
        )
        .map_err(|e| batch_error(py, e))?;
        drop(texts);
        utf8.give_back(&self.utf8);
        PyList::new(
            py,
            lists
                .into_iter()
                .map(|l| {
                    l.ok_or_else(|| PyRuntimeError::new_err("a text of the batch was not encoded"))
                })
                .collect::<PyResult<Vec<_>>>()?,
        )
    }

    /// Encodes many texts on `num_threads` threads into one flat array: returns the ids
    /// of all texts, one after another, as little-endian uint32 bytes (an [`IdBuffer`]
    /// Python may write to, so numpy's view of it is writable), and the
    /// `len(texts) + 1` offsets (little-endian int64 bytes) where each text's ids start
    /// and the last ends.
    ///
    /// No Python object is made per token, so nothing needs the GIL. The ids go into a
    /// buffer with room for the most the texts can give, taken from the seam's
    /// [`OutputPool`] (one an earlier batch's ids were in, when Python has let go of
    /// it), written once in text order (`io::batch::encode_flat`).
    pub fn encode_batch_to_bytes<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyString>>,
        allowed_special: Option<Vec<String>>,
        num_threads: usize,
        disallowed_special: Disallowed,
    ) -> PyResult<(Bound<'py, IdBuffer>, Bound<'py, PyBytes>)> {
        let (utf8, allowed, disallowed) =
            self.batch_args(py, &texts, num_threads, allowed_special, disallowed_special)?;
        let texts = utf8.strs();
        let specials = Specials {
            allowed: &allowed,
            disallowed: &disallowed,
        };
        let size = most_ids(&*self.core, &texts, &self.frame)
            .checked_mul(4)
            .filter(|&size| isize::try_from(size).is_ok())
            .ok_or_else(|| value_error("batch too large"))?;
        let mut buf = self.outputs.take(size).map_err(|_| {
            PyMemoryError::new_err(format!("no memory for the ids of a batch ({size} bytes)"))
        })?;
        let offsets = py
            .detach(|| {
                encode_flat(
                    &*self.core,
                    &texts,
                    specials,
                    &self.frame,
                    Workers::Spawned(num_threads),
                    &mut buf.spare_capacity_mut()[..size],
                )
            })
            .map_err(|e| encode_error(py, e))?;
        drop(texts);
        utf8.give_back(&self.utf8);
        let written = offsets.last().map_or(0, |&n| n as usize * 4);
        // SAFETY: `encode_flat` wrote the ids of every text, `written` bytes from the
        // start of the buffer's room (its offsets say where they end).
        unsafe { buf.set_len(written) };
        let offsets: Vec<u8> = offsets.iter().flat_map(|o| o.to_le_bytes()).collect();
        Ok((
            Bound::new(py, IdBuffer::writable(buf, &self.outputs))?,
            PyBytes::new(py, &offsets),
        ))
    }

    /// Streaming (`io::stream`): encodes the part of `text` later text cannot change.
    /// Returns the ids and how many characters (code points) of `text` were consumed.
    /// The frame's `before` comes with the `first` call's ids, its `after` with the
    /// `last` call's; `starts`: no call has consumed any of the text before `text`.
    #[allow(clippy::too_many_arguments)]
    pub fn encode_prefix(
        &self,
        py: Python<'_>,
        text: &str,
        allowed_special: Option<Vec<String>>,
        first: bool,
        last: bool,
        starts: bool,
        disallowed_special: Disallowed,
    ) -> PyResult<(Vec<u32>, usize)> {
        let (allowed, disallowed) = self.matchers(allowed_special, disallowed_special)?;
        let frame = &self.frame;
        py.detach(|| {
            let core = &*self.core;
            let (mut ids, used) =
                stream::encode_prefix(core, text, &allowed, &disallowed, starts, last)?;
            if first && !frame.before.is_empty() {
                ids.splice(0..0, frame.before.iter().copied());
            }
            if last {
                ids.extend_from_slice(&frame.after);
            }
            Ok::<_, EncodeError>((ids, text[..used].chars().count()))
        })
        .map_err(|e| encode_error(py, e))
    }

    /// Encodes the UTF-8 file at `path` into `out_path` as little-endian ids of `width`
    /// bytes, or with no `out_path` only counts them; `allowed_special` are encoded as
    /// specials, any of `disallowed_special` in the file is an error. Returns the
    /// number of tokens. `chunks`: the file's bytes, when Python hands them over (a
    /// compressed file, stdin: [`input_of`]); `path` then only names it in errors.
    #[allow(clippy::too_many_arguments)]
    pub fn encode_file(
        &self,
        py: Python<'_>,
        path: &str,
        out_path: Option<&str>,
        width: usize,
        allowed_special: Vec<String>,
        disallowed_special: Vec<String>,
        errors: &str,
        num_threads: usize,
        progress: Option<Py<PyAny>>,
        block_bytes: usize,
        chunks: Option<Py<PyAny>>,
    ) -> PyResult<u64> {
        let errors = utf8_errors(errors)?;
        if width != 2 && width != 4 {
            return Err(value_error("width must be 2 or 4 bytes"));
        }
        let (both, allowed, forbidden) = self.file_specials(allowed_special, disallowed_special)?;
        let cut_at = self.matcher(Some(both))?;
        let pool = thread_pool(num_threads)?;
        // Appends: the caller may have written a header (e.g. .npy) first. No output:
        // the ids are counted only.
        let mut out: Box<dyn std::io::Write + Send> = match out_path {
            Some(out_path) => {
                let file = std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(out_path)
                    .map_err(|e| {
                        pyo3::exceptions::PyOSError::new_err(format!("{out_path}: {e}"))
                    })?;
                Box::new(std::io::BufWriter::with_capacity(1 << 20, file))
            }
            None => Box::new(std::io::sink()),
        };
        let progress = Progress::new(progress);
        let failure = Failure::default();
        let specials = shards::Specials {
            allowed: &allowed,
            forbidden: &forbidden,
            cut_at: &cut_at,
        };
        let result = py.detach(|| {
            let reader = BlockReader::new(input_of(path, chunks, &failure)?);
            shards::encode_file(
                &*self.core,
                reader,
                &mut out,
                width,
                specials,
                &self.frame,
                errors,
                &pool,
                block_bytes,
                |done| progress.report(done),
            )
        });
        result.map_err(|e| match e {
            // The output's fault (a full disk): name the output, keep errno.
            ReadError::Write(e) => pyo3::exceptions::PyOSError::new_err((
                e.raw_os_error().unwrap_or(0),
                e.to_string(),
                out_path.unwrap_or_default().to_string(),
            )),
            e => kept_or(&failure, || read_error(path, e, progress)),
        })
    }
}

impl<M: Model + Send + Sync + 'static> Seam<M> {
    /// The documents of the text file at `path` between `separators`, encoded a
    /// block at a time on `num_threads` threads, without the frame
    /// ([`DocumentBatches`]); `first_doc`: the number of the file's first document;
    /// `chunks`: the file's bytes, when Python decompresses them ([`input_of`]).
    #[allow(clippy::too_many_arguments)]
    pub fn document_batches(
        &self,
        path: &str,
        separators: Vec<String>,
        allowed_special: Vec<String>,
        disallowed_special: Vec<String>,
        errors: &str,
        num_threads: usize,
        block_bytes: usize,
        first_doc: u64,
        width: usize,
        chunks: Option<Py<PyAny>>,
    ) -> PyResult<DocumentBatches> {
        let errors = utf8_errors(errors)?;
        let (both, allowed, forbidden) = self.file_specials(allowed_special, disallowed_special)?;
        let text_cuts = match self.core.safe_cuts() {
            SafeCuts::AtSpecials { text } => text,
            SafeCuts::Nowhere => TextCuts::None,
        };
        let failure = Failure::default();
        let reader = input_of(path, chunks, &failure).and_then(|input| {
            DocumentReader::open(
                input,
                &separators,
                &both,
                text_cuts,
                errors,
                block_bytes,
                first_doc,
            )
        });
        let reader = reader.map_err(|e| read_error(path, e, Progress::new(None)))?;
        let reader = Box::new(TextItems { reader, forbidden });
        self.batches(path, reader, failure, allowed, num_threads, width)
    }

    /// The records of the JSON Lines file at `path` (each the string at the `field`
    /// path), encoded a block at a time on `num_threads` threads, without the frame
    /// ([`DocumentBatches`], [`JsonlItems`]): lines the core does not read itself go
    /// to `slow(line, number)`. `first_doc`: the number of the file's first record;
    /// `chunks`: the file's bytes, when Python decompresses them ([`input_of`]).
    #[allow(clippy::too_many_arguments)]
    pub fn jsonl_batches(
        &self,
        path: &str,
        field: Vec<String>,
        slow: Py<PyAny>,
        allowed_special: Vec<String>,
        disallowed_special: Vec<String>,
        num_threads: usize,
        block_bytes: usize,
        first_doc: u64,
        width: usize,
        chunks: Option<Py<PyAny>>,
    ) -> PyResult<DocumentBatches> {
        let (_, allowed, forbidden) = self.file_specials(allowed_special, disallowed_special)?;
        let failure = Failure::default();
        let input = input_of(path, chunks, &failure)
            .map_err(|e| read_error(path, e, Progress::new(None)))?;
        let reader = Box::new(JsonlItems {
            reader: JsonlReader::open(input, &field, block_bytes, first_doc),
            forbidden,
            slow,
            failure: Arc::clone(&failure),
        });
        self.batches(path, reader, failure, allowed, num_threads, width)
    }

    /// [`DocumentBatches`] of what `reader` reads, encoded with `allowed` special
    /// tokens on `num_threads` threads into ids `width` bytes wide.
    fn batches(
        &self,
        path: &str,
        reader: Box<dyn ReadItems>,
        failure: Failure,
        allowed: Arc<SpecialMatcher>,
        num_threads: usize,
        width: usize,
    ) -> PyResult<DocumentBatches> {
        if width != 2 && width != 4 {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "ids are 2 or 4 bytes wide, not {width}"
            )));
        }
        // One pool for all the blocks of the file, its threads (and their caches)
        // kept from block to block; it ends with the batches, as their reading and
        // encoding threads do.
        let pool = thread_pool(num_threads)?;
        let core = Arc::clone(&self.core);
        let encode = move |next: &mut dyn FnMut() -> _,
                           reuse: &mut dyn FnMut() -> _,
                           deliver: &mut dyn FnMut(_) -> _| {
            encode_blocks(&*core, &allowed, &pool, width, next, reuse, deliver)
        };
        DocumentBatches::start(path, reader, failure, Box::new(encode))
    }
}

/// The `#[pymethods]` block of a binding whose `seam` field is a [`Seam`]: the
/// binding's own methods (`$own`), then the shared method set forwarding to the seam
/// — written here once, because PyO3 takes one `#[pymethods]` block per class.
macro_rules! pymethods_with_seam {
    ($class:ty { $($own:tt)* }) => {
        #[::pyo3::pymethods]
        impl $class {
            $($own)*

        /// Encodes `text`: `allowed_special` are encoded as special tokens (None: the
        /// model's default: all for BPE, none for SentencePiece, as sentencepiece); any
        /// of `disallowed_special` in the text raises ValueError.
        #[pyo3(signature = (text, allowed_special=None, disallowed_special=None))]
        fn encode<'py>(
            &self,
            py: ::pyo3::Python<'py>,
            text: ::pyo3::Bound<'py, ::pyo3::types::PyString>,
            allowed_special: Option<Vec<String>>,
            disallowed_special: Option<::pyo3::Bound<'_, ::pyo3::PyAny>>,
        ) -> ::pyo3::PyResult<Bound<'py, ::pyo3::types::PyList>> {
            let disallowed = $crate::py::seam::Disallowed::from_py(disallowed_special.as_ref())?;
            self.seam.encode(py, &text, allowed_special, disallowed)
        }

        /// Encodes `text` with every special token as plain text (the shortest path:
        /// no policy to read).
        fn encode_ordinary<'py>(
            &self,
            py: ::pyo3::Python<'py>,
            text: ::pyo3::Bound<'py, ::pyo3::types::PyString>,
        ) -> ::pyo3::PyResult<Bound<'py, ::pyo3::types::PyList>> {
            let none = $crate::py::seam::Disallowed::Listed(Vec::new());
            let ids = self.seam.encode_string(py, &text, Some(Vec::new()), none)?;
            self.seam.id_list(py, &ids)
        }

        /// Encodes `text` under the safe default policy: no special token allowed, and
        /// any of the model's special tokens in the text raises ValueError. Nothing
        /// about the policy crosses the boundary: its matcher is the model's own.
        fn encode_default<'py>(
            &self,
            py: ::pyo3::Python<'py>,
            text: ::pyo3::Bound<'py, ::pyo3::types::PyString>,
        ) -> ::pyo3::PyResult<Bound<'py, ::pyo3::types::PyList>> {
            let rest = $crate::py::seam::Disallowed::Rest;
            let ids = self.seam.encode_string(py, &text, Some(Vec::new()), rest)?;
            self.seam.id_list(py, &ids)
        }

        /// How many tokens `text` encodes to under the safe default policy (see
        /// `encode_default`): nothing about the policy crosses the boundary.
        fn count_default(
            &self,
            py: ::pyo3::Python<'_>,
            text: ::pyo3::Bound<'_, ::pyo3::types::PyString>,
        ) -> ::pyo3::PyResult<usize> {
            let rest = $crate::py::seam::Disallowed::Rest;
            self.seam.count(py, &text, Some(Vec::new()), rest)
        }

        /// Like `encode`, as a buffer of little-endian uint32 (for numpy: no list in
        /// between, and no copy).
        #[pyo3(signature = (text, allowed_special=None, disallowed_special=None))]
        fn encode_to_buffer<'py>(
            &self,
            py: ::pyo3::Python<'py>,
            text: ::pyo3::Bound<'py, ::pyo3::types::PyString>,
            allowed_special: Option<Vec<String>>,
            disallowed_special: Option<::pyo3::Bound<'_, ::pyo3::PyAny>>,
        ) -> ::pyo3::PyResult<Bound<'py, $crate::py::buffers::IdBuffer>> {
            let disallowed = $crate::py::seam::Disallowed::from_py(disallowed_special.as_ref())?;
            self.seam
                .encode_to_buffer(py, &text, allowed_special, disallowed)
        }

        /// How many tokens `text` encodes to.
        #[pyo3(signature = (text, allowed_special=None, disallowed_special=None))]
        fn count(
            &self,
            py: ::pyo3::Python<'_>,
            text: ::pyo3::Bound<'_, ::pyo3::types::PyString>,
            allowed_special: Option<Vec<String>>,
            disallowed_special: Option<::pyo3::Bound<'_, ::pyo3::PyAny>>,
        ) -> ::pyo3::PyResult<usize> {
            let disallowed = $crate::py::seam::Disallowed::from_py(disallowed_special.as_ref())?;
            self.seam.count(py, &text, allowed_special, disallowed)
        }

        /// Encodes many texts on `num_threads` threads (see `py::seam`).
        #[pyo3(signature = (texts, allowed_special=None, num_threads=1, disallowed_special=None))]
        fn encode_batch<'py>(
            &self,
            py: ::pyo3::Python<'py>,
            texts: Vec<Bound<'py, ::pyo3::types::PyString>>,
            allowed_special: Option<Vec<String>>,
            num_threads: usize,
            disallowed_special: Option<::pyo3::Bound<'_, ::pyo3::PyAny>>,
        ) -> ::pyo3::PyResult<Bound<'py, ::pyo3::types::PyList>> {
            let disallowed = $crate::py::seam::Disallowed::from_py(disallowed_special.as_ref())?;
            let seam = &self.seam;
            seam.encode_batch(py, texts, allowed_special, num_threads, disallowed)
        }

        /// Encodes many texts into one flat array of ids and offsets (see `py::seam`).
        #[pyo3(signature = (texts, allowed_special=None, num_threads=1, disallowed_special=None))]
        fn encode_batch_to_bytes<'py>(
            &self,
            py: ::pyo3::Python<'py>,
            texts: Vec<Bound<'py, ::pyo3::types::PyString>>,
            allowed_special: Option<Vec<String>>,
            num_threads: usize,
            disallowed_special: Option<::pyo3::Bound<'_, ::pyo3::PyAny>>,
        ) -> ::pyo3::PyResult<(Bound<'py, $crate::py::buffers::IdBuffer>, Bound<'py, ::pyo3::types::PyBytes>)> {
            let disallowed = $crate::py::seam::Disallowed::from_py(disallowed_special.as_ref())?;
            let seam = &self.seam;
            seam.encode_batch_to_bytes(py, texts, allowed_special, num_threads, disallowed)
        }

        /// Streaming: the ids of the part of `text` later text cannot change, and how
        /// many characters that part is (see `py::seam`); `first` / `last`: the
        /// stream's first / last call.
        #[pyo3(signature = (text, allowed_special, first, last, starts, disallowed_special=None))]
        #[allow(clippy::too_many_arguments)]
        fn encode_prefix(
            &self,
            py: ::pyo3::Python<'_>,
            text: &str,
            allowed_special: Option<Vec<String>>,
            first: bool,
            last: bool,
            starts: bool,
            disallowed_special: Option<::pyo3::Bound<'_, ::pyo3::PyAny>>,
        ) -> ::pyo3::PyResult<(Vec<u32>, usize)> {
            let disallowed = $crate::py::seam::Disallowed::from_py(disallowed_special.as_ref())?;
            let seam = &self.seam;
            seam.encode_prefix(py, text, allowed_special, first, last, starts, disallowed)
        }

        /// The same model putting `before` ahead of every text's ids and `after`
        /// behind them (BOS/EOS; `model::Frame`); shares this one's data.
        fn with_frame(&self, before: Vec<u32>, after: Vec<u32>) -> ::pyo3::PyResult<Self> {
            let frame = $crate::model::Frame { before, after };
            Ok(Self { seam: self.seam.framed(frame)? })
        }

        /// The ids put before and after every text (`with_frame`).
        fn frame(&self) -> (Vec<u32>, Vec<u32>) {
            (self.seam.frame.before.clone(), self.seam.frame.after.clone())
        }

        /// A text file's documents encoded a block at a time, for shard folders
        /// (`DocumentBatches`).
        #[pyo3(signature = (path, separators, allowed_special, disallowed_special, errors, num_threads, block_bytes, first_doc=0, width=4, chunks=None))]
        #[allow(clippy::too_many_arguments)]
        fn document_batches(
            &self,
            path: &str,
            separators: Vec<String>,
            allowed_special: Vec<String>,
            disallowed_special: Vec<String>,
            errors: &str,
            num_threads: usize,
            block_bytes: usize,
            first_doc: u64,
            width: usize,
            chunks: Option<::pyo3::Py<::pyo3::PyAny>>,
        ) -> ::pyo3::PyResult<$crate::py::documents::DocumentBatches> {
            self.seam.document_batches(
                path, separators, allowed_special, disallowed_special, errors, num_threads,
                block_bytes, first_doc, width, chunks,
            )
        }

        /// A JSON Lines file's records (the string at the `field` path) encoded a
        /// block at a time, for shard folders (`DocumentBatches`); `slow(line,
        /// number)` reads the lines the core leaves to Python.
        #[pyo3(signature = (path, field, slow, allowed_special, disallowed_special, num_threads, block_bytes, first_doc=0, width=4, chunks=None))]
        #[allow(clippy::too_many_arguments)]
        fn jsonl_batches(
            &self,
            path: &str,
            field: Vec<String>,
            slow: ::pyo3::Py<::pyo3::PyAny>,
            allowed_special: Vec<String>,
            disallowed_special: Vec<String>,
            num_threads: usize,
            block_bytes: usize,
            first_doc: u64,
            width: usize,
            chunks: Option<::pyo3::Py<::pyo3::PyAny>>,
        ) -> ::pyo3::PyResult<$crate::py::documents::DocumentBatches> {
            self.seam.jsonl_batches(
                path, field, slow, allowed_special, disallowed_special, num_threads,
                block_bytes, first_doc, width, chunks,
            )
        }

        /// Encodes the UTF-8 file at `path` into `out_path` as ids of `width` bytes, or
        /// counts them (`out_path` None); `chunks`: its bytes from Python (see
        /// `py::seam`). Returns the number of tokens.
        #[pyo3(signature = (path, out_path, width, allowed_special, disallowed_special, errors="strict", num_threads=1, progress=None, block_bytes=crate::io::shards::ENCODE_BLOCK_BYTES, chunks=None))]
        #[allow(clippy::too_many_arguments)]
        fn encode_file(
            &self,
            py: ::pyo3::Python<'_>,
            path: &str,
            out_path: Option<&str>,
            width: usize,
            allowed_special: Vec<String>,
            disallowed_special: Vec<String>,
            errors: &str,
            num_threads: usize,
            progress: Option<::pyo3::Py<::pyo3::PyAny>>,
            block_bytes: usize,
            chunks: Option<::pyo3::Py<::pyo3::PyAny>>,
        ) -> ::pyo3::PyResult<u64> {
            let (allowed, forbidden) = (allowed_special, disallowed_special);
            self.seam.encode_file(
                py, path, out_path, width, allowed, forbidden, errors, num_threads, progress,
                block_bytes, chunks,
            )
        }
        }
    };
}
pub(crate) use pymethods_with_seam;
