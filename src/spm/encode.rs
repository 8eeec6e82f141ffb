//! Text -> ids for a SentencePiece BPE model, as `bpe::Model::Encode` and
//! `SentencePieceProcessor::Encode` do it.
//!
//! 1. Normalize (see [`super::normalizer`]).
//! 2. Cut the normalized text into symbols: a user-defined piece where one
//!    starts (longest wins; it is frozen: never merged), else one character.
//! 3. Merge: repeatedly join the adjacent pair whose concatenation is a
//!    mergeable piece with the highest score, the leftmost on a tie.
//!    UNUSED pieces take part in merging, but a final UNUSED symbol is split
//!    back into the two symbols it was last recorded as made of.
//! 4. Each symbol becomes its id; a symbol with no piece is unknown: with byte
//!    fallback it becomes one `<0xNN>` per UTF-8 byte, without it consecutive
//!    unknowns collapse into one `<unk>`.
//!
//! sentencepiece runs step 3 over the whole text at once (it does not pre-split
//! on whitespace). We cut the text into words and cache each word's ids, which
//! gives the same ids only where no merge can cross a cut. A merge that crosses
//! the cut between characters `a` and `b` makes a piece containing `ab`, so a cut
//! next to the whitespace mark is safe when no mergeable piece has `a` right
//! before it (or `b` right after it). The model works those character sets out
//! from its vocabulary ([`SpmModel::chars`]); Mistral's only piece
//! with `▁` inside is a run of `▁`s, so a word there is "▁▁…word".
//! One more global effect: which split an UNUSED piece goes back to is recorded
//! per text, not per word, so models with UNUSED pieces encode whole texts.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::ops::Range;

use rustc_hash::FxHashMap;

use super::chars::{AFTER_SPACE, BEFORE_SPACE, FOLLOWED, NO_ID, PRECEDED};
use super::model::{char_pair_key, SpmModel};
use super::normalizer::marks;
use super::proto::PieceType;
use super::SpmError;
use crate::cache_pool::PooledCache;
use crate::packed::{key_hash, packed_all, PackedMap, MAX_PACKED, PREFETCH_AHEAD};

/// Words longer than this (bytes) are not cached: they rarely repeat. Runs of
/// spaces do, and each space is three bytes of `▁`: a line of 50 spaces and a
/// `;` (as in Unicode's emoji-test.txt) is 151 bytes.
pub(super) const MAX_CACHED_WORD: usize = 1024;
/// Words of at most this many symbols are merged without a heap.
const SMALL: usize = 16;
/// The cache starts over past this many words, or this many bytes of long words.
const MAX_CACHED_WORDS: usize = 1 << 20;
pub(super) const MAX_LONG_BYTES: usize = 64 << 20;

/// Ids of words seen before, and scratch space for the merge loop.
///
/// Words of up to 15 bytes (most of them: "▁the" is 6) are keyed by their bytes
/// packed into an integer with the length on top ([`packed_all`]), in a
/// [`PackedMap`]: a lookup hashes one `u128` and reads one cache line.
#[derive(Default)]
pub struct WordCache {
    short: PackedMap<(u32, u32)>,
    /// Words of up to twice [`MAX_PACKED`] bytes, as two packed halves: no
    /// string to allocate, follow and compare (Cyrillic words are often this long).
    mid: FxHashMap<(u128, u128), (u32, u32)>,
    long: FxHashMap<Box<str>, (u32, u32)>,
    /// The bytes of `long`'s keys.
    long_bytes: usize,
    ids: Vec<u32>,
    scratch: Scratch,
    /// The words of the text being encoded, as byte ranges.
    words: Vec<(u32, u32)>,
    /// Where the word being encoded is cut into parts.
    cuts: Vec<usize>,
    /// The text being encoded, normalized, and where its marks are.
    normalized: String,
    marks: Vec<u32>,
}

/// Where [`WordCache`] keeps a word, by its length.
enum WordKey {
    /// Up to [`MAX_PACKED`] bytes: its [`packed_all`] key and that key's hash.
    Short(u128, u64),
    /// Up to twice that: two [`packed_all`] keys.
    Mid((u128, u128)),
    /// Longer: the string itself.
    Long,
}

