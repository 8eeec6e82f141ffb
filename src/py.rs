//! Python bindings (module `bytepair._core`). Only argument conversion and GIL
//! handling live here; the algorithms are in the other modules.

use std::sync::{Arc, Mutex, OnceLock};

use pyo3::exceptions::{PyKeyboardInterrupt, PyOSError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyString};
use rustc_hash::FxHashMap;

use crate::count::{count_documents, count_file, Counts, ReadError, Utf8Errors, BLOCK_BYTES};
use crate::encode::Encoder as CoreEncoder;
use crate::pretokenize::{PreTokenizer, SpecialMatcher};
use crate::shards::ENCODE_BLOCK_BYTES;
use crate::train::train_merges;

/// What training returns to Python: merges as id pairs, and the bytes of every id.
type TrainedPy = (Vec<(u32, u32)>, Vec<Py<PyBytes>>);

fn value_error(e: String) -> PyErr {
    PyValueError::new_err(e)
}

fn utf8_errors(errors: &str) -> PyResult<Utf8Errors> {
    match errors {
        "strict" => Ok(Utf8Errors::Strict),
        "replace" => Ok(Utf8Errors::Replace),
        other => Err(PyValueError::new_err(format!(
            "errors must be 'strict' or 'replace', not {other:?}"
        ))),
    }
}

fn thread_pool(workers: usize) -> PyResult<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build()
        .map_err(|e| PyOSError::new_err(format!("cannot start {workers} worker threads: {e}")))
}

/// Calls a Python progress callback from native code. False means "stop": the
/// callback raised (for example KeyboardInterrupt from a Ctrl-C signal check).
fn report(callback: &Option<Py<PyAny>>, value: u64, error: &Mutex<Option<PyErr>>) -> bool {
    Python::attach(|py| {
        if let Err(e) = py.check_signals() {
            *error.lock().unwrap() = Some(e);
            return false;
        }
        if let Some(cb) = callback {
            if let Err(e) = cb.call1(py, (value,)) {
                *error.lock().unwrap() = Some(e);
                return false;
            }
        }
        true
    })
}

/// Distinct pre-tokens of a corpus and how often each occurs (training's map step).
#[pyclass(module = "bytepair._core")]
struct PreTokenCounter {
    pre: PreTokenizer,
    specials: SpecialMatcher,
    pool: rayon::ThreadPool,
    counts: Counts,
}

#[pymethods]
impl PreTokenCounter {
    #[new]
    #[pyo3(signature = (pattern, special_tokens, workers))]
    fn new(pattern: Option<&str>, special_tokens: Vec<String>, workers: usize) -> PyResult<Self> {
        Ok(Self {
            pre: PreTokenizer::new(pattern).map_err(value_error)?,
            specials: SpecialMatcher::new(&special_tokens).map_err(value_error)?,
            pool: thread_pool(workers.max(1))?,
            counts: Counts::default(),
        })
    }

    /// Counts a whole file, read in blocks; `progress(bytes_done)` after each block.
    #[pyo3(signature = (path, errors="strict", progress=None, block_bytes=BLOCK_BYTES))]
    fn add_file(
        &mut self,
        py: Python<'_>,
        path: &str,
        errors: &str,
        progress: Option<Py<PyAny>>,
        block_bytes: usize,
    ) -> PyResult<()> {
        let errors = utf8_errors(errors)?;
        let failure = Mutex::new(None);
        let result = py.detach(|| {
            count_file(
                path,
                &self.specials,
                &self.pre,
                errors,
                &self.pool,
                block_bytes,
                |done| report(&progress, done, &failure),
            )
        });
        match result {
            Ok(counts) => {
                if self.counts.is_empty() {
                    self.counts = counts;
                } else {
                    for (k, v) in counts {
                        *self.counts.entry(k).or_insert(0) += v;
                    }
                }
                Ok(())
            }
            Err(ReadError::Interrupted) => Err(failure
                .into_inner()
                .unwrap()
                .unwrap_or_else(|| PyKeyboardInterrupt::new_err("interrupted"))),
            Err(ReadError::Io(e)) => Err(PyOSError::new_err(format!("{path}: {e}"))),
            Err(e) => Err(PyValueError::new_err(format!("{path}: {e}"))),
        }
    }

