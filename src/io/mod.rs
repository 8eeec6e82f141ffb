//! Reading and writing: files in blocks cut at safe points, counting pre-tokens
//! (training's map step), encoding batches, streams and whole files, and parsing
//! `.tiktoken` rank files.
//!
//! - [`chunking`]: where text may be cut and still pre-tokenize identically;
//! - [`blocks`]: reading files in blocks cut at those points;
//! - [`documents`]: a text file as its documents, a block at a time;
//! - [`jsonl`]: a JSON Lines file as its records' texts, a block at a time;
//! - [`framing`]: a batch's items framed with their documents' first and last ids (shard folders);
//! - [`count`]: counting pre-tokens in files and documents, in parallel;
//! - [`batch`]: encoding many texts on several threads, in order;
//! - [`pipeline`]: encoding blocks of texts one after another, pipelined (shard folders);
//! - [`stream`]: encoding text that arrives in chunks;
//! - [`table`]: pre-token count tables as bytes, for adding up counts made apart;
//! - [`shards`]: encoding whole files to uint16/uint32 id files on all threads;
//! - [`splits`]: which split a shard folder's document goes to under `val_fraction`;
//! - [`tiktoken`]: parsing `.tiktoken` rank files.

pub mod batch;
pub mod blocks;
pub mod chunking;
pub mod count;
pub mod documents;
pub mod framing;
pub mod jsonl;
pub mod pipeline;
pub mod shards;
pub mod splits;
pub mod stream;
pub mod table;
pub mod tiktoken;

/// A pool of `threads` threads when there are more than one (None: the work runs on
/// the calling thread), or None when the threads cannot start.
pub fn worker_pool(threads: usize) -> Option<rayon::ThreadPool> {
    (threads > 1)
        .then(|| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .ok()
        })
        .flatten()
}

/// A pool of `threads` threads, for the tests of these modules.
#[cfg(test)]
pub(crate) fn test_pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a test pool starts")
}
