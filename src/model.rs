//! The model seam: what the rest of the core needs from a kind of model.
//!
//! The batch scheduler (`io::batch`), the file sharder (`io::shards`) and streaming
//! (`io::stream`) only ever need to turn text into ids with a per-thread cache, and to
//! know where text may be cut safely. That is this trait.
//! Byte-level BPE ([`crate::bpe::Encoder`]) implements it; a further model kind (a
//! SentencePiece-style code-point BPE with byte fallback) is a new module implementing
//! it, not a branch inside the BPE encoder. Callers are generic over the trait, so the
//! hot path is monomorphised: no dynamic dispatch, no extra indirection.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::io::chunking::TextCuts;
use crate::pretok::SpecialMatcher;

/// The largest token id any model may hold: ids are below 2**31, so that they fit
/// every id type downstream (numpy's int32, torch's int64 and sentencepiece's int32
/// alike). Checked once, when a model is built.
pub const MAX_ID: u32 = (1 << 31) - 1;

/// The error for `what` (a token, described) holding `id` (its decimal text: a
/// binding passes ids too large for any integer type as they were written), an id
/// past [`MAX_ID`] or below 0.
pub fn id_error(what: &str, id: &str) -> String {
    format!("{what} has id {id}, outside 0..{MAX_ID}: token ids must be at least 0 and below 2**31")
}

/// Why a text was not encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EncodeError {
    /// The text holds a special token the caller disallowed (tiktoken's
    /// `disallowed_special`): the leftmost one found.
    Disallowed { token: String },
    /// The pre-tokenizer failed on the text (the regex engine's message).
    Pretokenize(String),
    /// A pre-token longer than [`MAX_PIECE_BYTES`] (merge positions are 32-bit).
    PieceTooLong { len: usize },
    /// Memory for encoding could not be had: `bytes` more were asked for.
    OutOfMemory { bytes: usize },
}

/// The longest pre-token (bytes) the BPE merge loops take: positions in it are 32-bit.
/// A text may be longer; only a single pre-token (a run of one character, text with
/// no spaces) is bounded. Encoding one this long needs about 13 bytes of memory per
/// byte of it (plus the ids returned).
pub const MAX_PIECE_BYTES: usize = u32::MAX as usize - 1;

/// Fails for a pre-token of `len` bytes longer than [`MAX_PIECE_BYTES`].
pub fn check_piece_len(len: usize) -> Result<(), EncodeError> {
    if len > MAX_PIECE_BYTES {
        return Err(EncodeError::PieceTooLong { len });
    }
    Ok(())
}

/// Makes room for `more` items in `v`; failing is [`EncodeError::OutOfMemory`] (never
/// an abort) — for buffers whose size comes from the input.
pub fn try_reserve<T>(v: &mut Vec<T>, more: usize) -> Result<(), EncodeError> {
    v.try_reserve(more).map_err(|_| EncodeError::OutOfMemory {
        bytes: more.saturating_mul(std::mem::size_of::<T>()),
    })
}

impl EncodeError {
    /// The message, quoting text with `repr` (the bindings pass Python's `repr()`).
    pub fn message(&self, repr: &dyn Fn(&str) -> String) -> String {
        match self {
            EncodeError::Disallowed { token } => {
                let token = repr(token);
                format!(
                    "the text contains the special token {token}, which is not allowed here. \
                     To encode it as a special token pass allowed_special={{{token}}} \
                     (or allowed_special=\"all\"); to encode it as ordinary text pass \
                     disallowed_special=()."
                )
            }
            EncodeError::Pretokenize(message) => message.clone(),
            EncodeError::PieceTooLong { len } => format!(
                "a single pre-token of {len} bytes (a run of one character, or text with no \
                 spaces) is longer than the {MAX_PIECE_BYTES} bytes one pre-token may have; \
                 split the text (e.g. at line breaks) before encoding it"
            ),
            EncodeError::OutOfMemory { bytes } => format!(
                "out of memory while encoding: {bytes} more bytes were needed; encode the \
                 text in smaller parts (a long pre-token needs about 13 bytes per byte)"
            ),
        }
    }
}

