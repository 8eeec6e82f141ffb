//! The BPE encoder: text → token ids, with the model, its pre-tokenizer and its piece
//! caches together.
//!
//! Special tokens the caller allows are matched first (leftmost-longest); the text
//! between them is pre-tokenized, and each piece is merged by rank (`merge.rs`).
//! Pieces seen before come from the piece cache (`cache.rs`). This is the hot path of
//! encoding: no allocation per piece, one hash lookup per cached piece.

use std::mem::MaybeUninit;

use rustc_hash::FxHashMap;

use super::cache::{lanes_as_ids, Batch, CachePool, Entry, Ids, Lessons, PieceCache};
use super::merge::SHORT_PIECE;
use super::model::BpeModel;
use super::normalizer::Normalizer;
use crate::bytes_map::bytes_hash;
use crate::io::chunking::{last_cut, TextCuts};
use crate::model::{try_reserve, EncodeError, Model, SafeCuts};
use crate::packed::{key_hash, pack_pieces, packed, MAX_PACKED, PREFETCH_AHEAD as AHEAD};
use crate::pretok::split::Split;
use crate::pretok::{for_each_unit, Builtin, PreTokenizer, SpecialMatcher, Unit, WINDOW_STARTS};

/// Pieces the batched loop ([`Lookups::walk`]) finds before looking any up: their
/// lines prefetched (12 KB of the L1's 32) and their keys (6 KB) in L1 still when
/// they are probed. 192 rather than 64: each batch's loops end once, and that exit
/// mispredicts (callgrind, gpt2, English, per warm 2 MB pass: 111 K mispredicts ->
/// 92 K; in turn with the build of 64, 6 of 8 warm passes faster, 11% on average).
const WALK_BATCH: usize = 192;
/// Longest piece worth caching. Scripts written without spaces (Chinese, Japanese,
/// Thai) make pieces of dozens to hundreds of bytes that do repeat: under o200k's
/// pattern a Thai clause is one piece, and the 4% of a multilingual corpus's bytes in
/// pieces of 129 to 500 bytes took a third of a warm pass when they were merged anew
/// each time (at 128).
const CACHE_PIECE_BYTES: usize = 1024;

/// The piece cache's hash of a piece of 16 bytes or more: its [`bytes_hash`], or 0 for
/// one too long to cache (never looked up, so never hashed).
#[inline]
fn long_hash(piece: &[u8]) -> u64 {
    if piece.len() <= CACHE_PIECE_BYTES {
        bytes_hash(piece)
    } else {
        0
    }
}

#[derive(Debug, Clone)]
pub struct Encoder {
    model: BpeModel,
    pre: PreTokenizer,
    /// Piece caches of earlier calls, warm, for later ones to take.
    caches: CachePool,
    /// Empty caches of batch workers that merged nothing, for the next batch's
    /// workers ([`PieceCache::for_workers`]): a new one each was 4-6 µs of a batch of
    /// 16 sentences on two threads.
    spare: CachePool,
    /// Matcher over all special tokens (for the common "all allowed" case).
    all_specials: SpecialMatcher,
    no_specials: SpecialMatcher,
    /// Applied to the text between special (and added) tokens before pre-tokenizing
    /// (a Hugging Face file's NFC, ...); empty for most models.
    normalizer: Normalizer,
}

/// Appends `ids`; most pieces are one token, which needs no call to memcpy. Growing
/// `out` (its size comes from the text) may fail: an error, not an abort.
#[inline]
fn push_ids(out: &mut Vec<u32>, ids: &[u32]) -> Result<(), EncodeError> {
    if out.capacity() - out.len() < ids.len() {
        try_reserve(out, ids.len().max(out.len()))?;
    }
    match *ids {
        [id] => out.push(id),
        [a, b] => {
            out.push(a);
            out.push(b);
        }
        _ => out.extend_from_slice(ids),
    }
    Ok(())
}

impl Encoder {
    /// `vocab`: id → bytes (must contain every single byte); `merges`: (left id,
    /// right id, merged id) in rank order; `specials`: token → id.
    pub fn new(
        vocab: FxHashMap<u32, Vec<u8>>,
        merges: &[(u32, u32, u32)],
        specials: FxHashMap<String, u32>,
        pattern: Option<&str>,
    ) -> Result<Self, String> {
        Self::from_model(BpeModel::new(vocab, merges, specials)?, pattern)
    }

    /// The encoder of a ready model (`BpeModel::from_ranks`: tiktoken's rule).
    pub fn from_model(model: BpeModel, pattern: Option<&str>) -> Result<Self, String> {
        let mut tokens: Vec<String> = model.special_ids().keys().cloned().collect();
        tokens.sort();
        Ok(Self {
            all_specials: SpecialMatcher::new(&tokens)?,
            no_specials: SpecialMatcher::new(&[])?,
            model,
            pre: PreTokenizer::new(pattern)?,
            caches: CachePool::default(),
            spare: CachePool::default(),
            normalizer: Normalizer::default(),
        })
    }

    /// The same encoder, splitting each piece of the pattern further by `steps`, in
    /// order (a Hugging Face `Sequence` of Splits: DeepSeek V3).
    pub fn with_steps(mut self, steps: Vec<Split>) -> Self {
        self.pre = self.pre.with_steps(steps);
        self.caches = CachePool::default();
        self
    }

    pub fn pre_tokenizer(&self) -> &PreTokenizer {
        &self.pre
    }

    /// The same encoder, normalizing the text between special tokens first.
    pub fn with_normalizer(mut self, normalizer: Normalizer) -> Self {
        self.normalizer = normalizer;
        self
    }

    pub fn normalizer(&self) -> &Normalizer {
        &self.normalizer
    }

    /// The vocabulary, merges and special ids.
    pub fn model(&self) -> &BpeModel {
        &self.model
    }

    pub fn all_specials(&self) -> &SpecialMatcher {
        &self.all_specials
    }

    pub fn no_specials(&self) -> &SpecialMatcher {
        &self.no_specials
    }

    /// Encodes `text`, treating the tokens of `allowed` as special.
    pub fn encode(&self, text: &str, allowed: &SpecialMatcher) -> Result<Vec<u32>, EncodeError> {
        let mut out = Vec::new();
        try_reserve(&mut out, text.len() / 3)?;
        self.with_cache(|cache| self.encode_cached(text, allowed, cache, &mut out))?;
        Ok(out)
    }

    /// The number of tokens `text` encodes to, without keeping them.
    pub fn count(&self, text: &str, allowed: &SpecialMatcher) -> Result<usize, EncodeError> {
        self.with_cache(|cache| self.count_cached(text, true, allowed, cache))
    }

    /// Calls `emit(end, ids)` with the ids of each unit of `text` (a piece or a special
    /// token) and where the unit ends, in order, for the units that end at or before
    /// `limit` (the others are not merged: streaming drops them, to see them again
    /// with more text after them). The first error, of merging or of `emit`, stops it.
    ///
    /// Units are looked up a few at a time ([`Lookups`]): each cacheable piece's table
    /// line is prefetched when the piece is found, and looked up `AHEAD` units later,
    /// so a lookup that misses the CPU cache overlaps with pre-tokenizing the pieces
    /// in between instead of stalling the loop.
    #[inline]
    fn for_each_ids(
        &self,
        text: &str,
        allowed: &SpecialMatcher,
        cache: &mut PieceCache,
        limit: usize,
        mut emit: impl FnMut(usize, &[u32]) -> Result<(), EncodeError>,
    ) -> Result<(), EncodeError> {
        if self.normalizer.is_empty() {
            return self.for_each_raw_ids(text, allowed, cache, limit, emit);
        }
        // As `tokenizers` does: tokens matched in the text as it is, the text between
        // them normalized, each segment on its own (Prepend and Strip act at its
        // edges), then pre-tokenized. A piece's end is that of its segment
        // (`encode_until` of a normalized model cuts at safe cuts instead).
        let mut from = 0;
        for (start, end, index) in allowed.find_all(text.as_bytes()) {
            if from < start {
                let segment = self.normalizer.normalize(&text[from..start])?;
                let to = |_, ids: &[u32]| emit(start, ids);
                self.for_each_raw_ids(&segment, &self.no_specials, cache, usize::MAX, to)?;
            }
            emit(end, &[self.model.special_ids()[&allowed.tokens()[index]]])?;
            from = end;
        }
        if from < text.len() {
            let segment = self.normalizer.normalize(&text[from..])?;
            let to = |_, ids: &[u32]| emit(text.len(), ids);
            self.for_each_raw_ids(&segment, &self.no_specials, cache, usize::MAX, to)?;
        }
        Ok(())
    }

