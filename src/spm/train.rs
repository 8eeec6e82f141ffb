//! Training a SentencePiece BPE model compatibly with sentencepiece's trainer
//! (`spm_train --model_type=bpe`): same pieces in the same order, same scores and
//! types, for the same corpus and options.
//!
//! sentencepiece keeps every sentence in memory and counts on one thread. We read
//! the files in blocks and count *distinct words* on `num_threads` threads —
//! which is all its BPE trainer looks at: it splits the normalized sentences at
//! `▁` and merges the words' counts before learning. The steps, as it does them:
//! 1. lines: empty ones, ones longer than `max_sentence_length` bytes and ones
//!    holding `▅` (its own marker for unknown characters) are skipped;
//! 2. normalize each line; the text of every reserved piece (`<unk>`, `<s>`, byte
//!    pieces, control and user-defined symbols) becomes a boundary (U+001F);
//! 3. split at `▁` into words (or keep whole lines, `split_by_whitespace=false`);
//! 4. the alphabet: the most frequent characters until `character_coverage` of
//!    all characters is covered; the others become `▅`, never part of a piece;
//! 5. learn pieces ([`super::train_merge`]) and list them after the reserved
//!    pieces, then the alphabet by frequency; a piece's score is minus its rank.

use std::sync::Mutex;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::normalizer::{marks, positions, Normalizer, PrefixMatcher, SPACE_SYMBOL};
use super::proto::{ModelProto, NormalizerSpec, Piece, PieceType, TrainerSpec, BPE};
use super::train_merge::{learn_pieces, on_threads, Validity, BOUNDARY_CHAR, SPACE, UNK_CHAR};
use super::wire::{Field, Message, Value};
use crate::io::blocks::{
    for_each_block, for_each_part, open_input, BlockReader, Input, ReadError, Utf8Errors,
    BLOCK_BYTES,
};
use crate::io::chunking::TextCuts;
use crate::io::worker_pool;
use crate::packed::{packed, unpacked, Tally, MAX_PACKED};
use crate::pretok::SpecialMatcher;

/// sentencepiece's training options (same names, same meanings).
#[derive(Debug, Clone)]
pub struct TrainOptions {
    pub vocab_size: usize,
    pub character_coverage: f32,
    pub byte_fallback: bool,
    /// `name` and `precompiled_charsmap` (empty for identity); the whitespace
    /// flags below override the spec's.
    pub normalizer: NormalizerSpec,
    pub add_dummy_prefix: bool,
    pub remove_extra_whitespaces: bool,
    pub validity: Validity,
    pub user_defined_symbols: Vec<String>,
    pub control_symbols: Vec<String>,
    pub unk_id: i32,
    pub bos_id: i32,
    pub eos_id: i32,
    pub pad_id: i32,
    pub unk_piece: String,
    pub bos_piece: String,
    pub eos_piece: String,
    pub pad_piece: String,
    pub max_sentence_length: usize,
    /// The first this many sentences only (0: all), as sentencepiece with
    /// `shuffle_input_sentence=false`.
    pub input_sentence_size: u64,
    pub num_threads: usize,
}

impl TrainOptions {
    /// sentencepiece's defaults with identity normalization.
    pub fn new(vocab_size: usize) -> TrainOptions {
        TrainOptions {
            vocab_size,
            character_coverage: 0.9995,
            byte_fallback: false,
            normalizer: identity_spec(),
            add_dummy_prefix: true,
            remove_extra_whitespaces: true,
            validity: Validity::default(),
            user_defined_symbols: Vec::new(),
            control_symbols: Vec::new(),
            unk_id: 0,
            bos_id: 1,
            eos_id: 2,
            pad_id: -1,
            unk_piece: "<unk>".into(),
            bos_piece: "<s>".into(),
            eos_piece: "</s>".into(),
            pad_piece: "<pad>".into(),
            max_sentence_length: 4192,
            input_sentence_size: 0,
            num_threads: 1,
        }
    }
}

/// The normalizer spec of `normalization_rule_name="identity"`.
pub fn identity_spec() -> NormalizerSpec {
    let mut m = Message::default();
    m.set(1, Value::Bytes(b"identity".to_vec()));
    NormalizerSpec(m)
}

/// The reserved pieces by id: special pieces, then control and user-defined
/// symbols and byte pieces in the lowest free ids (sentencepiece's `InitMetaPieces`).
fn meta_pieces(o: &TrainOptions) -> Result<Vec<Option<(String, PieceType)>>, String> {
    let mut slots: Vec<Option<(String, PieceType)>> = vec![None; o.vocab_size];
    let specials = [
        (o.unk_id, &o.unk_piece, "unk_id"),
        (o.bos_id, &o.bos_piece, "bos_id"),
        (o.eos_id, &o.eos_piece, "eos_id"),
        (o.pad_id, &o.pad_piece, "pad_id"),
    ];
    if o.unk_id < 0 {
        return Err("unk_id must be set (>= 0): sentencepiece requires <unk>".into());
    }
    for (id, piece, name) in specials {
        if id < 0 {
            continue;
        }
        let slot = slots.get_mut(id as usize).ok_or_else(|| {
            format!(
                "{name}={id} is outside the vocabulary (vocab_size={})",
                o.vocab_size
            )
        })?;
        if slot.is_some() {
            return Err(format!(
                "{name}={id} is already the id of another special piece"
            ));
        }
        let kind = if id == o.unk_id {
            PieceType::Unknown
        } else if *piece == o.unk_piece {
            return Err(format!("{name}: the piece {piece:?} is already <unk>'s"));
        } else {
            PieceType::Control
        };
        *slot = Some((piece.clone(), kind));
    }
    let bytes: Vec<String> = if o.byte_fallback {
        (0..=255u8).map(|b| format!("<0x{b:02X}>")).collect()
    } else {
        Vec::new()
    };
    let symbols = (o.control_symbols.iter().map(|s| (s, PieceType::Control)))
        .chain(
            o.user_defined_symbols
                .iter()
                .map(|s| (s, PieceType::UserDefined)),
        )
        .chain(bytes.iter().map(|s| (s, PieceType::Byte)));
    let mut seen = std::collections::HashSet::new();
    let mut free = 0;
    for (w, kind) in symbols {
        if !seen.insert(w.as_str()) {
            return Err(format!("{w:?} is defined twice among the reserved symbols"));
        }
        if *w == o.unk_piece {
            return Err(format!(
                "{w:?} is <unk>: it cannot be a control or user-defined symbol"
            ));
        }
        let special = [
            (o.bos_id, &o.bos_piece),
            (o.eos_id, &o.eos_piece),
            (o.pad_id, &o.pad_piece),
        ]
        .into_iter()
        .find(|(id, p)| *id >= 0 && *p == w);
        if let Some((id, _)) = special {
            if let Some(slot) = &mut slots[id as usize] {
                slot.1 = kind;
            }
            continue;
        }
        while free < slots.len() && slots[free].is_some() {
            free += 1;
        }
        if free == slots.len() {
            return Err(format!(
                "vocab_size={} is too small for the reserved pieces",
                o.vocab_size
            ));
        }
        slots[free] = Some((w.clone(), kind));
    }
    Ok(slots)
}