impl std::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message(&|s| format!("{s:?}")))
    }
}

impl From<String> for EncodeError {
    fn from(message: String) -> Self {
        EncodeError::Pretokenize(message)
    }
}

/// Fails with the leftmost of the `disallowed` special tokens found in `text`, if any.
pub fn check_disallowed(text: &str, disallowed: &SpecialMatcher) -> Result<(), EncodeError> {
    match disallowed.find_first(text.as_bytes()) {
        Some((_, _, index)) => Err(EncodeError::Disallowed {
            token: disallowed.tokens()[index].clone(),
        }),
        None => Ok(()),
    }
}

/// Ids put around every text a model encodes: BOS before, EOS after (sentencepiece's
/// `add_bos`/`add_eos`, a `tokenizer.json`'s `TemplateProcessing`). Around a *text*,
/// never around a part of one: whoever cuts a text (a long text's blocks, a batch's
/// parts, a file's blocks) puts `before` ahead of its first part and `after` behind
/// its last, so the ids do not depend on where, or whether, the text was cut.
/// [`Model::encode_cached`] never adds them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frame {
    pub before: Vec<u32>,
    pub after: Vec<u32>,
}

impl Frame {
    /// How many ids the frame adds to a text.
    pub fn len(&self) -> usize {
        self.before.len() + self.after.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends `before`, then what `body` appends, then `after` (not after a failure).
    pub fn around<E>(
        &self,
        out: &mut Vec<u32>,
        body: impl FnOnce(&mut Vec<u32>) -> Result<(), E>,
    ) -> Result<(), E> {
        out.extend_from_slice(&self.before);
        body(out)?;
        out.extend_from_slice(&self.after);
        Ok(())
    }
}

/// Where a model's text may be cut so that encoding the parts gives the ids of
/// encoding it whole (`io::chunking`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SafeCuts {
    /// At the edges of special tokens, and at `text` cuts (byte-level BPE: the
    /// pre-tokenizer never joins text across them; SentencePiece models that cut
    /// words: no merge joins a word to the space after it).
    AtSpecials { text: TextCuts },
    /// Nowhere: every text is encoded whole (other SentencePiece models: the
    /// whitespace rules of the normalizer depend on where the text starts and ends,
    /// or pieces join a word to the space after it).
    Nowhere,
}

/// A model that encodes text to ids.
pub trait Model: Send + Sync {
    /// Per-thread state kept across the texts one thread encodes (BPE: the piece
    /// cache). Which cache a call gets never changes its result.
    type Cache: Send;

    /// A cache for a run of calls, warm from earlier ones when the model keeps some.
    fn take_cache(&self) -> Self::Cache;

    /// Returns a cache taken with [`Model::take_cache`], for later calls.
    fn give_back_cache(&self, cache: Self::Cache);

    /// The caches of one call's `workers` threads, one each (by default, each from
    /// [`Model::take_cache`]; BPE's workers may read one warm cache together and
    /// keep only what it lacks in their own).
    fn take_caches(&self, workers: usize) -> Vec<Self::Cache> {
        (0..workers).map(|_| self.take_cache()).collect()
    }

    /// Returns the caches of one call's worker threads together ([`Model::take_caches`]):
    /// a model whose caches can learn from each other (BPE's piece cache) first gives
    /// each what the others learned since they last shared (in this call, and in calls
    /// on one thread since), or the one they read what each merged.
    fn give_back_caches(&self, caches: Vec<Self::Cache>) {
        for cache in caches {
            self.give_back_cache(cache);
        }
    }

    /// What a cache learned, as a worker of a pipeline hands it to the other workers
    /// between parts ([`WorkerCaches`]); `()` for a model whose caches do not share.
    type Lessons: Send + Sync;

    /// What `cache` learned since it was last asked, if anything.
    fn lessons(&self, _cache: &mut Self::Cache) -> Option<Self::Lessons> {
        None
    }