    /// [`Encoder::for_each_ids`] of text that needs no normalizing.
    #[inline]
    fn for_each_raw_ids(
        &self,
        text: &str,
        allowed: &SpecialMatcher,
        cache: &mut PieceCache,
        limit: usize,
        mut emit: impl FnMut(usize, &[u32]) -> Result<(), EncodeError>,
    ) -> Result<(), EncodeError> {
        let bytes = text.as_bytes();
        let mut lookups = Lookups::new(bytes, &self.model, cache);
        if let Some(builtin) = self.pre.builtin_alone() {
            return lookups
                .with_batch(|l, batch| l.walk(builtin, text, allowed, limit, &mut emit, batch));
        }
        let mut failed = None;
        for_each_unit(text, allowed, &self.pre, |u| {
            let end = match u {
                Unit::Piece { end, .. } | Unit::Special { end, .. } => end,
            };
            if end > limit || failed.is_some() {
                return;
            }
            let queued = match u {
                Unit::Piece { start, end } if end - start == 1 => Queued::Id {
                    end,
                    id: self.model.byte_id(bytes[start]),
                },
                Unit::Piece { start, end } if end - start <= MAX_PACKED => {
                    let key = packed(bytes, start, end);
                    let hash = key_hash(key);
                    lookups.cache.small.prefetch(hash);
                    Queued::Packed { end, key, hash }
                }
                Unit::Piece { start, end } => {
                    let hash = long_hash(&bytes[start..end]);
                    lookups.cache.long.prefetch(hash);
                    Queued::Piece { start, end, hash }
                }
                Unit::Special { index, end, .. } => Queued::Id {
                    end,
                    id: self.model.special_ids()[&allowed.tokens()[index]],
                },
            };
            lookups.queue.push(queued);
            if lookups.queue.len() == AHEAD {
                if let Err(e) = lookups.drain(&mut emit) {
                    failed = Some(e);
                }
            }
        })?;
        match failed {
            Some(e) => Err(e),
            None => lookups.drain(&mut emit),
        }
    }
}

/// A unit waiting for its ids.
#[derive(Debug, Clone, Copy)]
enum Queued {
    /// Ids known already: a single byte, a special token.
    Id { end: usize, id: u32 },
    /// A piece of 2 to 15 bytes: looked up by its packed key.
    Packed { end: usize, key: u128, hash: u64 },
    /// A longer piece, and its [`bytes_hash`] if it is cached at all.
    Piece { start: usize, end: usize, hash: u64 },
}

/// Whether a piece given to [`Lookups::merge`] was already looked up as a whole token.
#[derive(Clone, Copy)]
enum Whole {
    LookedUp,
    NotLookedUp,
}

/// Where the `i`-th piece of a batch starts (the first at `first`).
#[inline(always)]
fn start_of(first: usize, ends: &[usize], i: usize) -> usize {
    if i == 0 {
        first
    } else {
        ends[i - 1]
    }
}

/// Stored ids [`write_hits`] copies as one fixed-size copy (64 bytes): as many as a
/// piece of up to 15 bytes can have. It was 8: GPT-2's pieces of a newline and an
/// indent in Python code (`"\n           "`, one id a byte) left the loop for each
/// piece of 9 to 15 ids, which are 2% of the pieces and 12% of the ids there.
const STORED_COPY: usize = 16;

/// The slots a piece of `n` ids needs with two a piece left for the `rest` after it
/// up to the batch's `fit` (the rule [`write_hits`]' single stores rely on).
#[inline(always)]
fn slots_needed(n: usize, rest: usize) -> usize {
    n + 2 * rest
}

/// Why [`write_hits`] stopped before the end of its pieces.
enum Stop {
    /// At the end of the batch.
    End,
    /// `spare` had room for two ids a piece for the pieces before only.
    Room,
    /// A piece of 16 bytes or more not in the cache, or too long to cache.
    Miss,
    /// A piece of 2 to 15 bytes not in the cache (looked up along its whole run).
    Absent,
    /// A hit of more ids than `spare` has room for.
    More(Entry),
}

/// Writes the ids of a batch's pieces into `spare`, from the first piece (starting at
/// `start`) on, while each is a hit (short or long) and they fit; returns how many
/// pieces and how many ids, and why it stopped. An entry holding one or two ids has
/// both its lanes written in one store and the count moved on by its number of ids:
/// no branch on that number. Not inlined: the cache comes in as an argument the
/// writes cannot alias, so its tables' bases and masks stay in registers for the
/// whole run. The inner loop, short pieces whose entries hold their ids, calls
/// nothing, so that what it needs stays in registers too (with a call to copy
/// stored ids or to look up a long piece in it, five of them were reloaded from the
/// stack for each piece); stored ids are copied outside it, and long pieces are
/// [`long_hit`]'s.
///
/// `cache` is the table hits are read from; `second`, the table a batch worker reads
/// next when it has two ([`Lookups::tables`], [`far_hit`]).
#[inline(never)]
fn write_hits(
    cache: &PieceCache,
    second: Option<&PieceCache>,
    bytes: &[u8],
    ends: &[usize],
    keys: &[(u128, u64)],
    start: usize,
    spare: &mut [MaybeUninit<u32>],
) -> (usize, usize, Stop) {
    // Two slots a piece for as many pieces as that leaves room for.
    let fit = ends.len().min(spare.len() / 2);
    let small = cache.small.lines();
    // Stored ids are read [`STORED_COPY`] at a time where the buffer has them,
    // whatever their number (ids past it are copied too, into slots later ids
    // overwrite or past the end): a copy of a fixed size needs no call.
    let stored_at = cache.stored.as_ptr().cast::<MaybeUninit<u32>>();
    // The last place such a copy may start (negative: none may).
    let stored_room = cache.stored.capacity() as isize - STORED_COPY as isize;
    let spare_end = spare.as_mut_ptr().wrapping_add(spare.len());
    let mut written = 0;
    let mut i = 0;
    while i < fit {
        // Short pieces whose entries hold their ids, by the keys alone (a key's top
        // byte is its piece's length, 0 for a long piece): what this loop needs fits
        // in the registers a call leaves alone, and the piece ends are not read.
        let spare_at = spare.as_mut_ptr();
        let mut out = spare_at.wrapping_add(written);
        let mut key_at = keys[i..fit].as_ptr();
        let keys_end = key_at.wrapping_add(fit - i);
        let (mut stop, mut stored) = (None, None);
        while key_at != keys_end {
            // SAFETY: `key_at` is one of `keys[i..fit]`.
            let (key, hash) = unsafe { *key_at };
            if key >> 120 == 0 {
                break;
            }
            let entry = match small.get_near(key, hash) {
                Some(entry) => entry,
                // Kept further along its run: found here, not after leaving the
                // loop.
                None => match far_hit(cache, second, key, hash) {
                    Some(entry) => entry,
                    None => {
                        stop = Some(Stop::Absent);
                        break;
                    }
                },
            };
            let Some((lanes, count)) = entry.inline_lanes() else {
                // Three stored ids or more (most multilingual pieces under GPT-2's
                // vocabulary, and its indents in code), copied here if the slots
                // after them leave two a piece for the rest: leaving the loop for
                // each cost a tenth of a multilingual pass. (A short piece has at
                // most `STORED_COPY` ids: `n > STORED_COPY` below is only a guard.)
                let (at, n) = entry.stored_place();
                // SAFETY: both within `keys[i..fit]` and `spare`.
                let (rest, room) = unsafe {
                    (
                        keys_end.offset_from(key_at) as usize - 1,
                        spare_end.offset_from(out) as usize,
                    )
                };
                if n > STORED_COPY
                    || at as isize > stored_room
                    || room < STORED_COPY.max(slots_needed(n, rest))
                {
                    stored = Some(entry);
                    break;
                }
                // SAFETY: `stored_at[at..at + STORED_COPY]` is inside the stored ids'
                // buffer (`at` is at most its capacity less that), copied as it is
                // (slots past `n` may not be initialised: they are past this piece's
                // ids, as the second lane of one id is); `room` holds them.
                unsafe {
                    std::ptr::copy_nonoverlapping(stored_at.add(at), out, STORED_COPY);
                    out = out.add(n);
                    key_at = key_at.add(1);
                }
                continue;
            };
            // SAFETY: two slots are left for this piece and each after it up to
            // `fit` (at most two ids a piece before, and checked for more below
            // and in `long_hit`).
            unsafe {
                out.cast::<[u32; 2]>().write_unaligned(lanes_as_ids(lanes));
                out = out.add(count);
                key_at = key_at.add(1);
            }
        }
        // SAFETY: both moved on within `spare` and `keys`.
        let (now, done) = unsafe {
            (
                out.offset_from(spare_at) as usize,
                key_at.offset_from(keys.as_ptr()) as usize,
            )
        };
        (written, i) = (now, done);
        if let Some(stop) = stop {
            return (i, written, stop);
        }
        if i == fit {
            break;
        }
        let now = match stored {
            // Three ids or more (most multilingual pieces under GPT-2's vocabulary),
            // copied here, with no second lookup, if that leaves two slots a piece
            // for the rest up to `fit`.
            Some(entry) => copy_stored(cache, entry, spare, written, fit - i - 1),
            None => {
                let start = start_of(start, ends, i);
                long_hit(
                    cache,
                    bytes,
                    start,
                    ends[i],
                    keys[i].1,
                    spare,
                    written,
                    fit - i - 1,
                )
            }
        };
        match now {
            Ok(now) => written = now,
            Err(stop) => return (i, written, stop),
        }
        i += 1;
    }
    let stop = if fit == ends.len() {
        Stop::End
    } else {
        Stop::Room
    };
    (fit, written, stop)
}