/// Lines → normalized words and their counts.
struct WordCounter {
    opts: TrainOptions,
    normalizer: Normalizer,
    reserved: Option<PrefixMatcher>,
    /// Words can be cut from the line itself ([`WordCounter::add_plain_line`]).
    plain: bool,
    /// When `plain`: the first bytes of the reserved pieces, `▁` and `▅`, if at
    /// most three (see [`WordCounter::add_text`]).
    suspects: Option<Vec<u8>>,
}

type Counts = FxHashMap<String, u64>;

/// Words and counts while a corpus is read. A word is keyed without its
/// whitespace mark (the `▁` it starts with, or ends with as a suffix), which
/// one bit of the key stands for: then words of up to 15 bytes besides the
/// mark, nearly all, pack into one integer that hashes and compares without a
/// loop or memcmp (String keys made memcmp a sixth of training time), counted
/// as the pre-token counter counts them ([`Tally`]).
#[derive(Default)]
struct WordCounts {
    small: Tally,
    long: FxHashMap<Box<str>, u64>,
}

/// The key bit of a word's whitespace mark (clear of [`packed`]'s length byte).
const MARKED: u128 = 1 << 127;

impl WordCounts {
    /// Counts the word `text[start..end]` once.
    fn add(&mut self, text: &str, start: usize, end: usize, suffix: bool) {
        let mark = SPACE.len_utf8();
        let word = &text.as_bytes()[start..end];
        let (bare_start, bare_end, marked) = if !suffix && word.starts_with(SPACE_BYTES) {
            (start + mark, end, true)
        } else if suffix && word.ends_with(SPACE_BYTES) {
            (start, end - mark, true)
        } else {
            (start, end, false)
        };
        if bare_end - bare_start <= MAX_PACKED {
            self.add_short(text, bare_start, bare_end, marked);
        } else {
            self.add_long(&text[start..end]);
        }
    }

    /// Counts `text[start..end]` (at most [`MAX_PACKED`] bytes), with the
    /// whitespace mark if `marked`, once.
    #[inline]
    fn add_short(&mut self, text: &str, start: usize, end: usize, marked: bool) {
        let key = packed(text.as_bytes(), start, end) | if marked { MARKED } else { 0 };
        self.small.add(key);
    }

    fn add_long(&mut self, word: &str) {
        match self.long.get_mut(word) {
            Some(n) => *n += 1,
            None => {
                self.long.insert(word.into(), 1);
            }
        }
    }

    fn absorb(&mut self, other: WordCounts) {
        self.small.absorb(other.small);
        for (word, n) in other.long {
            *self.long.entry(word).or_insert(0) += n;
        }
    }

    /// The words, marks put back, one after another.
    fn into_list(self, suffix: bool) -> WordList {
        let counts = self.small.into_counts();
        let mut list = WordList::default();
        list.ends.reserve(counts.len() + self.long.len());
        list.counts.reserve(counts.len() + self.long.len());
        for (key, n) in counts.iter() {
            let bytes = unpacked(key & !MARKED);
            let bare = std::str::from_utf8(&bytes).expect("cut at character boundaries");
            match (key & MARKED != 0, suffix) {
                (false, _) => list.push(&[bare], n),
                (true, false) => list.push(&[SPACE_SYMBOL, bare], n),
                (true, true) => list.push(&[bare, SPACE_SYMBOL], n),
            }
        }
        for (word, n) in self.long {
            list.push(&[&word], n);
        }
        list
    }
}

/// Distinct words and their counts, the words' text one after another: passes
/// over a million words read memory in order (a `String` each scattered them
/// over the heap, and making and freeing them was a tenth of training).
#[derive(Debug, Default)]
struct WordList {
    text: String,
    ends: Vec<usize>,
    counts: Vec<u64>,
}