    /// Takes what another cache learned into `cache` (as far as it has room).
    fn take_in(&self, _cache: &mut Self::Cache, _lessons: &Self::Lessons) {}

    /// Where text may be cut without changing its ids.
    fn safe_cuts(&self) -> SafeCuts;

    /// Appends the ids of `text` to `out`, treating the tokens of `specials` as special.
    fn encode_cached(
        &self,
        text: &str,
        specials: &SpecialMatcher,
        cache: &mut Self::Cache,
        out: &mut Vec<u32>,
    ) -> Result<(), EncodeError>;

    /// Appends the ids of `text`, a part of a longer text cut at safe cuts
    /// ([`Model::safe_cuts`]); `starts_text`: the part begins that text. Encoding
    /// the parts in turn gives the ids of the whole. A model whose ids depend on where
    /// a text starts (SentencePiece's dummy prefix) encodes a later part as the rest
    /// of its text; by default a part encodes as any text.
    fn encode_part_cached(
        &self,
        text: &str,
        starts_text: bool,
        specials: &SpecialMatcher,
        cache: &mut Self::Cache,
        out: &mut Vec<u32>,
    ) -> Result<(), EncodeError> {
        let _ = starts_text;
        self.encode_cached(text, specials, cache, out)
    }

    /// At least as many ids as `text` can encode to, without encoding it (sizes the
    /// flat output of a batch). Byte-level BPE: one per byte at most.
    fn most_ids(&self, text: &str) -> usize {
        text.len()
    }

    /// How many ids `text` encodes to, as a part of a longer text that it begins when
    /// `starts_text` ([`Model::encode_part_cached`]; by default: encodes it and counts).
    fn count_cached(
        &self,
        text: &str,
        starts_text: bool,
        specials: &SpecialMatcher,
        cache: &mut Self::Cache,
    ) -> Result<usize, EncodeError> {
        let mut out = Vec::new();
        self.encode_part_cached(text, starts_text, specials, cache, &mut out)?;
        Ok(out.len())
    }

    /// Appends the ids of the units (pieces and special tokens) of `text` that end at
    /// or before `limit`, and returns where the last of them ends (0 if none): the
    /// part of a growing text that is final, for streaming. `starts_text`: nothing of
    /// the stream's text came before `text` ([`Model::encode_part_cached`]).
    fn encode_until(
        &self,
        text: &str,
        starts_text: bool,
        specials: &SpecialMatcher,
        limit: usize,
        cache: &mut Self::Cache,
        out: &mut Vec<u32>,
    ) -> Result<usize, EncodeError>;

    /// Runs `f` with a cache from [`Model::take_cache`], then gives it back.
    fn with_cache<R>(&self, f: impl FnOnce(&mut Self::Cache) -> R) -> R {
        let mut cache = self.take_cache();
        let result = f(&mut cache);
        self.give_back_cache(cache);
        result
    }
}

/// One cache per worker thread of a pool, for a pipeline that encodes many parts:
/// each part locks its worker's cache, so the cache stays warm across parts and
/// blocks. After each part the worker posts what its cache learned on a board and
/// takes in what the other workers posted since its last part: otherwise each worker
/// merges every piece its own parts meet first (on 200 MB of English, two workers
/// merged for 0.62 CPU-seconds where one took 0.35). The caches go back together
/// ([`Model::give_back_caches`]) when this is dropped, also when the pipeline ends
/// early on an error. Which cache knows what never changes a result.
pub struct WorkerCaches<'m, M: Model> {
    model: &'m M,
    caches: Vec<Mutex<M::Cache>>,
    board: Mutex<Board<M::Lessons>>,
}

/// Lessons posted by workers and not yet read by all: `posts[i]` is post number
/// `first + i`, with the worker who posted it.
struct Board<L> {
    first: usize,
    posts: VecDeque<(usize, Arc<L>)>,
    /// The number of the first post each worker has yet to read.
    read: Vec<usize>,
}