impl WordKey {
    #[inline(always)]
    fn of(word: &str) -> WordKey {
        let bytes = word.as_bytes();
        if bytes.len() <= MAX_PACKED {
            let key = packed_all(bytes);
            return WordKey::Short(key, key_hash(key));
        }
        match bytes.split_at(MAX_PACKED) {
            (head, tail) if tail.len() <= MAX_PACKED => {
                WordKey::Mid((packed_all(head), packed_all(tail)))
            }
            _ => WordKey::Long,
        }
    }
}

impl WordCache {
    /// Asks the CPU for the line a lookup of `word` will read (a hint).
    fn prefetch(&self, word: &str) {
        if let WordKey::Short(_, hash) = WordKey::of(word) {
            self.short.prefetch(hash);
        }
    }

    /// Appends the cached ids of `word`; false if it is not cached.
    #[inline]
    fn push_cached(&self, word: &str, out: &mut Vec<u32>) -> bool {
        let Some(ids) = self.get(word) else {
            return false;
        };
        // Most words are one or two ids: pushing beats a memmove call.
        match *ids {
            [a] => out.push(a),
            [a, b] => out.extend([a, b]),
            _ => out.extend_from_slice(ids),
        }
        true
    }

    fn get(&self, word: &str) -> Option<&[u32]> {
        let found = match WordKey::of(word) {
            WordKey::Short(key, hash) => self.short.get(key, hash),
            WordKey::Mid(key) => self.mid.get(&key).copied(),
            WordKey::Long => self.long.get(word).copied(),
        };
        found.map(|(at, n)| &self.ids[at as usize..(at + n) as usize])
    }

    fn insert(&mut self, word: &str, ids: &[u32]) {
        if self.len() >= MAX_CACHED_WORDS || self.long_bytes >= MAX_LONG_BYTES {
            self.short.clear();
            self.mid.clear();
            self.long.clear();
            self.long_bytes = 0;
            self.ids.clear();
        }
        let slot = (self.ids.len() as u32, ids.len() as u32);
        self.ids.extend_from_slice(ids);
        match WordKey::of(word) {
            WordKey::Short(key, hash) => self.short.insert(key, hash, slot),
            WordKey::Mid(key) => {
                self.mid.insert(key, slot);
            }
            WordKey::Long => {
                self.long_bytes += word.len();
                self.long.insert(word.into(), slot);
            }
        }
    }

    /// How many words are cached.
    fn len(&self) -> usize {
        self.short.len() + self.mid.len() + self.long.len()
    }
}

#[cfg(test)]
impl WordCache {
    /// The cached ids of `word`, if it is cached.
    pub(super) fn cached(&self, word: &str) -> Option<Vec<u32>> {
        self.get(word).map(<[u32]>::to_vec)
    }

    pub(super) fn put(&mut self, word: &str, ids: &[u32]) {
        self.insert(word, ids);
    }

    pub(super) fn cached_words(&self) -> usize {
        self.len()
    }
}

#[derive(Default)]
struct Scratch {
    symbols: Vec<Symbol>,
    heap: BinaryHeap<Candidate>,
}

/// Kept whole between calls: its own limits ([`MAX_CACHED_WORDS`],
/// [`MAX_LONG_BYTES`]) bound it.
impl PooledCache for WordCache {}

/// A symbol of the merge loop: a byte range of the text in a linked list.
#[derive(Clone, Copy)]
struct Symbol {
    start: u32,
    end: u32,
    prev: i32,
    next: i32,
    frozen: bool,
    /// The mergeable piece this symbol is, or [`NO_ID`] (an unknown character).
    id: u32,
}

/// A pair that is a piece: the best (highest score, then leftmost) comes first.
#[derive(Clone, Copy)]
struct Candidate {
    score: f32,
    left: u32,
    right: u32,
    /// The byte length of the pair when it was found; a different length now
    /// means one side has merged since, and the candidate is stale.
    len: u32,
    /// The piece the pair makes.
    id: u32,
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        let by_score = self.score.total_cmp(&other.score);
        by_score.then_with(|| other.left.cmp(&self.left))
    }
}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Candidate {}