impl WordList {
    /// Adds the word spelled by `parts`, counted `n` times.
    fn push(&mut self, parts: &[&str], n: u64) {
        for part in parts {
            self.text.push_str(part);
        }
        self.ends.push(self.text.len());
        self.counts.push(n);
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn word(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.text[start..self.ends[i]]
    }

    fn iter(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        (0..self.len()).map(|i| (self.word(i), self.counts[i]))
    }

    /// The words in sentencepiece's order (see [`sort_words`]).
    #[cfg(test)]
    fn sorted(&self, threads: usize) -> Vec<(&str, u64)> {
        sort_words(self.iter().collect(), worker_pool(threads).as_ref())
    }
}

/// Distinct words in sentencepiece's order: count descending, then the word,
/// sorted on `pool`'s threads if any (the words are distinct: one order, whatever
/// the threads).
fn sort_words<'w>(
    words: Vec<(&'w str, u64)>,
    pool: Option<&rayon::ThreadPool>,
) -> Vec<(&'w str, u64)> {
    // The first 16 bytes, big-endian, order words as their bytes do: nearly all
    // comparisons of equal counts end there without a call to memcmp. (With 8
    // bytes, `▁` and five letters, memcmp took as many samples as the sort itself.)
    let prefix = |w: &str| {
        let mut buf = [0u8; 16];
        let n = w.len().min(16);
        buf[..n].copy_from_slice(&w.as_bytes()[..n]);
        u128::from_be_bytes(buf)
    };
    let mut keyed: Vec<(std::cmp::Reverse<u64>, u128, &str)> = words
        .into_iter()
        .map(|(w, n)| (std::cmp::Reverse(n), prefix(w), w))
        .collect();
    match pool {
        Some(pool) => pool.install(|| keyed.par_sort_unstable()),
        None => keyed.sort_unstable(),
    }
    keyed.into_iter().map(|(n, _, w)| (w, n.0)).collect()
}

const SPACE_BYTES: &[u8] = SPACE_SYMBOL.as_bytes();

/// Parts per thread a block of lines is cut into: a few keep the threads busy when
/// parts differ in cost.
const PARTS_PER_THREAD: usize = 4;

impl WordCounter {
    fn new(opts: TrainOptions, normalizer: Normalizer, reserved: &[&str], plain: bool) -> Self {
        let mut suspects: Vec<u8> = reserved.iter().filter_map(|p| p.bytes().next()).collect();
        let mut unk = [0u8; 4];
        suspects.extend([SPACE_BYTES[0], UNK_CHAR.encode_utf8(&mut unk).as_bytes()[0]]);
        suspects.sort_unstable();
        suspects.dedup();
        WordCounter {
            opts,
            normalizer,
            reserved: PrefixMatcher::new(reserved),
            plain,
            suspects: (plain && suspects.len() <= 3).then_some(suspects),
        }
    }

    /// Whether a line is neither empty nor longer than `max_sentence_length`
    /// (sentencepiece skips those).
    fn fits(&self, line: &str) -> bool {
        !line.is_empty() && line.len() <= self.opts.max_sentence_length
    }

    /// Counts the words of one line into `counts`; false if the line is skipped.
    fn add_line(&self, line: &str, counts: &mut WordCounts) -> bool {
        if !self.fits(line) || line.contains(UNK_CHAR) {
            return false;
        }
        if self.plain && self.add_plain_line(line, counts) {
            return true;
        }
        let mut text = self.normalizer.normalize(line);
        if let Some(m) = self.reserved.as_ref().filter(|m| m.find(&text).is_some()) {
            text = replace_all(m, &text);
        }
        if text.is_empty() {
            return true;
        }
        let suffix = self.opts.validity.treat_whitespace_as_suffix;
        if !self.opts.validity.split_by_whitespace {
            counts.add(&text, 0, text.len(), suffix);
            return true;
        }
        for_each_word(&text, suffix, |start, end| {
            counts.add(&text, start, end, suffix)
        });
        true
    }

    /// [`WordCounter::add_line`] for the `identity` normalizer (Llama's and
    /// Mistral's): the normalized text would be the line with its spaces as
    /// `▁`, so the words are the runs between spaces, counted straight from the
    /// line. False (nothing counted) when the line holds a reserved piece or a
    /// `▁` of its own (which would also start a word): those take the general path.
    fn add_plain_line(&self, line: &str, counts: &mut WordCounts) -> bool {
        if self
            .reserved
            .as_ref()
            .is_some_and(|m| m.find(line).is_some())
            || has_mark(line)
        {
            return false;
        }
        self.add_plain_words(line, counts);
        true
    }

    /// The words of a line with no reserved piece and no `▁` (see
    /// [`WordCounter::add_plain_line`]).
    fn add_plain_words(&self, line: &str, counts: &mut WordCounts) {
        let remove_extra = self.normalizer.remove_extra_whitespaces();
        // The first word has the mark only from the dummy prefix.
        let mut marked = self.normalizer.add_dummy_prefix();
        let mut start = 0;
        let ends = positions(b' ', line.as_bytes()).chain([line.len()]);
        for end in ends {
            // An empty run is the mark alone: a word unless extra spaces go.
            let keep = if remove_extra {
                end > start
            } else {
                marked || end > start
            };
            if keep {
                if end - start <= MAX_PACKED {
                    counts.add_short(line, start, end, marked);
                } else if marked {
                    counts.add_long(&format!("{SPACE}{}", &line[start..end]));
                } else {
                    counts.add_long(&line[start..end]);
                }
                marked = true;
            } else if !remove_extra {
                marked = true;
            }
            start = end + 1;
        }
    }

    /// Counts the words of every line of `text`.
    fn add_text(&self, text: &str, counts: &mut WordCounts) {
        let Some(suspects) = &self.suspects else {
            for line in text.split_terminator('\n') {
                self.add_line(line, counts);
            }
            return;
        };
        // One pass over the whole text for the bytes that may start a reserved
        // piece, `▁` or `▅`: lines without any are plain, and skip add_line's
        // three searches of their own.
        let bytes = text.as_bytes();
        let find_suspect = |from: usize| {
            let found = match suspects[..] {
                [a] => memchr::memchr(a, &bytes[from..]),
                [a, b] => memchr::memchr2(a, b, &bytes[from..]),
                [a, b, c] => memchr::memchr3(a, b, c, &bytes[from..]),
                _ => unreachable!("at most three suspect bytes"),
            };
            found.map_or(bytes.len(), |i| from + i)
        };
        let mut suspect = find_suspect(0);
        let mut start = 0;
        while start < bytes.len() {
            let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |i| start + i);
            let line = &text[start..end];
            if suspect < end {
                self.add_line(line, counts);
            } else if self.fits(line) {
                self.add_plain_words(line, counts);
            }
            start = end + 1;
            if suspect < start && start < bytes.len() {
                suspect = find_suspect(start);
            }
        }
    }
}