/// [`write_hits`] of a piece of 2 to 15 bytes not in its home line: a probe of the
/// rest of its run, out of the loop, which keeps the common case short. A hit found
/// here has its ids written with the hits around it: the loop used to stop at each
/// such piece, for a second lookup that found it (gpt2 on multilingual text: 2% of
/// a warm pass's pieces, 5% of its time), and a miss is merged with no second lookup.
///
/// A worker of a batch with a shared cache ([`PieceCache::for_workers`]) looks in its
/// `second` table next ([`Lookups::tables`]): a piece found there is a hit when its
/// ids are in the entry (those it stores are copied by the caller, from that table).
/// A cold batch, whose pieces all came from the workers' own caches, ran 1.6 times
/// as long when each stopped the loop.
#[inline(never)]
fn far_hit(cache: &PieceCache, second: Option<&PieceCache>, key: u128, hash: u64) -> Option<Entry> {
    cache.small.get(key, hash).or_else(|| {
        let entry = second?.small.get(key, hash)?;
        entry.inline_lanes().map(|_| entry)
    })
}

/// The entry of a long piece (16 bytes or more, whose [`long_hash`] is `hash`) in
/// `cache`, if it is one it may keep.
#[inline]
fn long_entry(cache: &PieceCache, piece: &[u8], hash: u64) -> Option<Entry> {
    if piece.len() <= CACHE_PIECE_BYTES {
        cache.long.get(piece, hash)
    } else {
        None
    }
}

/// [`write_hits`] of a long piece (16 bytes or more): its ids written if it is a hit
/// and they leave two slots a piece for the `rest` after it. Returns how many ids
/// `spare` holds then, or why it stops here.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn long_hit(
    cache: &PieceCache,
    bytes: &[u8],
    start: usize,
    end: usize,
    hash: u64,
    spare: &mut [MaybeUninit<u32>],
    written: usize,
    rest: usize,
) -> Result<usize, Stop> {
    let entry = long_entry(cache, &bytes[start..end], hash).ok_or(Stop::Miss)?;
    if let Some((lanes, count)) = entry.inline_lanes() {
        // A long piece's one or two ids: two slots are left for it.
        let [first, second] = lanes_as_ids(lanes);
        spare[written].write(first);
        spare[written + 1].write(second);
        return Ok(written + count);
    }
    copy_stored(cache, entry, spare, written, rest)
}

/// Copies the stored ids of `entry` into `spare` after its `written`, if that leaves
/// two slots a piece for the `rest` after it; returns how many ids `spare` holds
/// then, or else [`Stop::More`].
#[inline(always)]
fn copy_stored(
    cache: &PieceCache,
    entry: Entry,
    spare: &mut [MaybeUninit<u32>],
    written: usize,
    rest: usize,
) -> Result<usize, Stop> {
    let ids = entry.stored_ids(&cache.stored);
    if written + slots_needed(ids.len(), rest) > spare.len() {
        return Err(Stop::More(entry));
    }
    for (slot, &id) in spare[written..written + ids.len()].iter_mut().zip(ids) {
        slot.write(id);
    }
    Ok(written + ids.len())
}

/// Pieces in a batch worker's second table past which [`Lookups::pack_batch`]
/// prefetches its lines too (fewer fit in the core's own caches: 4,096 slots are
/// 128 KB).
const SECOND_PREFETCHED: usize = 1 << 11;

/// The lookup half of [`Encoder::for_each_ids`]: the cache, and the units queued.
struct Lookups<'t, 'c> {
    bytes: &'t [u8],
    model: &'t BpeModel,
    cache: &'c mut PieceCache,
    /// The cache a batch's workers share ([`PieceCache::for_workers`]), read with
    /// `cache` by [`Lookups::walk_into`] (the only walk a worker with one takes), the
    /// larger of the two first ([`Lookups::tables`]).
    shared: Option<&'c PieceCache>,
    scratch: Vec<u32>,
    queue: Vec<Queued>,
}

impl<'t, 'c> Lookups<'t, 'c> {
    fn new(bytes: &'t [u8], model: &'t BpeModel, cache: &'c mut PieceCache) -> Self {
        Self {
            bytes,
            model,
            cache,
            shared: None,
            scratch: Vec::with_capacity(SHORT_PIECE),
            queue: Vec::with_capacity(AHEAD),
        }
    }

    /// Runs `f` with the batch buffers of the cache, taken out and given back after
    /// (on success or error).
    fn with_batch<R>(&mut self, f: impl FnOnce(&mut Self, &mut Batch) -> R) -> R {
        let mut batch = self.cache.batch.take(WALK_BATCH + WINDOW_STARTS);
        let done = f(self, &mut batch);
        self.cache.batch = batch;
        done
    }

    /// The keys of a batch's pieces (`ends`, the first from `first`), each one's
    /// line of the cache prefetched. Not inlined: a loop of its own has the registers
    /// to itself (inside the walk, the keys' address and two constants were reloaded
    /// each piece).
    #[inline(never)]
    fn pack_batch(&self, first: usize, ends: &[usize], keys: &mut [(u128, u64)]) {
        let (table, second) = self.tables();
        let (small, long) = (table.small.lines(), &table.long);
        let long_piece = |piece: &[u8]| {
            let hash = long_hash(piece);
            long.prefetch(hash);
            hash
        };
        if let Some(second) = second.filter(|t| t.small.len() >= SECOND_PREFETCHED) {
            // Both tables hold many of the batch's pieces.
            let second = second.small.lines();
            let both = move |h| {
                small.prefetch(h);
                second.prefetch(h);
            };
            return pack_pieces(self.bytes, first, ends, keys, both, long_piece);
        }
        let one = move |h| small.prefetch(h);
        pack_pieces(self.bytes, first, ends, keys, one, long_piece);
    }

    /// The table hits are read from first, and for a batch worker with a shared cache
    /// ([`PieceCache::for_workers`]) the one read next: the larger first (the shared
    /// one when warm; its own in a cold batch, where it merges every piece).
    #[inline(always)]
    fn tables(&self) -> (&PieceCache, Option<&PieceCache>) {
        match self.shared {
            None => (self.cache, None),
            Some(shared) if shared.small.len() >= self.cache.small.len() => {
                (shared, Some(self.cache))
            }
            Some(shared) => (self.cache, Some(shared)),
        }
    }

    /// The entry `find` finds in the second table ([`Lookups::tables`]), with that
    /// table's stored ids.
    #[inline]
    fn second_hit(
        &self,
        find: impl FnOnce(&PieceCache) -> Option<Entry>,
    ) -> Option<(Entry, &[u32])> {
        let second = self.tables().1?;
        Some((find(second)?, &second.stored))
    }

