//! `PreTokenCounter`: the distinct pre-tokens of a corpus and how often each occurs
//! (training's map step), and the merge loop over them (the reduce step).

use pyo3::exceptions::PyMemoryError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::documents::{input_of, python_reads, Failure};
use super::errors::{kept_or, read_error, value_error};
use super::{thread_pool, utf8_errors, Progress};
use crate::bpe::train::{train_merges, Limits};
use crate::io::count::{count_documents, count_file, count_items, Counts, BLOCK_BYTES};
use crate::io::jsonl::JsonlReader;
use crate::io::table;
use crate::pretok::{PreTokenizer, SpecialMatcher};

/// What training returns to Python: merges as id pairs, and the bytes of every id.
type TrainedPy = (Vec<(u32, u32)>, Vec<Py<PyBytes>>);

#[pyclass(module = "bytepair._core")]
pub struct PreTokenCounter {
    pre: PreTokenizer,
    specials: SpecialMatcher,
    num_threads: usize,
    counts: Counts,
}

impl PreTokenCounter {
    /// Adds a file's counts to the corpus's (the first file's are taken as they are).
    fn take_in(&mut self, counts: Counts) {
        if self.counts.is_empty() {
            self.counts = counts;
        } else {
            self.counts.add_all(counts);
        }
    }
}

#[pymethods]
impl PreTokenCounter {
    #[new]
    #[pyo3(signature = (pattern, special_tokens, num_threads))]
    fn new(
        pattern: Option<&str>,
        special_tokens: Vec<String>,
        num_threads: usize,
    ) -> PyResult<Self> {
        Ok(Self {
            pre: PreTokenizer::new(pattern).map_err(value_error)?,
            specials: SpecialMatcher::new(&special_tokens).map_err(value_error)?,
            num_threads: num_threads.max(1),
            counts: Counts::default(),
        })
    }

    /// Counts a whole file, read in blocks; `progress(bytes_done)` after each block;
    /// `chunks`: the file's bytes, when Python decompresses them ([`input_of`]).
    /// Returns the bytes read (of the decompressed text, for a compressed file).
    #[pyo3(signature = (path, errors="strict", progress=None, block_bytes=BLOCK_BYTES, chunks=None))]
    fn add_file(
        &mut self,
        py: Python<'_>,
        path: &str,
        errors: &str,
        progress: Option<Py<PyAny>>,
        block_bytes: usize,
        chunks: Option<Py<PyAny>>,
    ) -> PyResult<u64> {
        let errors = utf8_errors(errors)?;
        let pool = thread_pool(self.num_threads)?;
        let progress = Progress::new(progress);
        let failure = Failure::default();
        let (specials, pre) = (&self.specials, &self.pre);
        let mut read = 0;
        let result = py.detach(|| {
            let input = input_of(path, chunks, &failure)?;
            count_file(input, specials, pre, errors, &pool, block_bytes, |done| {
                read = done;
                progress.report(done)
            })
        });
        let counts = result.map_err(|e| kept_or(&failure, || read_error(path, e, progress)))?;
        self.take_in(counts);
        Ok(read)
    }

    /// Counts the records of a JSON Lines file, each the string at the `field` path
    /// and a document of its own, read by the core in blocks of whole lines
    /// ([`crate::io::jsonl`]); a line it cannot be sure to read as Python does goes to
    /// `slow(line, number)` ([`python_reads`]). `progress(bytes_done)` after each
    /// block; `chunks`: the file's bytes, when Python decompresses them ([`input_of`]).
    /// Returns the UTF-8 bytes of the texts counted.
    #[pyo3(signature = (path, field, slow, progress=None, block_bytes=BLOCK_BYTES, chunks=None))]
    #[allow(clippy::too_many_arguments)]
    fn add_jsonl(
        &mut self,
        py: Python<'_>,
        path: &str,
        field: Vec<String>,
        slow: Py<PyAny>,
        progress: Option<Py<PyAny>>,
        block_bytes: usize,
        chunks: Option<Py<PyAny>>,
    ) -> PyResult<u64> {
        let pool = thread_pool(self.num_threads)?;
        let progress = Progress::new(progress);
        let failure = Failure::default();
        // Training refuses no special token: they are boundaries.
        let refused = SpecialMatcher::new(&[]).map_err(value_error)?;
        let (specials, pre) = (&self.specials, &self.pre);
        let result = py.detach(|| {
            let input = input_of(path, chunks, &failure)?;
            let mut reader = JsonlReader::open(input, &field, block_bytes, 0);
            let mut read = python_reads(&slow, &failure);
            let mut bytes = 0;
            // Read (and parsed) on this thread while the pool counts the block before.
            let next = || {
                let items = reader.next_items(&refused, &mut read)?;
                bytes += items.as_ref().map_or(0, |i| i.text.len() as u64);
                Ok(items)
            };
            let counts = count_items(next, specials, pre, &pool, block_bytes, |done| {
                progress.report(done)
            })?;
            Ok((counts, bytes))
        });
        let (counts, bytes) =
            result.map_err(|e| kept_or(&failure, || read_error(path, e, progress)))?;
        self.take_in(counts);
        Ok(bytes)
    }