/// A candidate pair of the small-word loop as one number: higher score first
/// (in `f32::total_cmp`'s order), then the lower position `left` (< [`SMALL`]);
/// never 0.
pub(super) fn rank(score: f32, left: usize) -> u64 {
    let bits = score.to_bits() as i32;
    // Flip the magnitude of negatives, then the sign: unsigned order is total order.
    let ordered = (bits ^ (((bits >> 31) as u32) >> 1) as i32) as u32 ^ (1 << 31);
    (u64::from(ordered) << 32) | (SMALL - left) as u64
}

/// For UNUSED pieces: the two strings each was last seen made of.
type Splits<'t> = FxHashMap<&'t str, (&'t str, &'t str)>;

impl SpmModel {
    /// Encodes `text` to ids, optionally between `<s>` and `</s>`.
    pub fn encode_with(
        &self,
        text: &str,
        add_bos: bool,
        add_eos: bool,
        cache: &mut WordCache,
    ) -> Result<Vec<u32>, SpmError> {
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_bos {
            out.push(self.bos_id.ok_or_else(|| no_control("<s> (bos)"))?);
        }
        self.encode_segment(text, true, cache, &mut out);
        if add_eos {
            out.push(self.eos_id.ok_or_else(|| no_control("</s> (eos)"))?);
        }
        Ok(out)
    }

    /// [`SpmModel::encode_with`] with a cache from the model's pool.
    pub fn encode(&self, text: &str, add_bos: bool, add_eos: bool) -> Result<Vec<u32>, SpmError> {
        let mut cache = self.caches.take();
        let ids = self.encode_with(text, add_bos, add_eos, &mut cache);
        self.caches.give_back(cache);
        ids
    }

    /// Appends the ids of `text` as sentencepiece encodes it, with the dummy prefix
    /// only when `dummy_prefix` (see [`super::normalizer::Normalizer::normalize_with`]).
    pub(super) fn encode_segment(
        &self,
        text: &str,
        dummy_prefix: bool,
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) {
        let mut normalized = std::mem::take(&mut cache.normalized);
        let mut marks = std::mem::take(&mut cache.marks);
        let known =
            (self.normalizer).normalize_into(text, dummy_prefix, &mut normalized, Some(&mut marks));
        let start = out.len();
        self.encode_normalized(&normalized, known.then_some(&marks), cache, out);
        (cache.normalized, cache.marks) = (normalized, marks);
        if self.byte_ids.is_none() {
            collapse_unknown_runs(out, start, self.unk_id);
        }
    }

    /// Appends the ids of already-normalized text, whose marks are at `marks`
    /// when known (see [`super::normalizer::Normalizer::normalize_into`]).
    fn encode_normalized(
        &self,
        text: &str,
        marks: Option<&[u32]>,
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) {
        if self.has_unused {
            return self.merge_and_emit(text, &mut cache.scratch, out);
        }
        let mut rest = text;
        while !rest.is_empty() {
            // Up to the next user-defined symbol (frozen, a word of its own).
            let (free, frozen) = match self.user_defined.as_ref().and_then(|m| m.find(rest)) {
                Some((start, end)) => (&rest[..start], Some(&rest[start..end])),
                None => (rest, None),
            };
            // Cut first, then look each word up a few words after asking for its
            // cache line: a new word's lookup misses the CPU's cache, and those
            // misses overlap instead of coming one after another.
            let mut words = std::mem::take(&mut cache.words);
            words.clear();
            // The known marks are of the whole text, which is free when there
            // are no user-defined symbols.
            let known = marks.filter(|_| free.len() == text.len());
            self.for_each_word(free, known, |start, end| {
                words.push((start as u32, end as u32))
            });
            let word = |&(start, end): &(u32, u32)| &free[start as usize..end as usize];
            for (i, w) in words.iter().enumerate() {
                if let Some(ahead) = words.get(i + PREFETCH_AHEAD) {
                    cache.prefetch(word(ahead));
                }
                self.encode_word(word(w), cache, out);
            }
            cache.words = words;
            if let Some(symbol) = frozen {
                out.push(self.piece_to_id(symbol));
            }
            rest = &rest[free.len() + frozen.map_or(0, str::len)..];
        }
    }