    /// [`Lookups::walk`] of a whole text into `out` (`encode`, the common call): the
    /// same batches, but hits are written straight into `out` by [`write_hits`], as
    /// many pieces at a time as `out` has room for two ids each. Misses, pieces too
    /// long to cache, and hits of more ids than that room leaves take the general
    /// path.
    fn walk_into(
        &mut self,
        builtin: Builtin,
        text: &str,
        allowed: &SpecialMatcher,
        out: &mut Vec<u32>,
        batch: &mut Batch,
    ) -> Result<(), EncodeError> {
        let mut pos = 0;
        if !allowed.is_empty() {
            for (start, end, index) in allowed.find_all(self.bytes) {
                self.walk_segment_into(builtin, &text[..start], pos, out, batch)?;
                push_ids(out, &[self.model.special_ids()[&allowed.tokens()[index]]])?;
                pos = end;
            }
        }
        self.walk_segment_into(builtin, text, pos, out, batch)
    }

    /// [`Lookups::walk_segment`] into `out`, to the end of `text` (see
    /// [`Lookups::walk_into`]), with the batch's buffers.
    fn walk_segment_into(
        &mut self,
        builtin: Builtin,
        text: &str,
        from: usize,
        out: &mut Vec<u32>,
        batch: &mut Batch,
    ) -> Result<(), EncodeError> {
        let mut walker = builtin.walker(text, from);
        let (ends, keys) = (&mut batch.ends[..], &mut batch.keys[..]);
        while let Some((first, n)) = walker.next_batch(ends) {
            self.pack_batch(first, &ends[..n], keys);
            let mut i = 0;
            while i < n {
                if out.capacity() - out.len() < 2 {
                    try_reserve(out, 2 * (n - i))?;
                }
                let (table, second) = self.tables();
                let (hits, written, stop) = write_hits(
                    table,
                    second,
                    self.bytes,
                    &ends[i..n],
                    &keys[i..n],
                    start_of(first, ends, i),
                    out.spare_capacity_mut(),
                );
                // SAFETY: `write_hits` wrote the next `written` ids.
                unsafe { out.set_len(out.len() + written) };
                i += hits;
                let (start, end, (key, hash)) = match stop {
                    Stop::End => break,
                    Stop::Room => {
                        // Two slots a piece for the rest (most pieces are one id, so
                        // a short text's ids may well fit in what `out` has).
                        try_reserve(out, 2 * (n - i))?;
                        continue;
                    }
                    _ => (start_of(first, ends, i), ends[i], keys[i]),
                };
                let mut emit = |_: usize, ids: &[u32]| push_ids(out, ids);
                match stop {
                    // An entry of the table `write_hits` read first.
                    Stop::More(entry) => emit_ids(&self.tables().0.stored, end, entry, &mut emit)?,
                    // Not there: maybe in the second table.
                    Stop::Absent => match self.second_hit(|t| t.small.get(key, hash)) {
                        Some((entry, stored)) => emit_ids(stored, end, entry, &mut emit)?,
                        None => self.packed_miss(start, end, key, hash, &mut emit)?,
                    },
                    _ => {
                        let piece = &self.bytes[start..end];
                        match self.second_hit(|t| long_entry(t, piece, hash)) {
                            Some((entry, stored)) => emit_ids(stored, end, entry, &mut emit)?,
                            None => self.long_ids(start, end, hash, &mut emit)?,
                        }
                    }
                }
                i += 1;
            }
        }
        Ok(())
    }

    /// Emits the ids of the queued units, in order.
    #[inline]
    fn drain(
        &mut self,
        emit: &mut impl FnMut(usize, &[u32]) -> Result<(), EncodeError>,
    ) -> Result<(), EncodeError> {
        let mut queue = std::mem::take(&mut self.queue);
        let done = self.drain_queue(&queue, emit);
        queue.clear();
        self.queue = queue;
        done
    }

    #[inline]
    fn drain_queue(
        &mut self,
        queue: &[Queued],
        emit: &mut impl FnMut(usize, &[u32]) -> Result<(), EncodeError>,
    ) -> Result<(), EncodeError> {
        for &unit in queue {
            match unit {
                Queued::Id { end, id } => emit(end, &[id])?,
                Queued::Packed { end, key, hash } => {
                    self.packed_ids(end - (key >> 120) as usize, end, key, hash, emit)?
                }
                Queued::Piece { start, end, hash } => self.long_ids(start, end, hash, emit)?,
            }
        }
        Ok(())
    }

    /// Emits the ids of the piece `start..end` of 2 to 15 bytes, packed as `key`.
    #[inline(always)]
    fn packed_ids(
        &mut self,
        start: usize,
        end: usize,
        key: u128,
        hash: u64,
        emit: &mut impl FnMut(usize, &[u32]) -> Result<(), EncodeError>,
    ) -> Result<(), EncodeError> {
        match self.cache.small.get_bringing_near(key, hash) {
            Some(entry) => self.emit_entry(end, entry, emit),
            None => self.packed_miss(start, end, key, hash, emit),
        }
    }

    /// Emits the ids of the piece `start..end` of 2 to 15 bytes, packed as `key`, not
    /// in the cache: merged, and kept if there is room.
    #[inline(always)]
    fn packed_miss(
        &mut self,
        start: usize,
        end: usize,
        key: u128,
        hash: u64,
        emit: &mut impl FnMut(usize, &[u32]) -> Result<(), EncodeError>,
    ) -> Result<(), EncodeError> {
        // A piece that is a token (tiktoken's rule) needs no merging.
        let entry = match self.model.whole_packed(key, hash) {
            Some(id) => Entry::one(id),
            None => self.merge(start, end, Whole::LookedUp)?,
        };
        if self.cache.has_room() {
            self.cache.keep_small(key, hash, entry);
            return self.emit_entry(end, entry, emit);
        }
        self.emit_entry(end, entry, emit)?;
        self.cache.unstore(entry);
        Ok(())
    }

    /// [`Lookups::packed_ids`] of a piece not in its home line of the cache (further
    /// along, or not there): out of the loop of [`Lookups::walk_segment`], which keeps
    /// the common case short.
    #[inline(never)]
    fn packed_ids_far(
        &mut self,
        start: usize,
        end: usize,
        key: u128,
        hash: u64,
        emit: &mut impl FnMut(usize, &[u32]) -> Result<(), EncodeError>,
    ) -> Result<(), EncodeError> {
        self.packed_ids(start, end, key, hash, emit)
    }

    /// Emits the ids of the piece `start..end` of 16 bytes or more; `hash` is its
    /// [`bytes_hash`] if it is [`CACHE_PIECE_BYTES`] or fewer.
    #[inline(never)]
    fn long_ids(
        &mut self,
        start: usize,
        end: usize,
        hash: u64,
        emit: &mut impl FnMut(usize, &[u32]) -> Result<(), EncodeError>,
    ) -> Result<(), EncodeError> {
        let piece = &self.bytes[start..end];
        if piece.len() > CACHE_PIECE_BYTES {
            self.scratch.clear();
            self.model.encode_piece(piece, &mut self.scratch)?;
            emit(end, &self.scratch)
        } else if let Some(entry) = self.cache.long.get(piece, hash) {
            self.emit_entry(end, entry, emit)
        } else {
            let entry = self.merge(start, end, Whole::NotLookedUp)?;
            if self.cache.has_room_long(piece.len()) {
                self.cache.keep_long(piece, hash, entry);
                return self.emit_entry(end, entry, emit);
            }
            self.emit_entry(end, entry, emit)?;
            self.cache.unstore(entry);
            Ok(())
        }
    }

    /// [`Encoder::for_each_raw_ids`] when a built-in splitter alone makes the pieces:
    /// the units between special tokens a batch of [`WALK_BATCH`] pieces at a time,
    /// in three passes with no call per piece — their ends ([`Builtin::walker`]),
    /// then their keys (each table line prefetched), then the lookups, which by then
    /// find their lines in the CPU cache.
    fn walk(
        &mut self,
        builtin: Builtin,
        text: &str,
        allowed: &SpecialMatcher,
        limit: usize,
        emit: &mut impl FnMut(usize, &[u32]) -> Result<(), EncodeError>,
        batch: &mut Batch,
    ) -> Result<(), EncodeError> {
        let mut pos = 0;
        if !allowed.is_empty() {
            for (start, end, index) in allowed.find_all(self.bytes) {
                if !self.walk_segment(builtin, &text[..start], pos, limit, emit, batch)?
                    || end > limit
                {
                    return Ok(());
                }
                emit(end, &[self.model.special_ids()[&allowed.tokens()[index]]])?;
                pos = end;
            }
        }
        self.walk_segment(builtin, text, pos, limit, emit, batch)?;
        Ok(())
    }