    /// Counts in-memory documents; each is pre-tokenized on its own.
    fn add_documents(&mut self, py: Python<'_>, docs: Vec<String>) -> PyResult<()> {
        let counts = &mut self.counts;
        let (specials, pre, pool) = (&self.specials, &self.pre, &self.pool);
        py.detach(|| count_documents(&docs, specials, pre, pool, counts))
            .map_err(value_error)
    }

    fn __len__(&self) -> usize {
        self.counts.len()
    }

    /// The counts as a dict {pre-token bytes: count}.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        let d = pyo3::types::PyDict::new(py);
        for (k, v) in &self.counts {
            d.set_item(PyBytes::new(py, k), *v)?;
        }
        Ok(d)
    }

    /// Learns up to `num_merges` merges. Returns (merges as id pairs, bytes of every id).
    #[pyo3(signature = (num_merges, progress=None))]
    fn train(
        &self,
        py: Python<'_>,
        num_merges: usize,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<TrainedPy> {
        let failure = Mutex::new(None);
        let trained = py.detach(|| {
            train_merges(
                self.counts.iter().map(|(k, &v)| (k.as_slice(), v)),
                num_merges,
                |done| report(&progress, done as u64, &failure),
            )
        });
        if let Some(e) = failure.into_inner().unwrap() {
            return Err(e);
        }
        let vocab = trained
            .vocab
            .iter()
            .map(|b| PyBytes::new(py, b).unbind())
            .collect();
        Ok((trained.merges, vocab))
    }
}

/// Writes `ids` into `dst` (4 bytes each) as little-endian uint32.
fn put_le(dst: &mut [u8], ids: &[u32]) {
    for (d, id) in dst.chunks_exact_mut(4).zip(ids) {
        d.copy_from_slice(&id.to_le_bytes());
    }
}

/// Starts `workers` threads in `s` that take `texts` in turn (`next` is the next
/// index), encode each with a piece cache kept across texts (warm from earlier calls),
/// and send `(index, ids)`. After a failure no further texts are taken.
fn spawn_encoders<'scope, 'env>(
    s: &'scope std::thread::Scope<'scope, 'env>,
    core: &'env CoreEncoder,
    m: &'env SpecialMatcher,
    texts: &'env [&'env str],
    workers: usize,
    next: &'env std::sync::atomic::AtomicUsize,
) -> std::sync::mpsc::Receiver<(usize, Result<Vec<u32>, String>)> {
    use std::sync::atomic::Ordering;
    let (tx, rx) = std::sync::mpsc::channel();
    for _ in 0..workers {
        let tx = tx.clone();
        s.spawn(move || {
            core.with_cache(|cache| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= texts.len() {
                    break;
                }
                let ids = core.encode_cached(texts[i], m, cache);
                if ids.is_err() {
                    next.store(texts.len(), Ordering::Relaxed);
                }
                if tx.send((i, ids)).is_err() {
                    break;
                }
            })
        });
    }
    rx
}

/// Encoder over a fixed vocabulary, merges and special tokens.
#[pyclass(module = "bytepair._core", frozen)]
struct Encoder {
    core: CoreEncoder,
    matchers: Mutex<FxHashMap<Vec<String>, Arc<SpecialMatcher>>>,
    /// One Python int per id, made once: results share them instead of allocating an
    /// int per token, which took a third of `encode`'s time.
    ints: OnceLock<Vec<Py<PyAny>>>,
}

