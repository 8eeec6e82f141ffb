//! `DocumentBatches`: a text file's documents or a JSON Lines file's records encoded
//! a block at a time ([`crate::io::documents`] and [`crate::io::jsonl`] read them,
//! [`crate::io::pipeline`] encodes them on all threads), for `bytepair.shards` to
//! write. Python only orchestrates: no string is made per document, and no Python
//! code runs per token (nor per record, but for the rare JSON line the core leaves
//! to Python's reading of it).

use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;

use super::buffers::{IdBuffer, OutputPool};
use super::errors::{keep, kept_or, read_error};
use super::Progress;
use crate::io::blocks::{open_input, Input, ReadError};
use crate::io::documents::{DocumentReader, Items};
use crate::io::jsonl::JsonlReader;
use crate::io::pipeline::FlatIds;
use crate::io::shards::check_forbidden;
use crate::pretok::SpecialMatcher;

/// Encodes the blocks the first function gives (None: the end) and hands each to the
/// third, in order; the second may give a buffer Python is done with, for a block's
/// ids ([`crate::io::pipeline::encode_blocks`], with the model and its threads).
pub type EncodeBlocks = dyn FnOnce(
        &mut dyn FnMut() -> Option<Result<Items, ReadError>>,
        &mut dyn FnMut() -> Option<Vec<u8>>,
        &mut dyn FnMut(Result<Encoded, ReadError>) -> bool,
    ) + Send;

/// One block, encoded: its items and their ids, with the `items + 1` offsets where
/// each item's ids start.
pub type Encoded = (Arc<Items>, FlatIds);

/// What the reading thread reads, a block at a time.
pub trait ReadItems: Send + 'static {
    /// The next block's items, or None at the end of the file.
    fn next_items(&mut self) -> Result<Option<Items>, ReadError>;
    /// The number the next document gets.
    fn next_doc(&self) -> u64;
}

/// A text file's documents, a special token of `forbidden` refused by its offset.
pub struct TextItems {
    pub reader: DocumentReader,
    pub forbidden: Arc<SpecialMatcher>,
}

impl ReadItems for TextItems {
    fn next_items(&mut self) -> Result<Option<Items>, ReadError> {
        read_block(&mut self.reader, &self.forbidden)
    }

    fn next_doc(&self) -> u64 {
        self.reader.next_doc()
    }
}

/// A Python exception raised on the reading thread, kept for `__next__` to raise.
pub type Failure = Arc<Mutex<Option<PyErr>>>;

/// [`crate::io::jsonl::Slow`] by Python: `slow(line: bytes, number: int) -> str |
/// None`, called holding the GIL (taken for the call alone); an exception it raises is
/// kept in `failure` (the error returned says it too).
pub fn python_reads<'a>(
    slow: &'a Py<PyAny>,
    failure: &'a Mutex<Option<PyErr>>,
) -> impl FnMut(&[u8], u64) -> Result<Option<String>, ReadError> + 'a {
    move |line, number| {
        Python::attach(|py| {
            let text = slow
                .call1(py, (PyBytes::new(py, line), number))
                .and_then(|t| t.extract::<Option<String>>(py));
            text.map_err(|e| ReadError::Other(keep(failure, e)))
        })
    }
}

/// The bytes a reader reads: the file at `path`, or when `chunks` is given, what it
/// returns call after call — a compressed file's bytes, decompressed by
/// `bytepair.sources` (`chunks() -> bytes`, empty at the end; an exception it raises
/// is kept in `failure`, for the caller to raise again).
pub fn input_of(
    path: &str,
    chunks: Option<Py<PyAny>>,
    failure: &Failure,
) -> Result<Input, ReadError> {
    match chunks {
        None => open_input(path),
        Some(chunks) => Ok(Box::new(PyChunks {
            chunks,
            held: None,
            at: 0,
            failure: Arc::clone(failure),
        })),
    }
}

/// [`input_of`]'s reader of Python's pieces: each `chunks()` is called holding the
/// GIL (taken for the call alone), and its bytes are read from where Python keeps them.
struct PyChunks {
    chunks: Py<PyAny>,
    held: Option<PyBackedBytes>,
    at: usize,
    failure: Failure,
}