    /// The pieces of `text[from..]` (text free of special tokens from `from` on; a
    /// prefix of the whole text, so offsets are the same), with the batch's buffers;
    /// false if one ended past `limit` (it and the rest are not emitted).
    fn walk_segment(
        &mut self,
        builtin: Builtin,
        text: &str,
        from: usize,
        limit: usize,
        emit: &mut impl FnMut(usize, &[u32]) -> Result<(), EncodeError>,
        batch: &mut Batch,
    ) -> Result<bool, EncodeError> {
        let mut walker = builtin.walker(text, from);
        let (ends, keys) = (&mut batch.ends[..], &mut batch.keys[..]);
        while let Some((first, n)) = walker.next_batch(ends) {
            self.pack_batch(first, &ends[..n], keys);
            let mut start = first;
            for (&end, &(key, hash)) in ends[..n].iter().zip(keys.iter()) {
                if end > limit {
                    return Ok(false);
                }
                // Single bytes too go through the cache: a branch on the length
                // mispredicts more than the cache line (in L1) costs.
                match end - start {
                    1..=MAX_PACKED => match self.cache.small.get_near(key, hash) {
                        Some(entry) => self.emit_entry(end, entry, emit)?,
                        None => self.packed_ids_far(start, end, key, hash, emit)?,
                    },
                    _ => self.long_ids(start, end, hash, emit)?,
                }
                start = end;
            }
        }
        Ok(true)
    }

    /// Merges a piece not in the cache; its cache entry. A piece already looked up
    /// whole (and not a token) is not looked up again.
    fn merge(&mut self, start: usize, end: usize, whole: Whole) -> Result<Entry, EncodeError> {
        let stored = &mut self.cache.stored;
        let at = stored.len();
        let piece = &self.bytes[start..end];
        match whole {
            Whole::LookedUp => self.model.merge_piece(piece, stored)?,
            Whole::NotLookedUp => self.model.encode_piece(piece, stored)?,
        }
        // Most pieces are one or two tokens: their ids go in the entry itself, so
        // that a hit reads nothing else.
        Ok(Entry::of_stored(stored, at))
    }

    #[inline(always)]
    fn emit_entry(
        &self,
        end: usize,
        entry: Entry,
        emit: &mut impl FnMut(usize, &[u32]) -> Result<(), EncodeError>,
    ) -> Result<(), EncodeError> {
        emit_ids(&self.cache.stored, end, entry, emit)
    }
}

/// Emits the ids of `entry`, an entry of the cache whose stored ids are `stored`.
#[inline(always)]
fn emit_ids(
    stored: &[u32],
    end: usize,
    entry: Entry,
    emit: &mut impl FnMut(usize, &[u32]) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    match entry.ids() {
        Ids::One(id) => emit(end, &[id]),
        Ids::Two(ids) => emit(end, &ids),
        Ids::Stored(at, n) => emit(end, &stored[at..at + n]),
    }
}

impl Encoder {
    /// The cuts besides special tokens where text may be cut: the pattern's, unless
    /// the normalizer acts at the edges of the text between special tokens (Prepend,
    /// Strip) or may join text across a cut (Replace): then none.
    fn text_cuts(&self) -> TextCuts {
        if self.normalizer.keeps_text_cuts() {
            TextCuts::of(&self.pre)
        } else {
            TextCuts::None
        }
    }

    /// The last offset by `limit` where encoding may start over (0: none): the edge of
    /// a special token, or a restart of the pre-tokenizer between them.
    fn last_restart(
        &self,
        text: &str,
        specials: &SpecialMatcher,
        limit: usize,
    ) -> Result<usize, EncodeError> {
        let mut cut = 0;
        let mut pos = 0;
        let segment = |from: usize, to: usize, cut: &mut usize| {
            self.pre.for_each_restart(&text[from..to], |e| {
                if from + e <= limit {
                    *cut = from + e;
                }
            })
        };
        for (start, end, _) in specials.find_all(text.as_bytes()) {
            if start > limit {
                return Ok(cut);
            }
            segment(pos, start, &mut cut)?;
            if end <= limit {
                cut = end;
            }
            pos = end;
        }
        segment(pos, text.len(), &mut cut)?;
        Ok(cut)
    }
}

impl Model for Encoder {
    type Cache = PieceCache;
    type Lessons = Lessons;

    fn take_cache(&self) -> PieceCache {
        self.caches.take()
    }

    fn give_back_cache(&self, cache: PieceCache) {
        self.caches.give_back(cache)
    }

    /// Workers encoding with the built-in splitter and no normalizer (the walk that
    /// writes hits straight into the output, [`Lookups::walk_into`]) read one warm
    /// cache together ([`PieceCache::for_workers`]).
    fn take_caches(&self, workers: usize) -> Vec<PieceCache> {
        if workers > 1 && self.normalizer.is_empty() && self.pre.builtin_alone().is_some() {
            return PieceCache::for_workers(self.take_cache(), workers, || self.spare.take());
        }
        (0..workers).map(|_| self.take_cache()).collect()
    }

    fn give_back_caches(&self, mut caches: Vec<PieceCache>) {
        if caches.iter().any(|c| c.shared.is_some()) {
            if let Some((main, empty)) = PieceCache::gather(caches) {
                self.give_back_cache(main);
                empty.into_iter().for_each(|c| self.spare.give_back(c));
            }
            return;
        }
        PieceCache::share_learned(&mut caches);
        for cache in caches {
            self.give_back_cache(cache);
        }
    }

    fn lessons(&self, cache: &mut PieceCache) -> Option<Lessons> {
        cache.has_lessons().then(|| cache.lessons())
    }

    fn take_in(&self, cache: &mut PieceCache, lessons: &Lessons) {
        cache.take_in(lessons)
    }

    fn safe_cuts(&self) -> SafeCuts {
        SafeCuts::AtSpecials {
            text: self.text_cuts(),
        }
    }

    /// Byte-level BPE encodes a part as any text: where it starts does not matter.
    fn count_cached(
        &self,
        text: &str,
        _starts_text: bool,
        specials: &SpecialMatcher,
        cache: &mut PieceCache,
    ) -> Result<usize, EncodeError> {
        let mut n = 0;
        self.for_each_ids(text, specials, cache, usize::MAX, |_, ids| {
            n += ids.len();
            Ok(())
        })?;
        Ok(n)
    }

    fn encode_cached(
        &self,
        text: &str,
        specials: &SpecialMatcher,
        cache: &mut PieceCache,
        out: &mut Vec<u32>,
    ) -> Result<(), EncodeError> {
        if self.normalizer.is_empty() {
            if let Some(builtin) = self.pre.builtin_alone() {
                // A worker's cache lends out the one its batch shares for the call.
                let shared = cache.shared.take();
                let mut lookups = Lookups::new(text.as_bytes(), &self.model, cache);
                lookups.shared = shared.as_deref();
                let done =
                    lookups.with_batch(|l, batch| l.walk_into(builtin, text, specials, out, batch));
                cache.shared = shared;
                return done;
            }
        }
        self.for_each_ids(text, specials, cache, usize::MAX, |_, ids| {
            push_ids(out, ids)
        })
    }

