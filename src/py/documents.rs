//! `DocumentBatches`: a text file's documents encoded a block at a time
//! ([`crate::io::documents`] reads them, [`crate::io::batch::encode_flat`] encodes
//! them on all threads), for `bytepair.shards` to write. Python only orchestrates:
//! no string is made per document, and no Python code runs per token.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::buffers::{IdBuffer, Spare};
use super::errors::read_error;
use super::Progress;
use crate::io::blocks::ReadError;
use crate::io::documents::{DocumentReader, Items};
use crate::io::shards::check_forbidden;
use crate::model::{try_reserve, EncodeError};
use crate::pages::advise_huge_pages;
use crate::pretok::SpecialMatcher;

/// Encodes texts into a flat buffer (little-endian uint32), returning the offsets.
pub type EncodeFlat =
    dyn Fn(&[&str], &mut [MaybeUninit<u8>]) -> Result<Vec<u64>, EncodeError> + Send + Sync;
/// The most ids the texts may encode to.
pub type MostIds = dyn Fn(&[&str]) -> usize + Send + Sync;

/// One block, encoded: its items and their ids (little-endian uint32 bytes), with
/// the `items + 1` offsets where each item's ids start.
struct Encoded {
    items: Items,
    ids: Vec<u8>,
    offsets: Vec<u64>,
}

/// An iterator over the blocks of a text file, each a tuple
/// `(ids, offsets, docs, firsts, lasts, end)`: the ids of the block's items (parts of
/// documents) as little-endian uint32 in an [`IdBuffer`], the `items + 1` offsets (int64
/// bytes) where each item's ids start and the last ends, each item's document number
/// (int64 bytes), whether it begins / ends its document (one byte each), and the file
/// offset where the block ends. Items are encoded with no frame: the shard writer
/// puts the frame around each whole document. `next_doc`: the number the next
/// document gets (after the last block: one past the file's last).
///
/// A thread of its own reads and encodes the blocks (on `num_threads` more), one
/// block ahead of the caller: the next block is encoded while Python writes this
/// one, and needs no GIL to get done.
#[pyclass(module = "bytepair._core")]
pub struct DocumentBatches {
    path: String,
    /// In a Mutex only to be Sync, as a pyclass must be (`__next__` has `&mut self`).
    blocks: Option<Mutex<mpsc::Receiver<Result<Encoded, ReadError>>>>,
    spare: Spare,
    /// The encoding thread, then the reading one: joined in that order.
    threads: Vec<std::thread::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    next_doc: Arc<AtomicU64>,
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
    /// items, one encodes each block while the next is read.
    pub fn start(
        path: &str,
        reader: DocumentReader,
        forbidden: Arc<SpecialMatcher>,
        encode: Box<EncodeFlat>,
        most_ids: Box<MostIds>,
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
                    let block = read_block(&mut reader, &forbidden);
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
        let spare: Spare = Arc::default();
        let spares = Arc::clone(&spare);
        let encode = move || {
            for items in items_rx {
                let reuse = spares.lock().unwrap_or_else(|e| e.into_inner()).pop();
                let block =
                    items.and_then(|items| encode_items(items, &*encode, &*most_ids, reuse));
                let failed = block.is_err();
                if tx.send(block).is_err() || failed {
                    return;
                }
            }
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
        })
    }

    fn error(&self, e: ReadError) -> PyErr {
        read_error(&self.path, e, Progress::new(None))
    }

    /// Stops the threads and waits for them (they finish the block at hand).
    fn finish(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.blocks = None; // a block being sent now is dropped
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
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

/// Encodes a block's items on the encoder's threads.
fn encode_items(
    items: Items,
    encode: &EncodeFlat,
    most_ids: &MostIds,
    reuse: Option<Vec<u8>>,
) -> Result<Encoded, ReadError> {
    let texts: Vec<&str> = items
        .spans
        .iter()
        .map(|&(a, b)| &items.text[a..b])
        .collect();
    // A spare buffer too small for this block is dropped, not grown: growing it made
    // realloc copy all of its old bytes (useless) into fresh pages, which was most of
    // a shard run's page faults. A new one gets an eighth more, for later blocks.
    let most = most_ids(&texts) * 4;
    let mut ids: Vec<u8> = reuse.filter(|b| b.capacity() >= most).unwrap_or_default();
    ids.clear();
    if ids.capacity() < most {
        try_reserve(&mut ids, most + most / 8).map_err(|e| ReadError::Other(e.to_string()))?;
    }
    advise_huge_pages(ids.spare_capacity_mut());
    let offsets =
        encode(&texts, ids.spare_capacity_mut()).map_err(|e| ReadError::Other(e.to_string()))?;
    let written = offsets.last().map_or(0, |&n| n as usize * 4);
    // SAFETY: `encode` wrote the first `written` bytes (`encode_flat`'s contract).
    unsafe { ids.set_len(written) };
    Ok(Encoded {
        items,
        ids,
        offsets,
    })
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
        let Encoded {
            items,
            ids,
            offsets,
        } = match block {
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
            Bound::new(py, IdBuffer::reused(ids, &self.spare))?,
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
}