/// Every reserved piece's text in `text` becomes the boundary (leftmost,
/// longest first, as sentencepiece's `PrefixMatcher::GlobalReplace`).
fn replace_all(m: &PrefixMatcher, text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some((start, end)) = m.find(rest) {
        out.push_str(&rest[..start]);
        out.push(BOUNDARY_CHAR);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

fn has_mark(text: &str) -> bool {
    marks(text.as_bytes(), SPACE_BYTES).next().is_some()
}

/// Calls `f` with the byte range of each word of `text` as sentencepiece's
/// trainer splits them: each `▁` starts a word (ends one, with
/// `treat_whitespace_as_suffix`).
fn for_each_word(text: &str, suffix: bool, mut f: impl FnMut(usize, usize)) {
    let mut start = 0;
    for i in marks(text.as_bytes(), SPACE_BYTES) {
        if suffix {
            let end = i + SPACE_BYTES.len();
            f(start, end);
            start = end;
        } else if i > start {
            f(start, i);
            start = i;
        }
    }
    if start < text.len() {
        f(start, text.len());
    }
}

/// The words of `text` (see [`for_each_word`]).
#[cfg(test)]
fn split_words(text: &str, suffix: bool) -> Vec<&str> {
    let mut words = Vec::new();
    for_each_word(text, suffix, |start, end| words.push(&text[start..end]));
    words
}

/// Why training failed.
#[derive(Debug)]
pub enum TrainError {
    Read { path: String, error: ReadError },
    Invalid(String),
    Interrupted,
}

impl std::fmt::Display for TrainError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TrainError::Read { path, error } => write!(f, "{path}: {error}"),
            TrainError::Invalid(why) => f.write_str(why),
            TrainError::Interrupted => f.write_str("interrupted"),
        }
    }
}

impl std::error::Error for TrainError {}

/// What training reports as it goes: bytes read so far, then pieces learned so far.
pub trait TrainProgress: Sync {
    fn bytes_read(&self, _n: u64) -> bool {
        true
    }
    fn pieces(&self, _n: usize) -> bool {
        true
    }
}

impl TrainProgress for () {}

/// Trains a model on the lines of `paths` (a [`Trainer`] fed those files).
pub fn train_files(
    paths: &[String],
    opts: &TrainOptions,
    progress: &dyn TrainProgress,
) -> Result<ModelProto, TrainError> {
    let mut trainer = Trainer::new(opts.clone())?;
    let mut read = 0;
    for path in paths {
        let base = read;
        let input = open_input(path).map_err(|error| TrainError::Read {
            path: path.clone(),
            error,
        })?;
        let report = |n| progress.bytes_read(base + n);
        read += trainer.add_file(path, input, Utf8Errors::Strict, &report)?;
    }
    trainer.train(paths, progress)
}

/// Training fed as the corpus is read: files (read here, in blocks) and texts
/// (documents from elsewhere: compressed files, records, stdin), in any order and
/// any number, then [`Trainer::train`] once. Memory holds the distinct words, not
/// the corpus. A sentence is a line; the end of a text ends its last line.
pub struct Trainer {
    counter: WordCounter,
    slots: Vec<Option<(String, PieceType)>>,
    /// All counts, when sentences are taken in order (`input_sentence_size`).
    total: WordCounts,
    /// Each thread counts into its own table, merged once at the end.
    per_thread: Vec<Mutex<WordCounts>>,
    /// Sentences taken so far (counted only with `input_sentence_size`).
    taken: u64,
}

impl Trainer {
    pub fn new(opts: TrainOptions) -> Result<Trainer, TrainError> {
        let slots = meta_pieces(&opts).map_err(TrainError::Invalid)?;
        let spec = whitespace_spec(&opts);
        let normalizer = Normalizer::new(&spec, opts.validity.treat_whitespace_as_suffix, None)
            .map_err(TrainError::Invalid)?;
        let reserved: Vec<&str> = slots.iter().flatten().map(|(p, _)| p.as_str()).collect();
        let v = &opts.validity;
        let plain = normalizer.is_plain()
            && v.split_by_whitespace
            && !v.treat_whitespace_as_suffix
            && !reserved.iter().any(|p| p.contains([' ', SPACE]));
        let threads = opts.num_threads.max(1);
        let counter = WordCounter::new(opts, normalizer, &reserved, plain);
        Ok(Trainer {
            counter,
            slots,
            total: WordCounts::default(),
            per_thread: (0..threads).map(|_| Mutex::default()).collect(),
            taken: 0,
        })
    }

    /// Whether the first `input_sentence_size` sentences are all taken: what is
    /// added from now on is ignored.
    pub fn is_full(&self) -> bool {
        let limit = self.counter.opts.input_sentence_size;
        limit > 0 && self.taken >= limit
    }

    /// A pool made for one call: a pool kept in the trainer would have no threads
    /// in a forked child, which would then wait for them forever.
    fn pool(&self) -> Result<rayon::ThreadPool, TrainError> {
        let n = self.per_thread.len();
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .map_err(|e| TrainError::Invalid(format!("cannot start {n} threads: {e}")))
    }