    /// Calls `f` with the byte range of each word of `text`: cut next to the
    /// whitespace mark where no merge can cross (see the module header).
    /// Only the two neighbours of each mark are looked at: the marks are
    /// `known` (from the normalizer), or found with memchr, not by decoding
    /// every character.
    pub(super) fn for_each_word(
        &self,
        text: &str,
        known: Option<&[u32]>,
        mut f: impl FnMut(usize, usize),
    ) {
        let (space, split) = (self.space, self.split);
        let mut mark = [0u8; 4];
        let mark = space.encode_utf8(&mut mark).as_bytes();
        let bytes = text.as_bytes();
        // Whether the text may be cut between `p` and a mark after it, and
        // between a mark and `c` after it. Between two marks both ask the same:
        // the mark is before a mark in some piece exactly when one is after it.
        let cut_before = |p: char| !self.chars.has(p, BEFORE_SPACE);
        let cut_after = |c: char| !self.chars.has(c, AFTER_SPACE);
        let mut start = 0;
        let mut at_mark = |m: usize| {
            let after = m + mark.len();
            if m > start && (split || cut_before(char_before(text, m))) {
                f(start, m);
                start = m;
            }
            if after < text.len() && cut_after(char_at(text, after)) {
                f(start, after);
                start = after;
            }
        };
        match known {
            Some(at) => at.iter().for_each(|&m| at_mark(m as usize)),
            None => marks(bytes, mark).for_each(at_mark),
        }
        if start < text.len() {
            f(start, text.len());
        }
    }

    fn encode_word(&self, word: &str, cache: &mut WordCache, out: &mut Vec<u32>) {
        self.cached_or(word, cache, out, |cache, out| {
            let mut cuts = std::mem::take(&mut cache.cuts);
            self.joined_cuts(word, &mut cuts);
            if cuts.is_empty() {
                self.merge_and_emit(word, &mut cache.scratch, out);
            } else {
                // A part has no place to cut: it is merged whole, or is in the
                // cache; one character (often one with no piece) is emitted.
                let mut start = 0;
                for &end in cuts.iter().chain([&word.len()]) {
                    let part = &word[start..end];
                    match self.lone_char(part) {
                        Some(id) => {
                            let all = 0..part.len() as u32;
                            self.emit_symbol(part, all, id, &Splits::default(), out)
                        }
                        None => self.cached_or(part, cache, out, |cache, out| {
                            self.merge_and_emit(part, &mut cache.scratch, out)
                        }),
                    }
                    start = end;
                }
            }
            cache.cuts = cuts;
        });
    }

    /// Appends the cached ids of `text`; else appends them with `make` and
    /// caches them (unless `text` is longer than [`MAX_CACHED_WORD`]).
    fn cached_or(
        &self,
        text: &str,
        cache: &mut WordCache,
        out: &mut Vec<u32>,
        make: impl FnOnce(&mut WordCache, &mut Vec<u32>),
    ) {
        if cache.push_cached(text, out) {
            return;
        }
        let before = out.len();
        make(cache, out);
        if text.len() <= MAX_CACHED_WORD {
            cache.insert(text, &out[before..]);
        }
    }

    /// Sets `cuts` to where a word can be cut: between every two characters
    /// that no mergeable piece has side by side (see [`SpmModel::joined`]).
    /// Text without spaces (Chinese, Japanese, Thai) is one long word, rarely
    /// seen twice; its parts are short and repeat, so they come from the cache
    /// instead of a merge heap over the whole word. A new word of a few letters
    /// is often a seen part and a letter or two (a number, a new inflection):
    /// cutting every word, not only long ones, was 6% faster on multilingual
    /// text and 9% on English, encoded cold.
    fn joined_cuts(&self, word: &str, cuts: &mut Vec<usize>) {
        cuts.clear();
        let mut chars = word.char_indices();
        let Some((_, mut prev)) = chars.next() else {
            return;
        };
        let mut followed = self.chars.has(prev, FOLLOWED);
        for (i, c) in chars {
            // Only a character that some piece has after another can be joined
            // to the one before: most pairs are ruled out without hashing.
            let info = self.chars.get(c);
            let joined = followed
                && info.flags & PRECEDED != 0
                && self.joined.contains(&char_pair_key(prev, c));
            if !joined {
                cuts.push(i);
            }
            prev = c;
            followed = info.flags & FOLLOWED != 0;
        }
    }