impl<L> Board<L> {
    /// Posts `mine` (worker `worker`'s, if any) and returns the posts of the others
    /// that worker has not read; drops the posts every worker has read.
    fn trade(&mut self, worker: usize, mine: Option<L>) -> Vec<Arc<L>> {
        let unread = (self.posts.iter().skip(self.read[worker] - self.first))
            .filter(|(poster, _)| *poster != worker)
            .map(|(_, lessons)| Arc::clone(lessons))
            .collect();
        if let Some(mine) = mine {
            self.posts.push_back((worker, Arc::new(mine)));
        }
        self.read[worker] = self.first + self.posts.len();
        let oldest = self.read.iter().copied().min().unwrap_or(self.first);
        while self.first < oldest {
            self.posts.pop_front();
            self.first += 1;
        }
        unread
    }
}

impl<'m, M: Model> WorkerCaches<'m, M> {
    pub fn new(model: &'m M, pool: &rayon::ThreadPool) -> Self {
        let threads = pool.current_num_threads().max(1);
        let caches = (0..threads)
            .map(|_| Mutex::new(model.take_cache()))
            .collect();
        let board = Board {
            first: 0,
            posts: VecDeque::new(),
            read: vec![0; threads],
        };
        WorkerCaches {
            model,
            caches,
            board: Mutex::new(board),
        }
    }

    /// Runs `f` with the cache of the worker thread it runs on, then trades lessons.
    pub fn with<R>(&self, f: impl FnOnce(&mut M::Cache) -> R) -> R {
        let worker = rayon::current_thread_index().unwrap_or(0) % self.caches.len();
        let mut cache = self.caches[worker].lock().expect("no panics while held");
        let result = f(&mut cache);
        if self.caches.len() > 1 {
            self.trade(worker, &mut cache);
        }
        result
    }

    /// Posts what `cache` (worker `worker`'s) learned and takes in the others' posts.
    fn trade(&self, worker: usize, cache: &mut M::Cache) {
        let mine = self.model.lessons(cache);
        let unread = self
            .board
            .lock()
            .expect("no panics while held")
            .trade(worker, mine);
        for lessons in &unread {
            self.model.take_in(cache, lessons);
        }
    }
}

impl<M: Model> Drop for WorkerCaches<'_, M> {
    /// Each cache first takes in the posts it has not read. A cache whose worker
    /// panicked while holding it is dropped, not given back.
    fn drop(&mut self) {
        let mut board = self.board.get_mut().ok();
        let mut kept = Vec::with_capacity(self.caches.len());
        for (worker, cache) in std::mem::take(&mut self.caches).into_iter().enumerate() {
            let Ok(mut cache) = cache.into_inner() else {
                continue;
            };
            if let Some(board) = board.as_mut() {
                for lessons in board.trade(worker, None) {
                    self.model.take_in(&mut cache, &lessons);
                }
            }
            kept.push(cache);
        }
        self.model.give_back_caches(kept);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_reads_the_others_posts_once_and_read_posts_are_dropped() {
        let mut board: Board<&'static str> = Board {
            first: 0,
            posts: VecDeque::new(),
            read: vec![0; 3],
        };
        let read = |got: Vec<Arc<&'static str>>| got.iter().map(|l| **l).collect::<Vec<_>>();
        assert!(read(board.trade(0, Some("a1"))).is_empty());
        assert!(read(board.trade(0, Some("a2"))).is_empty(), "not its own");
        assert_eq!(read(board.trade(1, Some("b1"))), ["a1", "a2"]);
        assert_eq!(read(board.trade(1, None)), Vec::<&str>::new(), "read once");
        assert_eq!(board.posts.len(), 3, "worker 2 has read none");
        assert_eq!(read(board.trade(2, None)), ["a1", "a2", "b1"]);
        assert_eq!(board.posts.len(), 1, "only b1 is unread (by worker 0)");
        assert_eq!(read(board.trade(0, Some("a3"))), ["b1"]);
        assert_eq!((board.first, board.posts.len()), (3, 1), "a3 is left");
        assert_eq!(read(board.trade(1, None)), ["a3"]);
        assert_eq!(read(board.trade(2, None)), ["a3"]);
        assert!(board.posts.is_empty());
    }
}