    /// Counts the lines of the file at `path`, read in blocks, reporting the bytes
    /// of it read so far; returns how many bytes were read (fewer than the file
    /// holds once `input_sentence_size` sentences are taken).
    pub fn add_file(
        &mut self,
        path: &str,
        input: Input,
        errors: Utf8Errors,
        progress: &dyn Fn(u64) -> bool,
    ) -> Result<u64, TrainError> {
        if self.is_full() {
            return Ok(0);
        }
        let no_specials = SpecialMatcher::new(&[]).map_err(TrainError::Invalid)?;
        let pool = self.pool()?;
        let mut read: u64 = 0;
        let mut stopped = false;
        let mut report = |end: u64| {
            read = end;
            if progress(end) {
                Ok(())
            } else {
                stopped = true;
                Err(ReadError::Interrupted)
            }
        };
        let result = if self.counter.opts.input_sentence_size == 0 {
            // Every line counts, in any order: the pool counts a block while this
            // thread reads the next.
            let (counter, per_thread) = (&self.counter, &self.per_thread);
            let parts = pool.current_num_threads() * PARTS_PER_THREAD;
            {
                for_each_part(
                    BlockReader::new(input),
                    &no_specials,
                    TextCuts::Newlines,
                    errors,
                    BLOCK_BYTES,
                    &pool,
                    |text| line_ends(text, parts),
                    |part| {
                        let i = rayon::current_thread_index().unwrap_or(0);
                        let mut counts = per_thread[i].lock().unwrap_or_else(|e| e.into_inner());
                        counter.add_text(part, &mut counts);
                        Ok(())
                    },
                    &mut report,
                )
            }
        } else {
            // The first `input_sentence_size` sentences, in order.
            let mut at = 0;
            for_each_block(
                BlockReader::new(input),
                &no_specials,
                TextCuts::Newlines,
                errors,
                BLOCK_BYTES,
                |text, _| {
                    if self.is_full() {
                        return Err(ReadError::Interrupted);
                    }
                    self.add_lines(&[text], &pool);
                    at += text.len() as u64;
                    report(at)
                },
            )
        };
        match result {
            Ok(()) => Ok(read),
            Err(ReadError::Interrupted) if !stopped => Ok(read),
            Err(ReadError::Interrupted) => Err(TrainError::Interrupted),
            Err(error) => Err(TrainError::Read {
                path: path.to_string(),
                error,
            }),
        }
    }

    /// Counts the lines of each text (the end of a text ends a line).
    pub fn add_texts(&mut self, texts: &[&str]) -> Result<(), TrainError> {
        let pool = self.pool()?;
        self.add_lines(texts, &pool);
        Ok(())
    }

    fn add_lines(&mut self, texts: &[&str], pool: &rayon::ThreadPool) {
        let counter = &self.counter;
        let limit = counter.opts.input_sentence_size;
        if limit > 0 {
            // The first `input_sentence_size` sentences: in order, on this thread.
            for line in texts.iter().flat_map(|t| t.split_terminator('\n')) {
                if self.taken >= limit {
                    return;
                }
                self.taken += u64::from(counter.add_line(line, &mut self.total));
            }
            return;
        }
        // A few parts per thread: long texts cut at lines, short ones whole.
        let step = texts.iter().map(|t| t.len()).sum::<usize>()
            / (pool.current_num_threads() * PARTS_PER_THREAD);
        let parts: Vec<&str> = (texts.iter())
            .flat_map(|t| split_at_lines(t, t.len().div_ceil(step.max(1))))
            .collect();
        let per_thread = &self.per_thread;
        pool.install(|| {
            parts.par_iter().for_each(|part| {
                let i = rayon::current_thread_index().unwrap_or(0);
                let mut counts = per_thread[i].lock().unwrap_or_else(|e| e.into_inner());
                counter.add_text(part, &mut counts);
            })
        });
    }

    /// Learns the model from the words counted; `inputs` name what was read (the
    /// trainer spec's `input`, as sentencepiece records its files).
    pub fn train(
        self,
        inputs: &[String],
        progress: &dyn TrainProgress,
    ) -> Result<ModelProto, TrainError> {
        let Trainer {
            counter,
            slots,
            mut total,
            per_thread,
            ..
        } = self;
        for counts in per_thread {
            total.absorb(counts.into_inner().unwrap_or_else(|e| e.into_inner()));
        }
        let opts = counter.opts;
        let words = total.into_list(opts.validity.treat_whitespace_as_suffix);
        let mut model = train_from_words(words, &opts, slots, progress)?;
        let spec = model
            .trainer_spec
            .as_mut()
            .expect("set by train_from_words");
        let inputs = inputs.iter().map(|p| Field {
            number: 1,
            value: Value::Bytes(p.as_bytes().to_vec()),
        });
        spec.0.fields.splice(0..0, inputs);
        Ok(model)
    }
}

/// `text` in about `n` parts, each ending after a `\n` (or at the end).
fn split_at_lines(text: &str, n: usize) -> Vec<&str> {
    let mut start = 0;
    let mut parts = Vec::with_capacity(n);
    for end in line_ends(text, n) {
        parts.push(&text[start..end]);
        start = end;
    }
    parts
}

/// Where [`split_at_lines`] cuts `text` into about `n` parts: each part's end.
fn line_ends(text: &str, n: usize) -> Vec<usize> {
    let mut ends = Vec::with_capacity(n);
    let step = text.len() / n.max(1) + 1;
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + step).min(text.len());
        end = match memchr::memchr(b'\n', &text.as_bytes()[end..]) {
            Some(i) => end + i + 1,
            None => text.len(),
        };
        ends.push(end);
        start = end;
    }
    ends
}

/// The normalizer spec written to the model: the rule's name and charsmap with
/// the options' whitespace flags.
fn whitespace_spec(opts: &TrainOptions) -> NormalizerSpec {
    let mut m = opts.normalizer.0.clone();
    m.set(3, Value::Varint(u64::from(opts.add_dummy_prefix)));
    m.set(4, Value::Varint(u64::from(opts.remove_extra_whitespaces)));
    m.set(5, Value::Varint(1));
    NormalizerSpec(m)
}