    /// Steps 2–4 of the module header on `text`, appending ids to `out`.
    fn merge_and_emit(&self, text: &str, scratch: &mut Scratch, out: &mut Vec<u32>) {
        let mut splits = Splits::default();
        self.split_into_symbols(text, &mut scratch.symbols);
        self.merge(text, scratch, &mut splits);
        let mut i = if scratch.symbols.is_empty() { -1 } else { 0 };
        while i >= 0 {
            let s = scratch.symbols[i as usize];
            self.emit_symbol(text, s.start..s.end, s.id, &splits, out);
            i = s.next;
        }
    }

    /// Appends the id(s) of the final symbol `text[at]` whose mergeable id is
    /// `id` ([`NO_ID`] for none).
    #[inline]
    fn emit_symbol(
        &self,
        text: &str,
        at: Range<u32>,
        id: u32,
        splits: &Splits,
        out: &mut Vec<u32>,
    ) {
        // A NORMAL piece is its own id, unless a reserved piece shadows it.
        if id != NO_ID && self.emits_itself[id as usize] {
            out.push(id);
        } else {
            self.emit(&text[at.start as usize..at.end as usize], splits, out);
        }
    }

    /// For a `part` of one character, its mergeable id ([`NO_ID`] for none);
    /// `None` for longer parts and when there are user-defined symbols.
    fn lone_char(&self, part: &str) -> Option<u32> {
        if part.len() > 4 || self.user_defined.is_some() {
            return None;
        }
        let (len, id) = self.char_symbol(part);
        (len == part.len()).then_some(id)
    }

    /// The first character of `text`: its length and its mergeable id.
    fn char_symbol(&self, text: &str) -> (usize, u32) {
        let c = char_at(text, 0);
        (c.len_utf8(), self.chars.get(c).id)
    }

    /// One symbol per character, or per user-defined piece where one starts.
    fn split_into_symbols(&self, text: &str, symbols: &mut Vec<Symbol>) {
        symbols.clear();
        let mut at = 0;
        while at < text.len() {
            let rest = &text[at..];
            let user = self
                .user_defined
                .as_ref()
                .and_then(|m| m.longest_prefix(rest.as_bytes()));
            let (len, id) = match user {
                Some(len) => (len, NO_ID),
                None => self.char_symbol(rest),
            };
            let index = symbols.len() as i32;
            let next = if at + len < text.len() { index + 1 } else { -1 };
            symbols.push(Symbol {
                start: at as u32,
                end: (at + len) as u32,
                prev: index - 1,
                next,
                frozen: user.is_some(),
                id,
            });
            at += len;
        }
    }