impl Encoder {
    /// `ids` as a Python list of ints.
    fn id_list<'py>(&self, py: Python<'py>, ids: &[u32]) -> PyResult<Bound<'py, PyList>> {
        let ints = self.ints.get_or_init(|| {
            (0..=self.core.max_id())
                .map(|i| i.into_pyobject(py).unwrap().into_any().unbind())
                .collect()
        });
        let len = ffi::Py_ssize_t::try_from(ids.len()).expect("list length fits isize");
        // SAFETY: a new list of `len` slots, each set exactly once to a new (owned)
        // reference before the list is seen by Python code.
        unsafe {
            // A long list starts as `[None] * len` rather than PyList_New's calloc: the
            // stable ABI's PyList_SetItem reads each slot before writing it, and a read
            // of never-touched memory maps the shared zero page, which the write must
            // then replace — a page-table change that, while the batch's workers run
            // on the other cores, interrupts every one of them to flush its TLB, once
            // for each 4 KiB of the list. Writing the slots first (list repetition)
            // takes ordinary page faults instead.
            let list = if ids.len() >= 1024 {
                let none = PyList::new(py, [py.None()])?;
                ffi::PySequence_Repeat(none.as_ptr(), len)
            } else {
                ffi::PyList_New(len)
            };
            if list.is_null() {
                return Err(PyErr::fetch(py));
            }
            let list = Bound::from_owned_ptr(py, list).cast_into_unchecked::<PyList>();
            for (i, &id) in ids.iter().enumerate() {
                let item = match ints.get(id as usize) {
                    Some(int) => int.clone_ref(py).into_ptr(),
                    None => id.into_pyobject(py)?.into_ptr(),
                };
                ffi::PyList_SetItem(list.as_ptr(), i as ffi::Py_ssize_t, item);
            }
            Ok(list)
        }
    }

    /// The matcher for `allowed` special tokens (`None`: all), cached.
    fn matcher(&self, allowed: Option<Vec<String>>) -> PyResult<Arc<SpecialMatcher>> {
        let Some(mut list) = allowed else {
            return Ok(Arc::new(self.core.all_specials().clone()));
        };
        list.sort();
        list.dedup();
        let mut cache = self.matchers.lock().unwrap();
        if let Some(m) = cache.get(&list) {
            return Ok(m.clone());
        }
        let m = Arc::new(SpecialMatcher::new(&list).map_err(value_error)?);
        if cache.len() > 64 {
            cache.clear();
        }
        cache.insert(list, m.clone());
        Ok(m)
    }
}

#[pymethods]
impl Encoder {
    /// An encoder straight from the bytes of a `.tiktoken` file (see
    /// `tiktoken::load`). Failures raise ValueError: a message for a bad pattern or
    /// special token, else args the Python side words (`tiktoken_error`).
    #[staticmethod]
    fn from_tiktoken(
        py: Python<'_>,
        data: &[u8],
        special_tokens: FxHashMap<String, u32>,
        pattern: Option<&str>,
    ) -> PyResult<Self> {
        use crate::tiktoken::{load, LoadError};
        let core = py
            .detach(|| load(data, special_tokens, pattern))
            .map_err(|e| match e {
                LoadError::Parse(e) => parse_error(py, e),
                LoadError::Recover(e) => recover_error(e),
                LoadError::SpecialIsRank => PyValueError::new_err(("unsure",)),
                LoadError::Encoder(message) => PyValueError::new_err(message),
            })?;
        Ok(Self {
            core,
            matchers: Mutex::new(FxHashMap::default()),
            ints: OnceLock::new(),
        })
    }