/// `w` without the whitespace mark it starts or ends with.
fn strip_mark(w: &str) -> &str {
    let w = w.strip_prefix(SPACE).unwrap_or(w);
    w.strip_suffix(SPACE).unwrap_or(w)
}

/// `f` over about equal parts of `0..n`, on `pool`'s threads (or this one): its
/// results in the parts' order.
fn in_parts<R: Send>(
    n: usize,
    pool: Option<&rayon::ThreadPool>,
    f: impl Fn(std::ops::Range<usize>) -> R + Sync,
) -> Vec<R> {
    let k = pool.map_or(1, |p| p.current_num_threads());
    on_threads(
        pool,
        (0..k).map(|i| n * i / k..n * (i + 1) / k).collect(),
        f,
    )
}

/// The alphabet: characters by count (descending, then code point) until
/// `character_coverage` of all characters is covered; the boundary counts toward
/// coverage but is never a piece.
fn alphabet(words: &WordList, coverage: f32, pool: Option<&rayon::ThreadPool>) -> Vec<(char, u64)> {
    // ASCII (most characters of most corpora) in an array, the rest in a map; the
    // whitespace mark, which most words hold, apart (a map update per word otherwise).
    let count = |part: std::ops::Range<usize>| {
        let mut ascii = [0u64; 128];
        let mut marks = 0u64;
        let mut chars: FxHashMap<char, u64> = FxHashMap::default();
        for i in part {
            let (w, n) = (words.word(i), words.counts[i]);
            let bare = strip_mark(w);
            marks += n * (w.len() - bare.len()) as u64 / SPACE_BYTES.len() as u64;
            for &b in bare.as_bytes().iter().filter(|b| b.is_ascii()) {
                ascii[b as usize] += n;
            }
            if !bare.is_ascii() {
                for c in bare.chars().filter(|c| !c.is_ascii()) {
                    *chars.entry(c).or_insert(0) += n;
                }
            }
        }
        (ascii, marks, chars)
    };
    let mut ascii = [0u64; 128];
    let mut marks = 0u64;
    let mut chars: FxHashMap<char, u64> = FxHashMap::default();
    for (a, m, c) in in_parts(words.len(), pool, count) {
        ascii.iter_mut().zip(a).for_each(|(x, y)| *x += y);
        marks += m;
        for (c, n) in c {
            *chars.entry(c).or_insert(0) += n;
        }
    }
    if marks > 0 {
        *chars.entry(SPACE).or_insert(0) += marks;
    }
    ascii[0] = 0;
    ascii[b' ' as usize] = 0;
    let ascii = (0u8..128).map(|b| (char::from(b), ascii[b as usize]));
    let mut sorted: Vec<(char, u64)> = ascii.filter(|&(_, n)| n > 0).chain(chars).collect();
    let all: u64 = sorted.iter().map(|&(_, n)| n).sum();
    sorted.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut required = Vec::new();
    let mut covered: u64 = 0;
    for (c, n) in sorted {
        // sentencepiece computes the share in double and compares it as a float.
        let share = (covered as f64 / all as f64) as f32;
        if share >= coverage {
            break;
        }
        covered += n;
        if c != BOUNDARY_CHAR {
            required.push((c, n));
        }
    }
    required
}

/// Learns a model from distinct normalized words and their counts.
fn train_from_words(
    counts: WordList,
    opts: &TrainOptions,
    slots: Vec<Option<(String, PieceType)>>,
    progress: &dyn TrainProgress,
) -> Result<ModelProto, TrainError> {
    if counts.len() == 0 {
        return Err(TrainError::Invalid(
            "no sentences to train on (every line was empty, too long or held '▅')".into(),
        ));
    }
    let pool = worker_pool(opts.num_threads);
    let required = alphabet(&counts, opts.character_coverage, pool.as_ref());
    let num_reserved = slots.iter().flatten().count();
    if required.len() + num_reserved > opts.vocab_size {
        return Err(TrainError::Invalid(format!(
            "vocab_size={} is smaller than the alphabet and reserved pieces ({} + {}): \
             increase vocab_size or decrease character_coverage",
            opts.vocab_size,
            required.len(),
            num_reserved
        )));
    }
    let known: rustc_hash::FxHashSet<char> = required.iter().map(|&(c, _)| c).collect();
    let mut known_ascii = [false; 128];
    for c in known.iter().filter(|c| c.is_ascii()) {
        known_ascii[*c as usize] = true;
    }
    let is_known = |c: char| match u8::try_from(c) {
        Ok(b) if b < 128 => known_ascii[b as usize],
        _ => known.contains(&c),
    };
    let mark_known = known.contains(&SPACE);
    let all_known = |w: &str| {
        let bare = strip_mark(w);
        if bare.is_ascii() && (mark_known || bare.len() == w.len()) {
            bare.bytes().all(|b| known_ascii[b as usize])
        } else {
            w.chars().all(is_known)
        }
    };
    // Words with characters outside the alphabet get `▅` for them, and may then
    // spell the same; the others cannot meet them (no word held `▅`), and are
    // sorted where they are, not copied.
    let parts = in_parts(counts.len(), pool.as_ref(), |part| {
        let mut words: Vec<(&str, u64)> = Vec::with_capacity(part.len());
        let mut unknown: Counts = FxHashMap::default();
        for i in part {
            let (w, n) = (counts.word(i), counts.counts[i]);
            if all_known(w) {
                words.push((w, n));
            } else {
                let w: String = w
                    .chars()
                    .map(|c| if is_known(c) { c } else { UNK_CHAR })
                    .collect();
                *unknown.entry(w).or_insert(0) += n;
            }
        }
        (words, unknown)
    });
    let mut words: Vec<(&str, u64)> = Vec::with_capacity(counts.len());
    let mut unknown: Counts = FxHashMap::default();
    for (w, u) in parts {
        words.extend(w);
        for (w, n) in u {
            *unknown.entry(w).or_insert(0) += n;
        }
    }
    let mut respelled = WordList::default();
    for (w, n) in unknown {
        respelled.push(&[&w], n);
    }
    words.extend(respelled.iter());
    let sorted = sort_words(words, pool.as_ref());

    let num_pieces = opts.vocab_size - num_reserved - required.len();
    let learned = learn_pieces(
        &sorted,
        num_pieces,
        &opts.validity,
        |n| progress.pieces(n),
        pool.as_ref(),
    );
    let learned = match learned {
        Ok(p) if p.len() < num_pieces => return Err(TrainError::Interrupted),
        Ok(p) => p,
        Err(e) => {
            return Err(TrainError::Invalid(format!(
                "vocab_size={} is too high for this corpus: only {} pieces could be learned \
                 (set vocab_size <= {})",
                opts.vocab_size,
                e.pieces,
                e.pieces + num_reserved + required.len()
            )))
        }
    };
    drop(sorted);
    drop(respelled);
    drop(counts);

    let ranked = learned
        .into_iter()
        .chain(required.iter().map(|(c, _)| c.to_string()));
    let mut ranked = ranked.enumerate();
    let mut pieces = Vec::with_capacity(opts.vocab_size);
    let mut seen = std::collections::HashSet::new();
    for slot in slots {
        let piece = match slot {
            Some((p, kind)) => Piece::new(&p, 0.0, kind),
            None => {
                let (rank, p) = ranked.next().expect("counted above");
                Piece::new(&p, -(rank as f32), PieceType::Normal)
            }
        };
        if !seen.insert(piece.piece.clone()) {
            return Err(TrainError::Invalid(format!(
                "the piece {:?} was learned and is also reserved",
                piece.piece
            )));
        }
        pieces.push(piece);
    }
    Ok(ModelProto {
        pieces,
        trainer_spec: Some(trainer_spec(opts)),
        normalizer_spec: Some(whitespace_spec(opts)),
        denormalizer_spec: None,
        other: Vec::new(),
    })
}