    /// The merge loop: best candidate first.
    fn merge<'t>(&self, text: &'t str, scratch: &mut Scratch, splits: &mut Splits<'t>) {
        let symbols = &mut scratch.symbols;
        // Ask for every first pair's slot before looking any up, so that their
        // cache misses overlap instead of coming one after another.
        for pair in symbols.windows(2) {
            if pair[0].id != NO_ID && pair[1].id != NO_ID {
                self.pairs.prefetch(pair[0].id);
            }
        }
        if symbols.is_empty() {
            return;
        }
        if symbols.len() <= SMALL && !self.has_unused {
            return self.merge_small(text, symbols);
        }
        self.merge_heap(text, scratch, splits);
    }

    /// The merge loop with a heap of candidates, stale ones skipped.
    fn merge_heap<'t>(&self, text: &'t str, scratch: &mut Scratch, splits: &mut Splits<'t>) {
        let Scratch { symbols, heap } = scratch;
        heap.clear();
        for i in 1..symbols.len() {
            self.push_pair(text, symbols, i as i32 - 1, i as i32, heap, splits);
        }
        while let Some(top) = heap.pop() {
            let (l, r) = (symbols[top.left as usize], symbols[top.right as usize]);
            let (l_len, r_len) = (l.end - l.start, r.end - r.start);
            if l_len == 0 || r_len == 0 || l_len + r_len != top.len {
                continue;
            }
            symbols[top.left as usize].end = r.end;
            symbols[top.left as usize].next = r.next;
            symbols[top.left as usize].id = top.id;
            if r.next >= 0 {
                symbols[r.next as usize].prev = top.left as i32;
            }
            symbols[top.right as usize].end = r.start; // now empty
            self.push_pair(text, symbols, l.prev, top.left as i32, heap, splits);
            self.push_pair(text, symbols, top.left as i32, r.next, heap, splits);
        }
    }

    /// [`SpmModel::merge`] for a few symbols (most words): the best pair is found
    /// by looking at each, which for so few costs less than keeping a heap.
    /// The same merges: highest score first, the leftmost of equal ones.
    fn merge_small(&self, text: &str, symbols: &mut [Symbol]) {
        // The candidate pair that starts at each symbol, as one number that is
        // larger for a better pair (see `rank`), 0 for none; and its piece.
        let mut ranks = [0u64; SMALL];
        let mut made = [NO_ID; SMALL];
        let candidate = |symbols: &[Symbol], left: usize| -> (u64, u32) {
            let right = symbols[left].next;
            match self.pair_of(text, symbols, left as i32, right) {
                Some((id, score)) => (rank(score, left), id),
                None => (0, NO_ID),
            }
        };
        let n = symbols.len();
        for i in 0..n {
            (ranks[i], made[i]) = candidate(symbols, i);
        }
        loop {
            // The largest rank, without a branch per candidate.
            let (mut best, mut left) = (0u64, 0usize);
            for (i, &r) in ranks.iter().enumerate() {
                if r > best {
                    (best, left) = (r, i);
                }
            }
            if best == 0 {
                return;
            }
            let right = symbols[left].next as usize;
            let r = symbols[right];
            symbols[left].end = r.end;
            symbols[left].next = r.next;
            symbols[left].id = made[left];
            if r.next >= 0 {
                symbols[r.next as usize].prev = left as i32;
            }
            symbols[right].end = r.start; // now empty
            ranks[right] = 0;
            (ranks[left], made[left]) = candidate(symbols, left);
            let prev = symbols[left].prev;
            if prev >= 0 {
                (ranks[prev as usize], made[prev as usize]) = candidate(symbols, prev as usize);
            }
        }
    }

    /// The piece that the pair (`left`, `right`) makes, and its score, if any.
    fn pair_of(&self, text: &str, symbols: &[Symbol], left: i32, right: i32) -> Option<(u32, f32)> {
        if left < 0 || right < 0 {
            return None;
        }
        let (l, r) = (symbols[left as usize], symbols[right as usize]);
        if l.frozen || r.frozen {
            return None;
        }
        // Two pieces: one integer lookup; else the string itself.
        if l.id != NO_ID && r.id != NO_ID {
            self.pairs.get(l.id, r.id)
        } else {
            let id = self.mergeable.get(&text[l.start as usize..r.end as usize]);
            id.map(|&id| (id, self.entries[id as usize].score))
        }
    }

    /// Queues the pair (`left`, `right`) if their concatenation is mergeable.
    fn push_pair<'t>(
        &self,
        text: &'t str,
        symbols: &[Symbol],
        left: i32,
        right: i32,
        heap: &mut BinaryHeap<Candidate>,
        splits: &mut Splits<'t>,
    ) {
        let Some((id, score)) = self.pair_of(text, symbols, left, right) else {
            return;
        };
        let (l, r) = (symbols[left as usize], symbols[right as usize]);
        let len = r.end - l.start;
        heap.push(Candidate {
            score,
            left: left as u32,
            right: right as u32,
            len,
            id,
        });
        if self.has_unused && self.kind(id) == PieceType::Unused {
            let halves = (
                &text[l.start as usize..l.end as usize],
                &text[r.start as usize..r.end as usize],
            );
            splits.insert(&text[l.start as usize..r.end as usize], halves);
        }
    }

    /// Appends the id(s) of one final symbol: UNUSED pieces split back,
    /// unknown characters as bytes when the model falls back to bytes.
    fn emit(&self, piece: &str, splits: &Splits, out: &mut Vec<u32>) {
        let id = self.piece_to_id(piece);
        match self.kind(id) {
            PieceType::Unused => match splits.get(piece) {
                Some(&(left, right)) => {
                    self.emit(left, splits, out);
                    self.emit(right, splits, out);
                }
                None => out.push(id),
            },
            PieceType::Unknown => match &self.byte_ids {
                Some(bytes) => out.extend(piece.bytes().map(|b| bytes[b as usize])),
                None => out.push(id),
            },
            _ => out.push(id),
        }
    }
}