    /// Every token, special tokens included: {id: bytes} in id order.
    fn vocab<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (id, bytes) in self.core.tokens() {
            d.set_item(id, PyBytes::new(py, bytes))?;
        }
        Ok(d)
    }

    /// The merges in rank order as pairs of bytes.
    fn merges<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let bytes = |id: u32| PyBytes::new(py, self.core.token_bytes(id).unwrap_or_default());
        let pairs: Vec<_> = self
            .core
            .merge_pairs()
            .into_iter()
            .map(|(l, r)| (bytes(l), bytes(r)))
            .collect();
        PyList::new(py, pairs)
    }

    /// Number of tokens, special tokens included.
    fn vocab_len(&self) -> usize {
        self.core.vocab_len()
    }

    /// Number of distinct merges.
    fn merge_count(&self) -> usize {
        self.core.merge_count()
    }

    /// The largest token id.
    fn max_id(&self) -> u32 {
        self.core.max_id()
    }

    #[new]
    #[pyo3(signature = (vocab, merges, special_tokens, pattern))]
    fn new(
        vocab: FxHashMap<u32, Vec<u8>>,
        merges: Vec<(u32, u32, u32)>,
        special_tokens: FxHashMap<String, u32>,
        pattern: Option<&str>,
    ) -> PyResult<Self> {
        Ok(Self {
            core: CoreEncoder::new(vocab, &merges, special_tokens, pattern).map_err(value_error)?,
            matchers: Mutex::new(FxHashMap::default()),
            ints: OnceLock::new(),
        })
    }

    /// Encodes `text`; `allowed_special` lists the special tokens to honour (None: all).
    #[pyo3(signature = (text, allowed_special=None))]
    fn encode<'py>(
        &self,
        py: Python<'py>,
        text: &str,
        allowed_special: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let m = self.matcher(allowed_special)?;
        let ids = py
            .detach(|| self.core.encode(text, &m))
            .map_err(value_error)?;
        self.id_list(py, &ids)
    }

    /// Encodes to little-endian uint32 bytes (for a zero-copy numpy view).
    #[pyo3(signature = (text, allowed_special=None))]
    fn encode_to_bytes<'py>(
        &self,
        py: Python<'py>,
        text: &str,
        allowed_special: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let m = self.matcher(allowed_special)?;
        let ids = py
            .detach(|| self.core.encode(text, &m))
            .map_err(value_error)?;
        PyBytes::new_with(py, ids.len() * 4, |buf| {
            put_le(buf, &ids);
            Ok(())
        })
    }

    /// How many tokens `text` encodes to.
    #[pyo3(signature = (text, allowed_special=None))]
    fn count(
        &self,
        py: Python<'_>,
        text: &str,
        allowed_special: Option<Vec<String>>,
    ) -> PyResult<usize> {
        let m = self.matcher(allowed_special)?;
        py.detach(|| self.core.count(text, &m)).map_err(value_error)
    }

    fn encode_ordinary<'py>(&self, py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyList>> {
        let ids = py
            .detach(|| self.core.encode(text, self.core.no_specials()))
            .map_err(value_error)?;
        self.id_list(py, &ids)
    }

    /// Encodes many texts on `num_threads` threads. Workers take texts in turn, each
    /// with its own piece cache (warm from earlier calls) across its texts; meanwhile
    /// this thread turns finished results into Python lists (the part that needs the
    /// GIL), so that conversion overlaps encoding instead of following it.
    #[pyo3(signature = (texts, allowed_special=None, num_threads=1))]
    fn encode_batch<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyString>>,
        allowed_special: Option<Vec<String>>,
        num_threads: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        use std::sync::atomic::{AtomicUsize, Ordering};

        let m = self.matcher(allowed_special)?;
        // Borrowed UTF-8, not copied.
        let texts: Vec<&str> = texts.iter().map(|t| t.to_str()).collect::<PyResult<_>>()?;
        let mut lists: Vec<Option<Bound<'py, PyList>>> = texts.iter().map(|_| None).collect();
        let workers = num_threads.max(1).min(texts.len());
        if workers <= 1 {
            for (i, t) in texts.iter().enumerate() {
                let ids = py.detach(|| self.core.encode(t, &m)).map_err(value_error)?;
                lists[i] = Some(self.id_list(py, &ids)?);
            }
        } else {
            let (core, m, texts) = (&self.core, &*m, &texts);
            let next = &AtomicUsize::new(0);
            let failure = std::thread::scope(|s| {
                let mut rx = spawn_encoders(s, core, m, texts, workers, next);
                let mut failure = None;
                loop {
                    // Wait without the GIL (the receiver moves in and back out).
                    let (got, back) = py.detach(move || (rx.recv(), rx));
                    rx = back;
                    let Ok((i, ids)) = got else { break };
                    match ids
                        .map_err(value_error)
                        .and_then(|ids| self.id_list(py, &ids))
                    {
                        Ok(list) => lists[i] = Some(list),
                        Err(e) => {
                            next.store(texts.len(), Ordering::Relaxed); // stop the workers
                            failure.get_or_insert(e);
                        }
                    }
                }
                failure
            });
            if let Some(e) = failure {
                return Err(e);
            }
        }
        PyList::new(
            py,
            lists
                .into_iter()
                .map(|l| l.expect("every text was encoded")),
        )
    }

    /// Encodes many texts on `num_threads` threads into one flat array: returns the ids
    /// of all texts, one after another, as little-endian uint32 bytes (a bytearray, so
    /// numpy's view of it is writable), and the `len(texts) + 1` offsets
    /// (little-endian int64 bytes) where each text's ids start and the last ends.
    ///
    /// No Python object is made per token, so nothing needs the GIL: workers take
    /// texts in turn and this thread copies finished results into place, in text
    /// order, while they encode. The output is allocated once at its largest possible
    /// size (a token has at least one byte) and shrunk at the end; pages never written
    /// cost no memory, and nothing is reallocated while the workers run (moving a
    /// large buffer unmaps pages, which interrupts the other cores to flush their TLBs).
    #[pyo3(signature = (texts, allowed_special=None, num_threads=1))]
    fn encode_batch_to_bytes<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyString>>,
        allowed_special: Option<Vec<String>>,
        num_threads: usize,
    ) -> PyResult<(Bound<'py, PyByteArray>, Bound<'py, PyBytes>)> {
        use std::collections::BTreeMap;
        use std::sync::atomic::AtomicUsize;

        /// The output buffer, written by one thread while no Python code can see it.
        struct Out(*mut u8);
        // SAFETY: only the receiving thread writes through the pointer, and the
        // bytearray outlives the scope that does.
        unsafe impl Send for Out {}
        unsafe impl Sync for Out {}

        let m = self.matcher(allowed_special)?;
        let texts: Vec<&str> = texts.iter().map(|t| t.to_str()).collect::<PyResult<_>>()?;
        let most_ids: usize = texts.iter().map(|t| t.len()).sum();
        let size = most_ids
            .checked_mul(4)
            .and_then(|n| ffi::Py_ssize_t::try_from(n).ok())
            .ok_or_else(|| PyValueError::new_err("batch too large"))?;
        // SAFETY: a new, uninitialised bytearray (not zeroed: its pages stay untouched
        // until written); owned here until returned.
        let out = unsafe {
            Bound::from_owned_ptr_or_err(
                py,
                ffi::PyByteArray_FromStringAndSize(std::ptr::null(), size),
            )?
            .cast_into_unchecked::<PyByteArray>()
        };
        let buf = Out(unsafe { ffi::PyByteArray_AsString(out.as_ptr()) }.cast::<u8>());
        let workers = num_threads.max(1).min(texts.len());
        let (core, m, texts, buf) = (&self.core, &*m, &texts, &buf);
        let next = &AtomicUsize::new(0);
        let placed: Result<Vec<u64>, String> = py.detach(|| {
            std::thread::scope(|s| {
                let rx = spawn_encoders(s, core, m, texts, workers, next);
                let mut offsets = Vec::with_capacity(texts.len() + 1);
                offsets.push(0u64);
                let mut waiting = BTreeMap::new();
                let mut written = 0usize; // ids
                let mut failure: Option<(usize, String)> = None;
                for (i, ids) in rx {
                    match ids {
                        Err(e) => {
                            if failure.as_ref().is_none_or(|f| i < f.0) {
                                failure = Some((i, e));
                            }
                        }
                        Ok(ids) => {
                            waiting.insert(i, ids);
                        }
                    }
                    while let Some(ids) = waiting.remove(&(offsets.len() - 1)) {
                        assert!(written + ids.len() <= most_ids, "a token has a byte");
                        // SAFETY: within the buffer (checked above); nothing else
                        // reads or writes it until the scope ends.
                        let dst = unsafe {
                            std::slice::from_raw_parts_mut(buf.0.add(written * 4), ids.len() * 4)
                        };
                        put_le(dst, &ids);
                        written += ids.len();
                        offsets.push(written as u64);
                    }
                }
                match failure {
                    Some((_, e)) => Err(e),
                    None => Ok(offsets),
                }
            })
        });
        let offsets = placed.map_err(value_error)?;
        let written = *offsets.last().unwrap() as ffi::Py_ssize_t * 4;
        // SAFETY: shrinking our own bytearray to the bytes written.
        if unsafe { ffi::PyByteArray_Resize(out.as_ptr(), written) } != 0 {
            return Err(PyErr::fetch(py));
        }
        let offsets: Vec<u8> = offsets.iter().flat_map(|o| o.to_le_bytes()).collect();
        Ok((out, PyBytes::new(py, &offsets)))
    }

    /// Streaming: encodes the part of `text` later text cannot change. Returns the ids
    /// and how many characters (code points) of `text` were consumed.
    #[pyo3(signature = (text, allowed_special, last))]
    fn encode_prefix(
        &self,
        py: Python<'_>,
        text: &str,
        allowed_special: Option<Vec<String>>,
        last: bool,
    ) -> PyResult<(Vec<u32>, usize)> {
        let m = self.matcher(allowed_special)?;
        py.detach(|| {
            let (ids, used) = self.core.encode_prefix(text, &m, last)?;
            Ok((ids, text[..used].chars().count()))
        })
        .map_err(value_error)
    }

    /// Encodes the UTF-8 file at `path` into `out_path` as little-endian ids of `width`
    /// bytes; `allowed_special` are encoded as specials, any of `disallowed_special`
    /// in the file is an error. Returns the number of tokens.
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
        use crate::shards::{encode_file, Specials};
        let errors = utf8_errors(errors)?;
        if width != 2 && width != 4 {
            return Err(PyValueError::new_err("width must be 2 or 4 bytes"));
        }
        let both: Vec<String> = allowed_special
            .iter()
            .chain(&disallowed_special)
            .cloned()
            .collect();
        let allowed = self.matcher(Some(allowed_special))?;
        let forbidden = self.matcher(Some(disallowed_special))?;
        let cut_at = self.matcher(Some(both))?;
        let pool = thread_pool(num_threads.max(1))?;
        // Appends: the caller may have written a header (e.g. .npy) first.
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(out_path)
            .map_err(|e| PyOSError::new_err(format!("{out_path}: {e}")))?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        let failure = Mutex::new(None);
        let specials = Specials {
            allowed: &allowed,
            forbidden: &forbidden,
            cut_at: &cut_at,
        };
        let result = py.detach(|| {
            encode_file(
                &self.core,
                path,
                &mut out,
                width,
                specials,
                errors,
                &pool,
                block_bytes,
                |done| report(&progress, done, &failure),
            )
        });
        match result {
            Ok(n) => Ok(n),
            Err(ReadError::Interrupted) => Err(failure
                .into_inner()
                .unwrap()
                .unwrap_or_else(|| PyKeyboardInterrupt::new_err("interrupted"))),
            Err(ReadError::Io(e)) => Err(PyOSError::new_err(format!("{path}: {e}"))),
            Err(e) => Err(PyValueError::new_err(format!("{path}: {e}"))),
        }
    }

    /// The first of `tokens` that occurs in `text` (leftmost), if any.
    fn find_first(
        &self,
        py: Python<'_>,
        text: &str,
        tokens: Vec<String>,
    ) -> PyResult<Option<String>> {
        let m = self.matcher(Some(tokens))?;
        Ok(py.detach(|| {
            m.find_all(text.as_bytes())
                .first()
                .map(|&(_, _, i)| m.tokens()[i].clone())
        }))
    }

    fn decode_bytes<'py>(&self, py: Python<'py>, ids: Vec<u32>) -> PyResult<Bound<'py, PyBytes>> {
        match py.detach(|| self.core.decode_bytes(&ids)) {
            Ok(b) => Ok(PyBytes::new(py, &b)),
            Err(id) => Err(pyo3::exceptions::PyKeyError::new_err(format!(
                "unknown token id {id}"
            ))),
        }
    }
}