    /// Counts in-memory documents; each is pre-tokenized on its own.
    fn add_documents(&mut self, py: Python<'_>, docs: Vec<String>) -> PyResult<()> {
        let pool = thread_pool(self.num_threads)?;
        let Self {
            pre,
            specials,
            counts,
            ..
        } = self;
        py.detach(|| count_documents(&docs, specials, pre, &pool, counts))
            .map_err(value_error)
    }

    /// Adds `(pre-token bytes, count)` pairs: a dict or any iterable of pairs.
    fn add_counts(&mut self, items: &Bound<'_, PyAny>) -> PyResult<()> {
        let items = match items.cast::<PyDict>() {
            Ok(d) => d.items().into_any(),
            Err(_) => items.clone(),
        };
        for item in items.try_iter()? {
            let (token, count): (Vec<u8>, u64) = item?.extract()?;
            self.counts.add(&token, count);
        }
        Ok(())
    }

    /// Adds the counts of `other` (counted apart: another file, process or machine).
    fn merge(slf: &Bound<'_, Self>, other: &Bound<'_, Self>) -> PyResult<()> {
        if slf.is(other) {
            let counts = slf.borrow().counts.clone();
            slf.borrow_mut().counts.add_all(counts);
        } else {
            slf.borrow_mut()
                .counts
                .add_counts_of(&other.borrow().counts);
        }
        Ok(())
    }

    /// The counts as a compact, versioned binary table (`io::table`), for sending
    /// or storing counts made apart. Never pickle.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &py.detach(|| table::to_bytes(&self.counts)))
    }

    /// A counter holding the counts of a table made by `to_bytes`; a corrupt or
    /// truncated table raises ValueError naming the byte offset.
    #[staticmethod]
    #[pyo3(signature = (data, pattern, special_tokens, num_threads))]
    fn from_bytes(
        py: Python<'_>,
        data: &[u8],
        pattern: Option<&str>,
        special_tokens: Vec<String>,
        num_threads: usize,
    ) -> PyResult<Self> {
        let mut counter = Self::new(pattern, special_tokens, num_threads)?;
        py.detach(|| table::add_from_bytes(data, &mut counter.counts))
            .map_err(value_error)?;
        Ok(counter)
    }

    fn __len__(&self) -> usize {
        self.counts.len()
    }

    /// The counts as a dict {pre-token bytes: count}.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.counts.iter() {
            d.set_item(PyBytes::new(py, k.as_ref()), v)?;
        }
        Ok(d)
    }

    /// Learns up to `num_merges` merges. Returns (merges as id pairs, bytes of every id).
    /// Training stops early when the best pair occurs fewer than `min_frequency` times;
    /// a pair whose token would be longer than `max_token_length` bytes is never merged.
    #[pyo3(signature = (num_merges, progress=None, min_frequency=0, max_token_length=None))]
    fn train(
        &self,
        py: Python<'_>,
        num_merges: usize,
        progress: Option<Py<PyAny>>,
        min_frequency: u64,
        max_token_length: Option<usize>,
    ) -> PyResult<TrainedPy> {
        let limits = Limits {
            min_frequency,
            max_token_length: max_token_length.unwrap_or(usize::MAX),
        };
        let progress = Progress::new(progress);
        let trained = py.detach(|| {
            train_merges(
                self.counts.iter(),
                num_merges,
                limits,
                self.num_threads,
                |done| progress.report(done as u64),
            )
        });
        if let Some(e) = progress.failure() {
            return Err(e);
        }
        let trained = trained.map_err(|e| PyMemoryError::new_err(e.to_string()))?;
        // Each token's bytes are freed once Python has its copy (a giant run's tokens
        // are as long as the run: the vocabulary is held once, not twice).
        let mut vocab = Vec::with_capacity(trained.vocab.len());
        for b in trained.vocab {
            let bytes = PyBytes::new_with(py, b.len(), |buf| {
                buf.copy_from_slice(&b);
                Ok(())
            })?;
            vocab.push(bytes.unbind());
        }
        Ok((trained.merges, vocab))
    }
}