impl Read for PyChunks {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let held = loop {
            match &self.held {
                Some(held) if self.at < held.len() => break held,
                _ => {}
            }
            let next = Python::attach(|py| -> PyResult<PyBackedBytes> {
                let piece = self.chunks.call0(py)?;
                Ok(piece.extract::<PyBackedBytes>(py)?)
            });
            match next {
                Ok(piece) if piece.is_empty() => return Ok(0),
                Ok(piece) => (self.held, self.at) = (Some(piece), 0),
                Err(e) => return Err(std::io::Error::other(keep(&self.failure, e))),
            }
        };
        let n = buf.len().min(held.len() - self.at);
        buf[..n].copy_from_slice(&held[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// A JSON Lines file's records. A line the core does not read itself goes to
/// `slow(line: bytes, number: int) -> str | None` (Python's reading: its text, None
/// for a bad record skipped, or an exception, kept in `failure`), called holding the
/// GIL on the reading thread.
pub struct JsonlItems {
    pub reader: JsonlReader,
    pub forbidden: Arc<SpecialMatcher>,
    pub slow: Py<PyAny>,
    pub failure: Failure,
}

impl ReadItems for JsonlItems {
    fn next_items(&mut self) -> Result<Option<Items>, ReadError> {
        let mut read = python_reads(&self.slow, &self.failure);
        self.reader.next_items(&self.forbidden, &mut read)
    }

    fn next_doc(&self) -> u64 {
        self.reader.next_doc()
    }
}

/// Block buffers kept for reuse: the one Python holds, the one waiting, the one being
/// filled.
const SPARE_BLOCKS: usize = 3;

/// An iterator over the blocks of a text file, each a tuple
/// `(ids, offsets, docs, firsts, lasts, end)`: the ids of the block's items (parts of
/// documents) as little-endian uint16 or uint32 (the shards' width) in an
/// [`IdBuffer`], the `items + 1` offsets (int64
/// bytes) where each item's ids start and the last ends, each item's document number
/// (int64 bytes), whether it begins / ends its document (one byte each), and the file
/// offset where the block ends. Items are encoded with no frame: the shard writer
/// puts the frame around each whole document. `next_doc`: the number the next
/// document gets (after the last block: one past the file's last).
///
/// A thread of its own reads the blocks and another has them encoded (on
/// `num_threads` more), ahead of the caller: the next block is encoded while Python
/// writes this one, and needs no GIL to get done.
#[pyclass(module = "bytepair._core")]
pub struct DocumentBatches {
    path: String,
    /// In a Mutex only to be Sync, as a pyclass must be (`__next__` has `&mut self`).
    blocks: Option<Mutex<mpsc::Receiver<Result<Encoded, ReadError>>>>,
    /// Id buffers Python is done with, for the encoder to fill again: a fresh buffer
    /// per block made the kernel map and zero its pages every time.
    spare: OutputPool,
    /// The encoding thread, then the reading one: joined in that order.
    threads: Vec<std::thread::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    next_doc: Arc<AtomicU64>,
    failure: Failure,
}

type Batch<'py> = (
    Bound<'py, IdBuffer>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    u64,
);

impl DocumentBatches {
    /// Starts the threads: one reads the blocks of `reader` and splits them into
    /// items, one encodes each block while the next is read. `failure`: where the
    /// reader keeps a Python exception it met.
    pub fn start(
        path: &str,
        reader: Box<dyn ReadItems>,
        failure: Failure,
        encode: Box<EncodeBlocks>,
    ) -> PyResult<Self> {
        let (items_tx, items_rx) = mpsc::sync_channel::<Result<Items, ReadError>>(1);
        let (tx, rx) = mpsc::sync_channel(1);
        let stop = Arc::new(AtomicBool::new(false));
        let next_doc = Arc::new(AtomicU64::new(reader.next_doc()));
        let spawn = |name: &str, work: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(work)
                .map_err(|e| {
                    pyo3::exceptions::PyOSError::new_err(format!("cannot start a thread: {e}"))
                })
        };
        let read = {
            let (stop, next_doc) = (Arc::clone(&stop), Arc::clone(&next_doc));
            let mut reader = reader;
            move || {
                while !stop.load(Ordering::Relaxed) {
                    let block = reader.next_items();
                    next_doc.store(reader.next_doc(), Ordering::Relaxed);
                    let more = matches!(block, Ok(Some(_)));
                    // At the end, dropping the sender says so.
                    let sent = block.transpose().is_some_and(|b| items_tx.send(b).is_ok());
                    if !more || !sent {
                        return;
                    }
                }
            }
        };
        let spare = OutputPool::new(SPARE_BLOCKS, usize::MAX);
        let spares = spare.clone();
        let encode = move || {
            let mut next = || items_rx.recv().ok();
            let mut reuse = || spares.pop();
            // The receiver is gone when the caller stopped early.
            let mut deliver = |block| tx.send(block).is_ok();
            encode(&mut next, &mut reuse, &mut deliver);
        };
        let reader = spawn("bytepair-read", Box::new(read))?;
        let encoder = spawn("bytepair-encode", Box::new(encode))?;
        Ok(Self {
            path: path.to_string(),
            blocks: Some(Mutex::new(rx)),
            spare,
            threads: vec![encoder, reader],
            stop,
            next_doc,
            failure,
        })
    }

    /// The reader's error: the Python exception it met, as it was, or else `e` naming
    /// the file.
    fn error(&self, e: ReadError) -> PyErr {
        kept_or(&self.failure, || {
            read_error(&self.path, e, Progress::new(None))
        })
    }

    /// Stops the threads and waits for them (they finish the block at hand), without
    /// the GIL: the reading thread may be waiting for it, to ask Python about a line.
    fn finish(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.blocks = None; // a block being sent now is dropped
        let threads = std::mem::take(&mut self.threads);
        Python::attach(|py| {
            py.detach(|| {
                for thread in threads {
                    let _ = thread.join();
                }
            })
        });
    }
}

impl Drop for DocumentBatches {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Reads the next block's items, refusing a forbidden special token by its offset;
/// None at the end of the file.
fn read_block(
    reader: &mut DocumentReader,
    forbidden: &SpecialMatcher,
) -> Result<Option<Items>, ReadError> {
    let Some(items) = reader.next_items()? else {
        return Ok(None);
    };
    check_forbidden(forbidden, &items.text, items.start)?;
    Ok(Some(items))
}

#[pymethods]
impl DocumentBatches {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Batch<'py>>> {
        let Some(blocks) = &self.blocks else {
            return Ok(None);
        };
        let block = py.detach(|| blocks.lock().unwrap_or_else(|e| e.into_inner()).recv());
        let (items, FlatIds { bytes, offsets }) = match block {
            Ok(Ok(block)) => block,
            Ok(Err(e)) => {
                self.finish();
                return Err(self.error(e));
            }
            Err(_) => {
                self.finish(); // the end of the file
                return Ok(None);
            }
        };
        let le = |values: &mut dyn Iterator<Item = u64>| -> Vec<u8> {
            values.flat_map(u64::to_le_bytes).collect()
        };
        let offsets = le(&mut offsets.into_iter());
        let docs = le(&mut items.docs.iter().copied());
        let flags = |v: &[bool]| v.iter().map(|&b| u8::from(b)).collect::<Vec<u8>>();
        Ok(Some((
            Bound::new(py, IdBuffer::reused(bytes, &self.spare))?,
            PyBytes::new(py, &offsets),
            PyBytes::new(py, &docs),
            PyBytes::new(py, &flags(&items.firsts)),
            PyBytes::new(py, &flags(&items.lasts)),
            items.end,
        )))
    }

    #[getter]
    fn next_doc(&self) -> u64 {
        self.next_doc.load(Ordering::Relaxed)
    }

    /// Stops reading and encoding, and waits for the threads: after it, nothing is
    /// read of the file (or asked of `chunks`) any more. Also when the batches are
    /// dropped; `contextlib.closing` makes it happen before what they read is closed.
    fn close(&mut self) {
        self.finish();
    }
}