/// A `.tiktoken` parse failure as ValueError args: ("unsure",) when the Python reader
/// must decide, ("line", lineno) for a line the Python reader words, else
/// ("duplicate_token", lineno, first lineno, token) / ("duplicate_rank", lineno, first
/// lineno, rank).
fn parse_error(py: Python<'_>, e: crate::tiktoken::ParseError) -> PyErr {
    use crate::tiktoken::ParseError;
    match e {
        ParseError::Unsure => PyValueError::new_err(("unsure",)),
        ParseError::Fields { line } | ParseError::Base64 { line } | ParseError::Rank { line } => {
            PyValueError::new_err(("line", line))
        }
        ParseError::DuplicateToken { line, first, token } => PyValueError::new_err((
            "duplicate_token",
            line,
            first,
            PyBytes::new(py, &token).unbind(),
        )),
        ParseError::DuplicateRank { line, first, rank } => {
            PyValueError::new_err(("duplicate_rank", line, first, rank))
        }
    }
}

fn recover_error(e: crate::ranks::RecoverError) -> PyErr {
    use crate::ranks::RecoverError;
    match e {
        RecoverError::Duplicate { rank } => PyValueError::new_err(("duplicate", rank)),
        RecoverError::MissingByte(b) => PyValueError::new_err(("missing_byte", b)),
        RecoverError::Unreachable { rank, parts } => {
            PyValueError::new_err(("unreachable", rank, parts))
        }
    }
}