/// The trainer spec written to the model (what encoding reads, and the options).
fn trainer_spec(o: &TrainOptions) -> TrainerSpec {
    let v = &o.validity;
    let int = |number, x: i64| Field {
        number,
        value: Value::Varint(x as u64),
    };
    let flag = |number, b: bool| int(number, i64::from(b));
    let text = |number, s: &str| Field {
        number,
        value: Value::Bytes(s.as_bytes().to_vec()),
    };
    let float = |number, x: f32| Field {
        number,
        value: Value::Fixed32(x.to_bits()),
    };
    let mut fields = vec![
        int(3, i64::from(BPE)),
        int(4, o.vocab_size as i64),
        float(10, o.character_coverage),
        int(11, o.input_sentence_size as i64),
        int(16, o.num_threads as i64),
        int(18, o.max_sentence_length as i64),
        flag(19, false),
        int(20, v.max_piece_length as i64),
        flag(21, v.split_by_unicode_script),
        flag(22, v.split_by_whitespace),
        flag(23, v.split_by_number),
        flag(24, v.treat_whitespace_as_suffix),
        flag(25, v.split_digits),
        flag(26, v.allow_whitespace_only_pieces),
    ];
    fields.extend(o.control_symbols.iter().map(|s| text(30, s)));
    fields.extend(o.user_defined_symbols.iter().map(|s| text(31, s)));
    fields.extend([
        flag(35, o.byte_fallback),
        int(40, i64::from(o.unk_id)),
        int(41, i64::from(o.bos_id)),
        int(42, i64::from(o.eos_id)),
        int(43, i64::from(o.pad_id)),
        text(45, &o.unk_piece),
        text(46, &o.bos_piece),
        text(47, &o.eos_piece),
        text(48, &o.pad_piece),
    ]);
    TrainerSpec(Message { fields })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_start_at_each_space_symbol() {
        assert_eq!(split_words("▁a▁▁bc", false), ["▁a", "▁", "▁bc"]);
        assert_eq!(split_words("a▁b▁", true), ["a▁", "b▁"]);
        // Characters sharing ▁'s first byte (E2) do not start words.
        assert_eq!(split_words("▁a—b▅▁c▂", false), ["▁a—b▅", "▁c▂"]);
    }

    /// The words of `lines` counted by the general path (normalize, then split).
    fn general_counts(counter: &WordCounter, lines: &[&str]) -> WordList {
        let mut counts = WordCounts::default();
        for line in lines {
            let mut text = counter.normalizer.normalize(line);
            if let Some(m) = counter.reserved.as_ref() {
                text = replace_all(m, &text);
            }
            for_each_word(&text, false, |s, e| counts.add(&text, s, e, false));
        }
        counts.into_list(false)
    }

    /// sentencepiece's order (count descending, then the bytes), whatever the words
    /// share within and past the 16-byte prefix the sort compares first.
    #[test]
    fn words_sort_as_count_then_bytes() {
        let stems = [
            "",
            "\0",
            "a",
            "▁",
            "▁abcdefghijklm",
            "abcdefghijklmnop",
            "é",
        ];
        let tails = ["", "\0", "a", "b", "\0a", "qrstuvwxyz", "\u{10ffff}"];
        let mut owned = Vec::new();
        for (i, stem) in stems.iter().enumerate() {
            for (j, tail) in tails.iter().enumerate() {
                for more in ["", "z", "\0"] {
                    owned.push((format!("{stem}{tail}{more}"), ((i + j) % 3) as u64));
                }
            }
        }
        owned.sort();
        owned.dedup_by(|a, b| a.0 == b.0);
        let words: Vec<(&str, u64)> = owned.iter().map(|(w, n)| (w.as_str(), *n)).collect();
        let mut want = words.clone();
        want.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        for threads in [1, 2] {
            let got = sort_words(
                words.iter().rev().copied().collect(),
                worker_pool(threads).as_ref(),
            );
            assert_eq!(got, want, "{threads} threads");
        }
    }

    #[test]
    fn words_cut_from_plain_lines_equal_the_normalized_texts_words() {
        let lines = [
            "a b",
            "  a  b  ",
            " ",
            "   ",
            "a",
            "x<s>y z",
            "<s> a",
            "tab\there",
            "averyveryverylongwordindeed and more",
            " averyveryverylongwordindeed ",
            "éé  ü",
            "a ▁ b",
            "a\u{1f}b",
            "",
            "skipped: ▅ holds the unknown mark",
            "skipped: longer than max_sentence_length, which is 60 bytes here",
            "after the skipped ones",
        ];
        for dummy in [false, true] {
            for remove in [false, true] {
                let mut o = TrainOptions::new(100);
                o.add_dummy_prefix = dummy;
                o.remove_extra_whitespaces = remove;
                o.max_sentence_length = 60;
                let spec = whitespace_spec(&o);
                let normalizer = Normalizer::new(&spec, false, None).unwrap();
                let counter = WordCounter::new(o.clone(), normalizer, &["<s>", "</s>"], true);
                assert!(counter.suspects.is_some());
                let mut by_line = WordCounts::default();
                for line in lines {
                    counter.add_line(line, &mut by_line);
                }
                let by_line = by_line.into_list(false);
                let kept: Vec<&str> = (lines.iter().copied())
                    .filter(|l| l.len() <= 60 && !l.contains(UNK_CHAR))
                    .collect();
                let general = general_counts(&counter, &kept);
                assert_eq!(by_line.sorted(1), general.sorted(2), "{dummy} {remove}");
                // The same lines as one text, with and without a final newline.
                for end in ["", "\n"] {
                    let mut whole = WordCounts::default();
                    counter.add_text(&(lines.join("\n") + end), &mut whole);
                    let whole = whole.into_list(false);
                    assert_eq!(
                        whole.sorted(2),
                        general.sorted(1),
                        "{dummy} {remove} {end:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn reserved_pieces_become_boundaries() {
        let m = PrefixMatcher::new(&["<s>", "<sep>"]).unwrap();
        assert_eq!(replace_all(&m, "a<sep>b<s>"), "a\u{1f}b\u{1f}");
    }

    #[test]
    fn reserved_ids_follow_sentencepiece() {
        let mut o = TrainOptions::new(10);
        o.control_symbols = vec!["<c>".into()];
        o.user_defined_symbols = vec!["<u>".into(), "</s>".into()];
        let slots = meta_pieces(&o).unwrap();
        let names: Vec<_> = slots
            .iter()
            .flatten()
            .map(|(p, k)| (p.as_str(), *k))
            .collect();
        assert_eq!(
            names,
            [
                ("<unk>", PieceType::Unknown),
                ("<s>", PieceType::Control),
                ("</s>", PieceType::UserDefined),
                ("<c>", PieceType::Control),
                ("<u>", PieceType::UserDefined),
            ]
        );
    }

    /// The pieces of a model: (piece, score, type).
    fn pieces_of(model: &ModelProto) -> Vec<(String, f32, PieceType)> {
        (model.pieces.iter())
            .map(|p| (p.piece.clone(), p.score(), p.kind()))
            .collect()
    }

    /// Texts holding the lines of `text`, cut after newlines every `every` lines.
    fn cut_at_lines(text: &str, every: usize) -> Vec<String> {
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        lines.chunks(every).map(|c| c.concat()).collect()
    }

    #[test]
    fn texts_fed_in_any_cuts_at_lines_train_the_files_model() {
        let dir = std::env::temp_dir().join(format!("bytepair-spm-train-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.txt");
        let text: String = (0..3000)
            .map(|i| {
                format!(
                    "the cat {} sat on mat {} and  more{}\n",
                    i % 17,
                    i % 5,
                    i % 3
                )
            })
            .collect();
        std::fs::write(&path, &text).unwrap();
        let paths = [path.to_str().unwrap().to_string()];
        for limit in [0, 1000] {
            let mut o = TrainOptions::new(60);
            o.input_sentence_size = limit;
            o.num_threads = 2;
            let from_file = train_files(&paths, &o, &()).unwrap();
            for every in [1, 7, 3000] {
                let mut trainer = Trainer::new(o.clone()).unwrap();
                for t in cut_at_lines(&text, every) {
                    // The last line of each text ends there, newline or not.
                    trainer.add_texts(&[t.trim_end_matches('\n')]).unwrap();
                }
                assert_eq!(trainer.is_full(), limit > 0);
                let fed = trainer.train(&[], &()).unwrap();
                assert_eq!(pieces_of(&fed), pieces_of(&from_file), "{limit} {every}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_tiny_corpus_learns_its_frequent_pairs_first() {
        let mut counts = WordList::default();
        counts.push(&["▁ab"], 3);
        counts.push(&["▁abc"], 2);
        let o = TrainOptions::new(3 + 4 + 3);
        let slots = meta_pieces(&o).unwrap();
        let model = train_from_words(counts, &o, slots, &()).unwrap();
        let pieces: Vec<_> = model
            .pieces
            .iter()
            .map(|p| (p.piece.as_str(), p.score()))
            .collect();
        assert_eq!(
            pieces,
            [
                ("<unk>", 0.0),
                ("<s>", 0.0),
                ("</s>", 0.0),
                ("ab", -0.0),
                ("▁ab", -1.0),
                ("▁abc", -2.0),
                ("a", -3.0),
                ("b", -4.0),
                ("▁", -5.0),
                ("c", -6.0),
            ]
        );
    }
}