#[cfg(test)]
impl SpmModel {
    /// The parts [`SpmModel::joined_cuts`] cuts `word` into; `None` for no cut.
    pub(super) fn joined_parts<'w>(&self, word: &'w str) -> Option<Vec<&'w str>> {
        let mut cuts = Vec::new();
        self.joined_cuts(word, &mut cuts);
        if cuts.is_empty() {
            return None;
        }
        let ends = cuts.iter().copied().chain([word.len()]);
        let starts = [0].into_iter().chain(cuts.iter().copied());
        Some(starts.zip(ends).map(|(s, e)| &word[s..e]).collect())
    }

    /// The final symbols' ids of `text` (already normalized) merged by the
    /// small-word loop and by the heap: (small, heap).
    pub(super) fn merged_both_ways(&self, text: &str) -> (Vec<u32>, Vec<u32>) {
        let mut ways = [Vec::new(), Vec::new()];
        for (heap, ids) in ways.iter_mut().enumerate() {
            let mut scratch = Scratch::default();
            self.split_into_symbols(text, &mut scratch.symbols);
            if heap == 1 {
                self.merge_heap(text, &mut scratch, &mut Splits::default());
            } else {
                self.merge_small(text, &mut scratch.symbols);
            }
            let mut i = 0;
            while i >= 0 && !scratch.symbols.is_empty() {
                ids.push(scratch.symbols[i as usize].id);
                i = scratch.symbols[i as usize].next;
            }
        }
        let [small, heap] = ways;
        (small, heap)
    }

    /// The ids of `text` merged as one piece of text, no words, no cache: what
    /// sentencepiece does, and what the cached path must equal.
    pub(super) fn encode_uncached(&self, text: &str) -> Vec<u32> {
        let normalized = self.normalizer.normalize(text);
        let mut out = Vec::new();
        self.merge_and_emit(&normalized, &mut Scratch::default(), &mut out);
        if self.byte_ids.is_none() {
            collapse_unknown_runs(&mut out, 0, self.unk_id);
        }
        out
    }
}

/// The character that ends at byte `end` (> 0) of `text`.
#[inline]
fn char_before(text: &str, end: usize) -> char {
    match text.as_bytes()[end - 1] {
        b if b < 0x80 => char::from(b),
        _ => text[..end].chars().next_back().expect("end > 0"),
    }
}

/// The character that starts at byte `at` (< its length) of `text`.
#[inline]
fn char_at(text: &str, at: usize) -> char {
    match text.as_bytes()[at] {
        b if b < 0x80 => char::from(b),
        _ => text[at..].chars().next().expect("at < len"),
    }
}

/// Without byte fallback sentencepiece reports a run of unknown pieces as one.
fn collapse_unknown_runs(ids: &mut Vec<u32>, start: usize, unk: u32) {
    let mut write = start;
    for read in start..ids.len() {
        if ids[read] == unk && write > start && ids[write - 1] == unk {
            continue;
        }
        ids[write] = ids[read];
        write += 1;
    }
    ids.truncate(write);
}

pub(super) fn no_control(what: &str) -> SpmError {
    SpmError::Invalid(format!("the model has no {what} control piece"))
}