/// The contents of a `.tiktoken` file as {token: rank}, in file order. Failures raise
/// ValueError with the args of `parse_error`.
#[pyfunction]
fn parse_tiktoken<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    let entries = py
        .detach(|| crate::tiktoken::parse(data))
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
    py.detach(|| crate::ranks::recover_merges(&tokens))
        .map_err(recover_error)
}

/// Offsets where the built-in patterns allow cutting text (`chunking::is_newline_cut`),
/// for the tests that check that rule.
#[pyfunction]
fn newline_cuts(data: &[u8]) -> Vec<usize> {
    (0..=data.len())
        .filter(|&c| crate::chunking::is_newline_cut(data, c))
        .collect()
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(newline_cuts, m)?)?;
    m.add_function(wrap_pyfunction!(recover_merges, m)?)?;
    m.add_function(wrap_pyfunction!(parse_tiktoken, m)?)?;
    m.add_class::<PreTokenCounter>()?;
    m.add_class::<Encoder>()?;
    m.add_class::<crate::py_spm::SentencePieceModel>()?;
    m.add("GPT2_PATTERN", crate::pretokenize::GPT2_PATTERN)?;
    m.add("CL100K_PATTERN", crate::pretokenize::CL100K_PATTERN)?;
    m.add("O200K_PATTERN", crate::pretokenize::O200K_PATTERN)?;
    Ok(())
}