    /// Byte-level BPE encodes a part as any text: where it starts does not matter.
    fn encode_until(
        &self,
        text: &str,
        _starts_text: bool,
        specials: &SpecialMatcher,
        limit: usize,
        cache: &mut PieceCache,
        out: &mut Vec<u32>,
    ) -> Result<usize, EncodeError> {
        if !self.normalizer.is_empty() {
            // Normalizing joins characters, so a piece of the normalized text has no
            // end in `text`: encode up to the last safe cut before `limit` instead.
            let cuts = self.text_cuts();
            let Some(cut) = last_cut(text.as_bytes(), limit, cuts, specials) else {
                return Ok(0);
            };
            self.encode_cached(&text[..cut], specials, cache, out)?;
            return Ok(cut);
        }
        if !self.pre.steps().is_empty() {
            // With later steps, a piece that ends by `limit` may lie inside a piece of
            // the pattern that more text changes: stop at the last place where
            // pre-tokenizing may start over instead (`PreTokenizer::for_each_restart`).
            let cut = self.last_restart(text, specials, limit)?;
            self.for_each_ids(text, specials, cache, cut, |_, ids| push_ids(out, ids))?;
            return Ok(cut);
        }
        let mut consumed = 0;
        self.for_each_ids(text, specials, cache, limit, |end, ids| {
            consumed = end;
            push_ids(out, ids)
        })?;
        Ok(consumed)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::bpe::model::testing::{minbpe_parts, random_parts, XorShift};
    use crate::model::WorkerCaches;
    use crate::pretok::GPT2_PATTERN;

    pub fn minbpe_encoder(pattern: Option<&str>) -> Encoder {
        let (vocab, merges, specials) = minbpe_parts();
        Encoder::new(vocab, &merges, specials, pattern).unwrap()
    }

    fn random_encoder(seed: u64, merges: usize, pattern: Option<&str>) -> Encoder {
        let (vocab, table, specials) = random_parts(seed, merges);
        Encoder::new(vocab, &table, specials, pattern).unwrap()
    }

    #[test]
    fn encodes_the_minbpe_example() {
        let e = minbpe_encoder(None);
        assert_eq!(
            e.encode("aaabdaaabac", e.no_specials()).unwrap(),
            vec![258, 100, 258, 97, 99]
        );
    }

    /// BPE of each piece, no cache at all: what cached encoding must equal.
    fn uncached(e: &Encoder, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        for_each_unit(text, e.no_specials(), &e.pre, |u| {
            if let Unit::Piece { start, end } = u {
                e.model
                    .encode_piece(&text.as_bytes()[start..end], &mut out)
                    .unwrap();
            }
        })
        .unwrap();
        out
    }

    fn encode_with(e: &Encoder, text: &str, cache: &mut PieceCache) -> Vec<u32> {
        let mut out = Vec::new();
        e.encode_cached(text, e.no_specials(), cache, &mut out)
            .unwrap();
        out
    }

    #[test]
    fn a_warm_cache_gives_the_same_ids() {
        let e = random_encoder(12345, 60, Some(GPT2_PATTERN));
        let mut rng = XorShift(99);
        let mut cache = PieceCache::default();
        for _ in 0..20 {
            let len = rng.below(3000);
            let text: String = (0..len)
                .map(|_| ['a', 'b', 'c', ' ', '\n'][rng.below(5)])
                .collect();
            let want = uncached(&e, &text);
            // `encode` takes the pool's cache, warm from the texts before.
            assert_eq!(e.encode(&text, e.no_specials()).unwrap(), want);
            assert_eq!(encode_with(&e, &text, &mut cache), want);
            assert_eq!(e.count(&text, e.no_specials()).unwrap(), want.len());
        }
        assert!(!cache.small.is_empty());
        // A cache that is full gives the same ids, and stays within its limit.
        let mut tiny = PieceCache {
            max_ids: 5,
            ..PieceCache::default()
        };
        let text = "abc cab bca ".repeat(50) + &"ab ca bc cc aa ".repeat(50);
        let want = e.encode(&text, e.no_specials()).unwrap();
        assert_eq!(encode_with(&e, &text, &mut tiny), want);
        assert!(tiny.stored.len() <= 5 + SHORT_PIECE);
    }

    /// A piece kept past its home line in the cache (its line taken by two others) is
    /// a hit of the hits loop like any other: a warm pass gives the merges' ids and
    /// merges nothing again (it keeps nothing new, so learns nothing new).
    #[test]
    fn pieces_kept_past_their_home_line_are_hits() {
        let e = random_encoder(2024, 80, Some(GPT2_PATTERN));
        let mut rng = XorShift(17);
        let text = (0..3000)
            .map(|_| {
                let len = 2 + rng.below(7);
                (0..len)
                    .map(|_| char::from(b'a' + rng.below(26) as u8))
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join(" ");
        let want = uncached(&e, &text);
        let mut cache = PieceCache::default();
        assert_eq!(encode_with(&e, &text, &mut cache), want);
        let lines = cache.small.lines();
        let far = cache
            .small
            .iter()
            .filter(|&(key, _)| lines.get_near(key, key_hash(key)).is_none())
            .count();
        assert!(far > 10, "{far} keys past their home line");
        let learned = cache.learned_small.len();
        assert_eq!(encode_with(&e, &text, &mut cache), want);
        assert_eq!(cache.learned_small.len(), learned);
    }

    /// `encode` writes hits straight into its output (`Lookups::walk_into`); the
    /// general path emits each unit's ids (`encode_until`, `count`). They agree on
    /// pieces of one, two and more ids, long pieces, special tokens anywhere, and
    /// with a cache too small to keep much (misses in the middle of a batch).
    #[test]
    fn encode_writes_the_ids_the_general_path_emits() {
        let (vocab, table, _) = random_parts(777, 120);
        let specials: FxHashMap<String, u32> =
            [("<|s|>".to_string(), 10_000)].into_iter().collect();
        let e = Encoder::new(vocab, &table, specials, Some(GPT2_PATTERN)).unwrap();
        let mut rng = XorShift(5);
        let mut specials_seen = 0;
        for _ in 0..40 {
            let mut text = String::new();
            for _ in 0..rng.below(400) {
                match rng.below(12) {
                    0 => text.push_str("<|s|>"),
                    1 => text.push_str(&"abc".repeat(1 + rng.below(12))),
                    _ => text.push(['a', 'b', 'c', ' ', '\n', 'é'][rng.below(6)]),
                }
            }
            let general = |cache: &mut PieceCache| {
                let mut out = Vec::new();
                let done =
                    e.encode_until(&text, true, e.all_specials(), usize::MAX, cache, &mut out);
                assert_eq!(done.unwrap(), text.len());
                out
            };
            let want = general(&mut PieceCache::default());
            specials_seen += want.iter().filter(|&&id| id == 10_000).count();
            assert_eq!(e.encode(&text, e.all_specials()).unwrap(), want);
            let tiny = || PieceCache {
                max_ids: 3,
                max_pieces: 4,
                ..PieceCache::default()
            };
            let mut cache = tiny();
            let mut out = Vec::new();
            e.encode_cached(&text, e.all_specials(), &mut cache, &mut out)
                .unwrap();
            assert_eq!(out, want);
            assert_eq!(general(&mut tiny()), want);
        }
        assert!(specials_seen > 100);
    }

    #[test]
    fn stored_ids_copied_in_the_hits_loop_are_the_general_paths_at_any_capacity() {
        // Few merges: words of a, b and c are pieces of three to a dozen ids.
        let (vocab, table, _) = random_parts(4242, 40);
        let e = Encoder::new(vocab, &table, FxHashMap::default(), Some(GPT2_PATTERN)).unwrap();
        let mut rng = XorShift(9);
        // Warm hits of stored ids: copied in the loop, near the end of the stored
        // ids' buffer (copied outside it), and copied in the loop with more than 8
        // ids (the copy's second half).
        let mut seen = [0usize; 3];
        for round in 0..40 {
            let mut text = String::new();
            for _ in 0..rng.below(200) {
                text.push([' ', 'a', 'b', 'c', 'é'][rng.below(5)]);
            }
            let mut want = Vec::new();
            e.encode_until(
                &text,
                true,
                e.no_specials(),
                usize::MAX,
                &mut PieceCache::default(),
                &mut want,
            )
            .unwrap();
            let mut cache = PieceCache::default();
            let mut out = Vec::new();
            e.encode_cached(&text, e.no_specials(), &mut cache, &mut out)
                .unwrap(); // cold: every piece merged and kept
            assert_eq!(out, want);
            if round % 2 == 0 {
                // The last stored ids end at the buffer's end.
                cache.stored.shrink_to_fit();
            }
            for (_, entry) in cache.small.iter() {
                if entry.inline_lanes().is_none() {
                    let (at, n) = entry.stored_place();
                    let k = if at + STORED_COPY > cache.stored.capacity() {
                        1
                    } else if n > 8 {
                        2
                    } else {
                        0
                    };
                    seen[k] += 1;
                }
            }
            // Warm: every piece a hit, written where no earlier pass's ids lie.
            let mut out = vec![u32::MAX; 2 * want.len() + 64];
            out.clear();
            e.encode_cached(&text, e.no_specials(), &mut cache, &mut out)
                .unwrap();
            assert_eq!(out, want, "round {round}");
        }
        assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
    }

    #[test]
    fn calls_share_warm_caches_from_the_pool_but_not_huge_ones() {
        let e = random_encoder(777, 40, Some(GPT2_PATTERN));
        let pooled = |e: &Encoder| e.caches.len();
        assert_eq!(pooled(&e), 0);
        let text = "abc cab bca aab ".repeat(30);
        assert_eq!(
            e.encode(&text, e.no_specials()).unwrap(),
            uncached(&e, &text)
        );
        assert_eq!(pooled(&e), 1);
        let entries = e.with_cache(|c| c.small.len());
        assert!(entries > 0, "the second call got the first call's cache");
        // Two at once get two caches, and both are kept.
        e.with_cache(|_| e.with_cache(|_| ()));
        assert_eq!(pooled(&e), 2);
        // A clone of the encoder starts with no caches.
        assert_eq!(pooled(&e.clone()), 0);
        // A large cache (text in many scripts) is kept; one too big to be worth
        // keeping is dropped.
        e.with_cache(|c| c.stored.resize((1 << 18) + 1, 0));
        assert_eq!(pooled(&e), 2);
        e.with_cache(|c| c.stored.resize((1 << 20) + 1, 0));
        assert_eq!(pooled(&e), 1);
    }

    fn two_workers() -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap()
    }

    #[test]
    fn worker_caches_go_back_together_when_dropped() {
        let e = random_encoder(7, 40, Some(GPT2_PATTERN));
        let pool = two_workers();
        let want = uncached(&e, "ab cab bca");
        {
            let workers = WorkerCaches::new(&e, &pool);
            let ids = pool.install(|| workers.with(|c| encode_with(&e, "ab cab bca", c)));
            assert_eq!(ids, want);
            assert_eq!(e.caches.len(), 0, "both caches are out while in use");
        }
        assert_eq!(e.caches.len(), 2, "both workers' caches went back");
        for _ in 0..2 {
            let cache = e.take_cache();
            assert_eq!(cache.small.len(), 3, "each holds what one worker merged");
            drop(cache); // not back to the pool: the next take gets the other
        }
    }

    #[test]
    fn workers_take_in_what_the_others_learned_between_parts() {
        let e = random_encoder(2024, 60, Some(GPT2_PATTERN));
        let pool = two_workers();
        let workers = WorkerCaches::new(&e, &pool);
        // Encodes `text` on worker `who`: its ids, and how many pieces its cache held
        // before and after (before it traded with the board).
        let run = |who: usize, text: &str| {
            let got = pool.broadcast(|ctx| {
                (ctx.index() == who).then(|| {
                    workers.with(|c| {
                        let before = c.small.len();
                        (encode_with(&e, text, c), before, c.small.len())
                    })
                })
            });
            got.into_iter().flatten().next().expect("the worker ran")
        };
        // No piece in common.
        let (a, b) = ("ab abc aab bab", "cc acca");
        let (ids_a, _, pieces_a) = run(0, a);
        assert_eq!(ids_a, uncached(&e, a));
        let (ids_b, before, pieces_b) = run(1, b);
        assert_eq!(ids_b, uncached(&e, b));
        assert_eq!(before, 0, "worker 1 had met nothing");
        // Worker 1 took in worker 0's pieces after its part, and merges none again.
        let (again, before, after) = run(1, a);
        assert_eq!(again, ids_a);
        assert_eq!((before, after), (pieces_a + pieces_b, pieces_a + pieces_b));
        // Worker 0 takes in worker 1's at its next part.
        let (again, _, after) = run(0, b);
        assert_eq!(again, ids_b);
        let (_, before, _) = run(0, "");
        assert_eq!((after, before), (pieces_a + pieces_b, pieces_a + pieces_b));
    }

    #[test]
    fn a_batch_on_threads_gives_back_one_cache_with_what_every_worker_merged() {
        use crate::io::batch::{encode_flat, most_ids, Specials, Workers};
        use crate::model::Frame;
        let owned: Vec<String> = (0..64)
            .map(|i| format!("abc cab bca aab {} {i}", "ab ".repeat(i % 9)))
            .collect();
        let texts: Vec<&str> = owned.iter().map(String::as_str).collect();
        for threads in [2, 3] {
            let e = random_encoder(777, 40, Some(GPT2_PATTERN));
            let specials = Specials {
                allowed: e.no_specials(),
                disallowed: e.no_specials(),
            };
            let frame = Frame::default();
            let mut out = vec![std::mem::MaybeUninit::uninit(); most_ids(&e, &texts, &frame) * 4];
            let workers = Workers::Spawned(threads);
            // Cold, and then warm: the workers read the cache the first batch left.
            for pass in 0..2 {
                encode_flat(&e, &texts, specials, &frame, workers, &mut out).unwrap();
                // The workers (the calling thread is one) read one cache together,
                // and it comes back holding every piece of the batch.
                assert_eq!(e.caches.len(), 1, "{threads} threads, pass {pass}");
                let mut cache = e.take_cache();
                let pieces = cache.small.len();
                assert!(pieces > 4 && cache.shared.is_none(), "{threads} threads");
                for text in &texts {
                    assert_eq!(encode_with(&e, text, &mut cache), uncached(&e, text));
                }
                assert_eq!(cache.small.len(), pieces, "nothing was merged again");
                e.give_back_cache(cache);
                if pass == 1 {
                    // Warm, the workers merged nothing: their caches are kept to use again.
                    assert_eq!(e.spare.len(), threads);
                }
            }
        }
    }

    #[test]
    fn workers_read_the_shared_cache_and_keep_only_what_it_lacks() {
        let e = random_encoder(4242, 60, Some(GPT2_PATTERN));
        // Short pieces; one of 15 bytes of 15 ids (its ids stored); a long one.
        let known = format!("qwertyuiopzxcvb ab abc aab bab {}", "ab".repeat(12));
        let mut main = e.take_cache();
        let want_known = encode_with(&e, &known, &mut main);
        let pieces = (main.small.len(), main.long.len());
        assert!(
            main.stored.len() >= 15,
            "the 15-byte piece's ids are stored"
        );
        let mut workers = e.take_caches(2);
        assert!(workers
            .iter()
            .all(|w| w.shared.is_some() && w.small.is_empty()));
        workers = PieceCache::for_workers(main, 2, PieceCache::default);
        // What the shared cache holds is read there: nothing is merged again, and
        // ids it stores are copied from it, also into an output with no room yet.
        assert_eq!(encode_with(&e, &known, &mut workers[0]), want_known);
        assert_eq!(
            encode_with(&e, "qwertyuiopzxcvb", &mut workers[1]),
            uncached(&e, "qwertyuiopzxcvb")
        );
        assert!(workers
            .iter()
            .all(|w| w.small.is_empty() && w.long.is_empty()));
        // What it lacks, each worker merges and keeps for itself, and finds there
        // the next time (a piece absent from the shared cache).
        let new = format!("cc acca {}", "ca".repeat(12));
        let want_new = uncached(&e, &new);
        for _ in 0..2 {
            assert_eq!(encode_with(&e, &new, &mut workers[1]), want_new);
        }
        let own = (workers[1].small.len(), workers[1].long.len());
        assert!(own.0 >= 2 && own.1 == 1, "{own:?}");
        assert_eq!(workers[1].learned_small.len(), own.0, "each merged once");
        assert!(workers[0].small.is_empty());
        // A worker that merged more than the shared cache holds (a cold batch) reads
        // its own first, then the shared one: its ids there, stored or long, too.
        let many: String = (0..300).map(|i| format!(" x{i}y")).collect();
        let want_many = uncached(&e, &many);
        for _ in 0..2 {
            assert_eq!(encode_with(&e, &many, &mut workers[0]), want_many);
        }
        let merged = workers[0].small.len();
        assert!(merged > pieces.0 + 200, "{merged}");
        assert_eq!(workers[0].learned_small.len(), merged, "each merged once");
        assert_eq!(encode_with(&e, &known, &mut workers[0]), want_known);
        assert_eq!((workers[0].small.len(), workers[0].long.len()), (merged, 0));
        // Given back, the shared cache takes in what the workers merged, alone.
        e.give_back_caches(workers);
        assert_eq!(e.caches.len(), 1);
        let mut main = e.take_cache();
        let all = pieces.0 + own.0 + merged;
        assert_eq!((main.small.len(), main.long.len()), (all, pieces.1 + 1));
        assert_eq!(encode_with(&e, &new, &mut main), want_new);
        assert_eq!(encode_with(&e, &known, &mut main), want_known);
        assert_eq!(encode_with(&e, &many, &mut main), want_many);
        assert_eq!(main.small.len(), all, "nothing was merged again");
        // A model whose workers cannot share (another pattern) takes a cache each.
        let other = random_encoder(4242, 60, None);
        assert!(other.take_caches(2).iter().all(|w| w.shared.is_none()));
    }

    #[test]
    fn what_a_cache_learned_alone_reaches_the_others_at_the_next_shared_call() {
        let e = random_encoder(2025, 60, Some(GPT2_PATTERN));
        let alone = format!("ab abc aab bab {}", "ab".repeat(12));
        // A call on one thread: its cache goes back to the pool on its own.
        let mut one = e.take_cache();
        let want = encode_with(&e, &alone, &mut one);
        let known = one.small.len();
        assert!(known > 2 && one.long.len() == 1);
        e.give_back_cache(one);
        // A call on two threads: the warm cache and a fresh one, which sees other text.
        let (one, mut two) = (e.take_cache(), e.take_cache());
        assert_eq!((one.small.len(), two.small.len()), (known, 0));
        let _ = encode_with(&e, "cc", &mut two);
        e.give_back_caches(vec![one, two]);
        for _ in 0..2 {
            let mut cache = e.take_cache();
            assert_eq!(
                cache.small.len(),
                known + 1,
                "each has the pieces of both calls"
            );
            assert_eq!(cache.long.len(), 1, "and the long one");
            assert_eq!(encode_with(&e, &alone, &mut cache), want);
            assert_eq!(cache.small.len(), known + 1, "nothing was merged again");
            drop(cache); // not back to the pool: the next take gets the other
        }
    }

    #[test]
    fn caches_given_back_together_learn_what_the_others_merged() {
        let e = random_encoder(2024, 60, Some(GPT2_PATTERN));
        // Two workers' texts, with no piece in common but "ab": short pieces, and a
        // long one (over 15 bytes) each.
        let a = format!("ab abc aab bab {}", "ab".repeat(12));
        let b = format!("ab cab cc acca {}", "ca".repeat(12));
        let (mut one, mut two) = (e.take_cache(), e.take_cache());
        let want_a = encode_with(&e, &a, &mut one);
        let want_b = encode_with(&e, &b, &mut two);
        let union = |x: &PieceCache, y: &PieceCache| x.small.len() + y.small.len() - 1;
        let pieces = union(&one, &two);
        assert!(one.learned_small.len() > 1 && one.learned_long.len() == 1);
        let learned = one.learned_small.len() + two.learned_small.len() + 2;
        assert!(
            learned >= 8,
            "shared on threads (past 8 in tests): {learned}"
        );
        e.give_back_caches(vec![one, two]);
        for _ in 0..2 {
            let mut cache = e.take_cache();
            assert_eq!(
                cache.small.len(),
                pieces,
                "each cache has every short piece"
            );
            assert_eq!(cache.long.len(), 2, "and both long ones");
            assert!(cache.learned_small.is_empty() && cache.learned_long.is_empty());
            // Entries taken from the other cache give the same ids.
            assert_eq!(encode_with(&e, &a, &mut cache), want_a);
            assert_eq!(encode_with(&e, &b, &mut cache), want_b);
            assert_eq!(cache.small.len(), pieces, "nothing was merged again");
            drop(cache); // not back to the pool: the next take gets the other
        }
        // The same with a few pieces (shared on this thread, not on threads).
        let (mut one, mut two) = (e.take_cache(), e.take_cache());
        let want = (
            encode_with(&e, "ab", &mut one),
            encode_with(&e, "ca", &mut two),
        );
        assert!(one.learned_small.len() + two.learned_small.len() < 8);
        e.give_back_caches(vec![one, two]);
        for _ in 0..2 {
            let mut cache = e.take_cache();
            assert_eq!(cache.small.len(), 2);
            assert_eq!(
                (
                    encode_with(&e, "ab", &mut cache),
                    encode_with(&e, "ca", &mut cache)
                ),
                want
            );
        }
        // A cache with no room takes nothing in.
        let (mut full, mut other) = (e.take_cache(), e.take_cache());
        full.max_pieces = 0;
        encode_with(&e, &a, &mut other);
        e.give_back_caches(vec![full, other]);
        let sizes: Vec<usize> = (0..2).map(|_| e.take_cache().small.len()).collect();
        assert!(sizes.contains(&0), "{sizes:?}");
    }

    #[test]
    fn pieces_of_16_to_1024_bytes_stay_cached_across_calls() {
        let e = random_encoder(4242, 40, Some(GPT2_PATTERN));
        // Pieces of 40 and 201 letters (no spaces, as in Chinese or Thai text), and
        // one of 1,200, too long to cache.
        let text = format!(
            "{} {} {}",
            "abcab".repeat(8),
            "cab".repeat(67),
            "bca".repeat(400)
        );
        let want = uncached(&e, &text);
        assert_eq!(e.encode(&text, e.no_specials()).unwrap(), want);
        assert_eq!(e.with_cache(|c| c.long.len()), 2);
        assert_eq!(e.encode(&text, e.no_specials()).unwrap(), want);
        assert_eq!(e.with_cache(|c| c.long.key_bytes()), 40 + 202);
    }

    #[test]
    fn a_cache_past_its_long_bytes_keeps_no_more_long_pieces() {
        let e = random_encoder(4243, 40, Some(GPT2_PATTERN));
        let text = format!("{} {}", "abcab".repeat(8), "cab".repeat(67));
        let want = uncached(&e, &text);
        let mut cache = e.take_cache();
        cache.max_long_bytes = 100;
        e.give_back_caches(vec![cache]);
        assert_eq!(e.encode(&text, e.no_specials()).unwrap(), want);
        assert_eq!(
            e.with_cache(|c| c.long.len()),
            1,
            "the piece of 40, not of 202"
        );
        assert_eq!(e.encode(&text, e.no_specials()).unwrap(), want);
    }

    #[test]
    fn allowed_specials_become_their_id() {
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        assert_eq!(
            e.encode("a<|e|>a", e.all_specials()).unwrap(),
            vec![97, 259, 97]
        );
        // Not allowed: plain text, one id per byte here (no merges apply).
        assert_eq!(
            e.encode("<|e|>", e.no_specials()).unwrap(),
            vec![60, 124, 101, 124, 62]
        );
    }

    #[test]
    fn a_normalized_encoder_encodes_the_normalized_text_between_specials() {
        use crate::bpe::normalizer::Normalizer;
        let plain = minbpe_encoder(Some(GPT2_PATTERN));
        let nfd = minbpe_encoder(Some(GPT2_PATTERN))
            .with_normalizer(Normalizer::from_names(&["NFD", "Lowercase"]).unwrap());
        let text = "Aa\u{e9}<|e|>\u{c9}b aab";
        let mut want = plain.encode("aae\u{301}", plain.all_specials()).unwrap();
        want.push(259);
        want.extend(plain.encode("e\u{301}b aab", plain.all_specials()).unwrap());
        assert_eq!(nfd.encode(text, nfd.all_specials()).unwrap(), want);
        // Streaming stops at the last safe cut before the limit (before " aab").
        let mut out = Vec::new();
        let used = nfd
            .with_cache(|c| {
                nfd.encode_until(text, true, nfd.all_specials(), text.len() - 1, c, &mut out)
            })
            .unwrap();
        assert_eq!(&text[used..], " aab");
        out.extend(nfd.encode(&text[used..], nfd.all_specials()).unwrap());
        assert_eq!(out, want);
    }

    #[test]
    fn a_normalizer_at_the_edges_cuts_text_only_at_special_tokens() {
        use crate::bpe::normalizer::{Normalizer, Step};
        let plain = minbpe_encoder(Some(GPT2_PATTERN));
        assert_eq!(
            plain.safe_cuts(),
            SafeCuts::AtSpecials {
                text: TextCuts::Pattern
            }
        );
        let prepend = minbpe_encoder(Some(GPT2_PATTERN))
            .with_normalizer(Normalizer::new(vec![Step::Nfc, Step::Prepend("b".into())]));
        assert_eq!(
            prepend.safe_cuts(),
            SafeCuts::AtSpecials {
                text: TextCuts::None
            }
        );
        // Each text between special tokens gets its "b".
        let text = "aa aa<|e|>aa aa";
        let mut want = plain.encode("baa aa", plain.no_specials()).unwrap();
        want.push(259);
        want.extend(plain.encode("baa aa", plain.no_specials()).unwrap());
        assert_eq!(prepend.encode(text, prepend.all_specials()).unwrap(), want);
        // Streaming holds back everything after the last special token.
        let mut out = Vec::new();
        let used = prepend
            .with_cache(|c| {
                prepend.encode_until(
                    text,
                    true,
                    prepend.all_specials(),
                    text.len() - 1,
                    c,
                    &mut out,
                )
            })
            .unwrap();
        assert_eq!(&text[used..], "aa aa");
    }
}
