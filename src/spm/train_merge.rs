//! The merge loop of sentencepiece's BPE trainer, reproduced: same pieces, same
//! order, from the same distinct words.
//!
//! sentencepiece does not simply merge the most frequent pair each step. Its
//! rules, which we keep because they decide the pieces:
//! - Candidates are an *active set*: every 100 pieces it is rebuilt as the most
//!   frequent pair symbols (at least 1000, or 5% of all symbols it knows, chars
//!   included); in between, a pair joins the set when a merge creates a new
//!   occurrence of it. The best is the most frequent *active* pair; ties go to
//!   the shorter piece (in characters), then the smaller string (UTF-8 bytes).
//! - A pair is identified by its two symbols, so the same string can arise by
//!   different paths ("aa"+"a", "a"+"aa"). When a chosen pair's string is already
//!   a piece, the pair is dropped *without merging its occurrences*, and the step
//!   yields no piece.
//! - A pair whose string is not a valid piece (too long, mixing scripts, a `▁`
//!   inside, ...) is never a candidate ([`Validity`]).
//! - A pair's count is the sum of the word counts of its recorded occurrences;
//!   occurrences are recorded when a merge makes them. A pair symbol made again
//!   after it was dropped starts with no occurrences: the ones already in the
//!   words are not its own.
//!
//! sentencepiece recounts a pair from its whole occurrence list whenever a
//! neighbouring merge breaks one of its occurrences; we keep every count exact
//! as it changes instead (a broken occurrence subtracts its word's count if it
//! is one of the pair's recorded ones: made no earlier than the pair symbol,
//! see `Cell::stamp` and `State::born`), which gives the same counts for a
//! fraction of the work.
//! Unlike sentencepiece, which rescans the whole active set every step, we keep
//! the active pairs in a max-heap with lazy invalidation: an entry is stale when
//! its pair left the set or its count changed (every change pushes a new entry).
//! Where sentencepiece's choice depends on its hash table's iteration order (which
//! pairs of equal count make the cut at a rebuild), we take the shorter, then
//! smaller, then older pair — the one documented difference.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};
use unicode_script::{Script, UnicodeScript};

use super::train_lists::{List, Lists};
use crate::packed::prefetch;
use crate::pages::run_aside;

/// The word-space character `▁`.
pub const SPACE: char = '\u{2581}';
/// What sentencepiece's trainer writes for characters outside the alphabet.
pub const UNK_CHAR: char = '\u{2585}';
/// What reserved pieces' text becomes in training text: a boundary (U+001F, the
/// unit separator, in sentencepiece 0.2.3; older releases used `\t`).
pub const BOUNDARY_CHAR: char = '\u{1f}';

const REMOVED: u32 = u32::MAX;
/// In [`Trainer::pairs`]: the two symbols do not make a valid piece.
const NOT_A_PIECE: u32 = u32::MAX;
const NO_SYMBOL: u32 = u32::MAX;
/// In [`Words::cells`]: a word's header (and the end of the last word).
const EDGE: u32 = u32::MAX - 1;
/// Rebuild the active set every this many pieces.
const REBUILD_EVERY: usize = 100;
const MIN_ACTIVE: usize = 1000;
const ACTIVE_RATIO: f32 = 0.05;

/// Which strings may become pieces: sentencepiece's `IsValidSentencePiece`.
#[derive(Debug, Clone)]
pub struct Validity {
    pub max_piece_length: usize,
    pub split_by_unicode_script: bool,
    pub split_by_number: bool,
    pub split_by_whitespace: bool,
    pub split_digits: bool,
    pub treat_whitespace_as_suffix: bool,
    pub allow_whitespace_only_pieces: bool,
}

/// sentencepiece's defaults.
impl Default for Validity {
    fn default() -> Self {
        Validity {
            max_piece_length: 16,
            split_by_unicode_script: true,
            split_by_number: true,
            split_by_whitespace: true,
            split_digits: false,
            treat_whitespace_as_suffix: false,
            allow_whitespace_only_pieces: false,
        }
    }
}

/// A character's script class for the "one script per piece" rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Any,
    Script(Script),
}

fn is_decimal_digit(c: char) -> bool {
    c.is_ascii_digit() || ('\u{ff10}'..='\u{ff19}').contains(&c)
}

impl Validity {
    /// True when `chars` may be a piece.
    pub fn allows(&self, chars: &[char]) -> bool {
        let n = chars.len();
        if n == 0 || n > self.max_piece_length {
            return false;
        }
        let all_space = chars.iter().all(|&c| c == SPACE);
        let mut prev = Class::Any;
        for (pos, &c) in chars.iter().enumerate() {
            if c == UNK_CHAR || c == '\0' || c == BOUNDARY_CHAR || c == ' ' {
                return false;
            }
            if c == SPACE {
                if self.allow_whitespace_only_pieces && all_space {
                    continue;
                }
                // `▁` starts a piece (ends it, as a suffix); without whitespace
                // splitting it may also sit inside, but not at the far end.
                let misplaced = if self.treat_whitespace_as_suffix {
                    pos + 1 < n && (self.split_by_whitespace || pos == 0)
                } else {
                    pos > 0 && (self.split_by_whitespace || pos == n - 1)
                };
                if misplaced {
                    return false;
                }
                continue;
            }
            let mut class = match script_of(c) {
                Script::Hiragana | Script::Katakana | Script::Han => Class::Script(Script::Han),
                _ if c == '\u{30fc}' => Class::Script(Script::Han),
                Script::Inherited => prev,
                s => Class::Script(s),
            };
            if is_decimal_digit(c) {
                if !self.split_by_number {
                    class = Class::Any;
                }
                if self.split_digits && n > 1 {
                    return false;
                }
            }
            if self.split_by_unicode_script
                && class != Class::Any
                && prev != Class::Any
                && prev != class
            {
                return false;
            }
            prev = class;
        }
        true
    }
}

/// The script sentencepiece assigns: unassigned code points count as Common.
fn script_of(c: char) -> Script {
    if c.is_ascii() {
        // Unicode's Scripts.txt for U+0000..U+007F, without the table search.
        return if c.is_ascii_alphabetic() {
            Script::Latin
        } else {
            Script::Common
        };
    }
    match c.script() {
        Script::Unknown => Script::Common,
        s => s,
    }
}

/// A character or a pair of symbols.
struct Symbol {
    /// Orders pair symbols as their texts do, mostly without reading them; and
    /// holds the text ([`Symbol::push_text`]).
    order: TextOrder,
    /// Bytes of the text.
    len: u32,
    chars: u32,
    is_unk: bool,
    /// For a pair: its two symbols; `NO_SYMBOL` for a character.
    left: u32,
    right: u32,
    /// Recorded occurrences ([`encode_pos`]), in [`Trainer::lists`];
    /// ones a later merge broke stay until the pair is merged (and are skipped).
    positions: List,
}

/// What every step reads or writes of a symbol, apart from the rest: rebuilding
/// the active set goes through all of them (hundreds of thousands of pairs),
/// and 16 bytes each keep that pass in a few megabytes.
#[derive(Clone, Copy)]
struct State {
    /// Count over the live occurrences in `positions`.
    freq: u64,
    /// The clock when this pair symbol was made: occurrences made before it
    /// are not among its `positions`.
    born: u32,
    /// A pair not yet dropped (sentencepiece's cache holds it).
    live_pair: bool,
    active: bool,
    /// Already in `dirty`.
    queued: bool,
}

/// A heap entry: count, then shorter, then smaller string, then older.
type Entry = (u64, Reverse<u32>, Reverse<TextOrder>, Reverse<u32>);

/// A piece's text as it sorts: its first 16 bytes, big-endian and zero-padded,
/// then the whole text only when it is longer. Valid pieces hold no NUL, so
/// padding sorts a text before its extensions, as `str` does; and an entry
/// pushed on the heap (a few per merge) copies 16 bytes instead of touching the
/// text's reference count, a cache miss each.
///
/// It is also where a symbol's text is kept: a text of up to 16 bytes (nearly
/// every one in English) is its prefix, with no allocation of its own. Making
/// a pair symbol reads its two parts' texts from their symbols, not from the
/// heap: of about 250 K pair symbols made at 50 MB of English, each had cost a
/// `malloc` and two dependent cache misses more.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct TextOrder {
    /// The two big-endian halves: a `u128` would align (and grow) every symbol to 16.
    prefix: [u64; 2],
    rest: Option<Arc<str>>,
}

impl TextOrder {
    fn of(text: &str) -> TextOrder {
        let mut buf = [0u8; 16];
        let n = text.len().min(16);
        buf[..n].copy_from_slice(&text.as_bytes()[..n]);
        let half = |h: &[u8]| u64::from_be_bytes(h.try_into().expect("8 bytes"));
        TextOrder {
            prefix: [half(&buf[..8]), half(&buf[8..])],
            rest: (text.len() > 16).then(|| Arc::from(text)),
        }
    }

    /// Appends the text, `len` bytes, to `out`.
    #[inline]
    fn push_text(&self, len: usize, out: &mut String) {
        match &self.rest {
            Some(text) => out.push_str(text),
            None => {
                let mut buf = [0u8; 16];
                buf[..8].copy_from_slice(&self.prefix[0].to_be_bytes());
                buf[8..].copy_from_slice(&self.prefix[1].to_be_bytes());
                let text = std::str::from_utf8(&buf[..len]);
                out.push_str(text.expect("a text's first bytes, the whole of it"));
            }
        }
    }
}

impl Symbol {
    /// Appends the symbol's text to `out`.
    #[inline]
    fn push_text(&self, out: &mut String) {
        self.order.push_text(self.len as usize, out);
    }
}

/// One symbol of a word: its id (`REMOVED` where merged away) and the clock
/// when it was last set (a pair of neighbours came about at the later of their
/// two stamps). Together, so that looking at a pair reads one cache line.
#[derive(Clone, Copy)]
struct Cell {
    symbol: u32,
    stamp: u32,
}

/// The distinct words, one after another in `cells`, each after a header of two
/// [`EDGE`] cells whose stamps hold its count (low half first), and one `EDGE` cell
/// after the last. A word is named by where its header is; places in words are
/// indices into `cells`. An occurrence reads its word's count and bounds from the
/// cells around it (usually the same cache line), not from arrays of their own:
/// two fewer cache misses per occurrence a merge looks at.
struct Words {
    cells: Vec<Cell>,
}

/// Cells of a word's header.
const HEADER: usize = 2;

impl Words {
    fn at(&self, i: usize) -> u32 {
        self.cells[i].symbol
    }
    fn set(&mut self, i: usize, symbol: u32, stamp: u32) {
        self.cells[i] = Cell { symbol, stamp };
    }
    /// When the neighbours at `l` and `r` came about.
    fn made(&self, l: usize, r: usize) -> u32 {
        self.cells[l].stamp.max(self.cells[r].stamp)
    }
    /// How often word `w` occurs.
    fn count(&self, w: usize) -> u64 {
        u64::from(self.cells[w].stamp) | u64::from(self.cells[w + 1].stamp) << 32
    }
    /// Starts a word of `count` occurrences; its characters come next. Returns its name.
    fn start_word(&mut self, count: u64) -> usize {
        let w = self.cells.len();
        for half in [count as u32, (count >> 32) as u32] {
            self.cells.push(Cell {
                symbol: EDGE,
                stamp: half,
            });
        }
        w
    }
    /// The next symbol after `i` in its word.
    fn next(&self, i: usize) -> Option<usize> {
        (i + 1..self.cells.len())
            .find(|&j| self.cells[j].symbol != REMOVED)
            .filter(|&j| self.cells[j].symbol != EDGE)
    }
    /// The symbol before `i` in word `w`.
    fn prev(&self, w: usize, i: usize) -> Option<usize> {
        (w + HEADER..i)
            .rev()
            .find(|&j| self.cells[j].symbol != REMOVED)
    }
    /// Asks the CPU for what looking at place `i` of word `w` reads (a hint).
    fn prefetch(&self, w: usize, i: usize) {
        prefetch(self.cells.get(i));
        prefetch(self.cells.get(w));
    }
}

/// The key of the pair of symbols `(a, b)` in [`Trainer::pairs`].
fn pair_key(a: u32, b: u32) -> u64 {
    (u64::from(a) << 32) | u64::from(b)
}

/// An occurrence of a pair: where its left symbol is (high half, so that sorted
/// occurrences go through the words in order) and its word. The right symbol is
/// the next one in the word: while the left one stands, nothing can merge away
/// the right one (only its left neighbour could absorb it).
fn encode_pos(w: usize, l: usize) -> u64 {
    ((l as u64) << 32) | w as u64
}

fn decode_pos(p: u64) -> (usize, usize) {
    ((p & 0xffff_ffff) as usize, (p >> 32) as usize)
}

/// Occurrences looked at ahead of the one being merged, to prefetch.
const AHEAD: usize = 8;

/// Why the loop stopped before `num_pieces`.
#[derive(Debug, PartialEq)]
pub struct Exhausted {
    pub pieces: usize,
}

struct Trainer<'v> {
    validity: &'v Validity,
    symbols: Vec<Symbol>,
    state: Vec<State>,
    chars: FxHashMap<char, u32>,
    /// `chars` for ASCII, without hashing (`NO_SYMBOL` until seen).
    ascii: [u32; 128],
    /// Live pair symbols by [`pair_key`] of their two symbols, and
    /// [`NOT_A_PIECE`] for pairs that are not valid pieces.
    pairs: FxHashMap<u64, u32>,
    /// Symbols in sentencepiece's cache (chars and live pairs): sizes the active set.
    cache_len: usize,
    words: Words,
    /// The symbols' `positions`.
    lists: Lists,
    /// The occurrences of the pair being merged, sorted (kept to save an allocation).
    merging: Vec<u64>,
    heap: BinaryHeap<Entry>,
    /// Active pairs whose count may have changed since their last heap entry.
    dirty: Vec<u32>,
    /// The lowest count in the active set at its last rebuild: the next rebuild
    /// looks only at pairs counted at least half that (see [`Trainer::rebuild_active`]).
    last_cut: u64,
    /// The live pairs a rebuild looks at (kept to save an allocation each).
    live: Vec<(u64, u32)>,
    /// Tests: rebuilds look at every live pair (false), and how many rebuilds chose
    /// among only those counted at least half the last cut.
    #[cfg(test)]
    narrow: bool,
    #[cfg(test)]
    narrowed: usize,
    /// Counts merge steps: stamps of word symbols and pair symbols.
    clock: u32,
    /// The characters of a candidate pair, kept to save an allocation each.
    pair_chars: Vec<char>,
    /// The text of a candidate pair, kept for the same reason.
    pair_text: String,
    /// During a merge of (a, b) into N, by a neighbour's symbol: the pair symbols
    /// it makes with the merged pair's occurrences, looked up once per merge (see
    /// [`Side`]). Neighbours are few and frequent, so these stay in a few cache
    /// lines. (A direct-mapped megabyte of recent `pairs` lookups in front of the map
    /// paid before these: once they took the repeats, nearly every lookup missed it
    /// and then the map, two cache misses instead of one.)
    beside: Vec<[(u32, u32); 4]>,
}

/// The pairs a neighbour makes in a merge of (a, b) into N: [`Trainer::beside`]
/// holds, per side, the merge's clock when it was looked up and the pair symbol
/// (or [`NOT_A_PIECE`]).
#[derive(Clone, Copy)]
enum Side {
    /// (x, a): broken by the merge (x the left neighbour).
    LeftOld = 0,
    /// (b, y): broken by the merge (y the right neighbour).
    RightOld = 1,
    /// (x, N): made by the merge.
    LeftNew = 2,
    /// (N, y): made by the merge.
    RightNew = 3,
}

/// Learns up to `num_pieces` merged pieces from distinct `words` (each a string of
/// characters, `UNK_CHAR` for characters outside the alphabet) and their counts,
/// in the order sentencepiece lists its words (count descending, then string).
/// Returns the pieces in order; `Err` when candidates ran out first. The words'
/// first pairs are counted on `pool`'s threads; the loop itself runs on this one.
pub fn learn_pieces(
    words: &[(&str, u64)],
    num_pieces: usize,
    validity: &Validity,
    progress: impl FnMut(usize) -> bool,
    pool: Option<&rayon::ThreadPool>,
) -> Result<Vec<String>, Exhausted> {
    let mut trainer = Trainer::new(words, validity, pool)?;
    let learned = trainer.learn(num_pieces, progress);
    // The trainer's buffers (about 100 MB at 50 MB of English) are freed off the
    // caller's path. The plain ones give their pages back first: `munmap` holds the
    // address space's lock while it releases pages, and the caller's own allocations
    // and frees waited for it (a median 14.5 ms, against 2.5 ms this way).
    let Trainer {
        symbols,
        state,
        pairs,
        words,
        lists,
        merging,
        heap,
        beside,
        ..
    } = trainer;
    let spent = move || {
        crate::pages::free_pages_first(words.cells);
        lists.free_pages_first();
        crate::pages::free_pages_first(state);
        drop((symbols, pairs, merging, heap, beside));
    };
    run_aside(spent, pool.map_or(1, |p| p.current_num_threads()));
    learned
}

impl<'v> Trainer<'v> {
    /// The merge loop of [`learn_pieces`].
    fn learn(
        &mut self,
        num_pieces: usize,
        mut progress: impl FnMut(usize) -> bool,
    ) -> Result<Vec<String>, Exhausted> {
        let mut pieces = Vec::with_capacity(num_pieces);
        let mut seen: FxHashSet<String> = FxHashSet::default();
        while pieces.len() < num_pieces {
            if pieces.len() % REBUILD_EVERY == 0 {
                if !progress(pieces.len()) {
                    break;
                }
                self.rebuild_active();
            }
            let Some(best) = self.pop_best() else {
                return Err(Exhausted {
                    pieces: pieces.len(),
                });
            };
            let mut text = String::new();
            self.symbols[best as usize].push_text(&mut text);
            if seen.insert(text.clone()) {
                pieces.push(text);
                self.merge(best);
            }
            self.forget(best);
        }
        Ok(pieces)
    }

    fn new(
        words: &[(&str, u64)],
        validity: &'v Validity,
        pool: Option<&rayon::ThreadPool>,
    ) -> Result<Self, Exhausted> {
        let (mut t, starts) = Trainer::laid_out(words, validity)?;
        t.first_pairs(&starts, pool);
        Ok(t)
    }

    /// A trainer with the words laid out in cells, each character a symbol, and no
    /// pairs yet; and where each word's header is (and one more: where the last
    /// word ends).
    fn laid_out(
        words: &[(&str, u64)],
        validity: &'v Validity,
    ) -> Result<(Self, Vec<usize>), Exhausted> {
        let mut t = Trainer {
            validity,
            symbols: Vec::new(),
            state: Vec::new(),
            chars: FxHashMap::default(),
            ascii: [NO_SYMBOL; 128],
            pairs: FxHashMap::default(),
            cache_len: 0,
            words: Words {
                // A word has at most as many characters as bytes: one allocation,
                // never copied as it grows (pages past the end are never touched).
                cells: Vec::with_capacity(
                    words.iter().map(|(w, _)| w.len() + HEADER).sum::<usize>() + 1,
                ),
            },
            lists: Lists::default(),
            merging: Vec::new(),
            heap: BinaryHeap::new(),
            dirty: Vec::new(),
            last_cut: 0,
            live: Vec::new(),
            #[cfg(test)]
            narrow: true,
            #[cfg(test)]
            narrowed: 0,
            clock: 0,
            pair_chars: Vec::new(),
            pair_text: String::new(),
            beside: Vec::new(),
        };
        // Merges reach all over the words (36 MB for 50 MB of English): 2 MiB pages
        // spare most of the TLB misses, and laying the words out faults in 18 pages
        // instead of 9,000.
        crate::pages::advise_huge_pages(t.words.cells.spare_capacity_mut());
        let mut starts = Vec::with_capacity(words.len() + 1);
        for (i, (word, count)) in words.iter().enumerate() {
            // The words come in count order, from all over the corpus's text.
            prefetch(words.get(i + AHEAD).and_then(|(w, _)| w.as_bytes().first()));
            starts.push(t.words.start_word(*count));
            for c in word.chars() {
                let symbol = t.char_symbol(c);
                t.words.cells.push(Cell { symbol, stamp: 0 });
            }
        }
        starts.push(t.words.cells.len());
        t.words.cells.push(Cell {
            symbol: EDGE,
            stamp: 0,
        });
        assert!(
            u32::try_from(t.words.cells.len()).is_ok(),
            "the distinct words hold 2^32 characters or more, past what a position names"
        );
        for k in 0..words.len() {
            if starts[k + 1] - (starts[k] + HEADER) > 0xffff {
                // sentencepiece records positions in 16 bits and refuses longer ones.
                return Err(Exhausted { pieces: 0 });
            }
        }
        Ok((t, starts))
    }

    /// Records every pair of neighbouring characters in the words, as adding them
    /// one by one in word order would: pair symbols made in the order of their first
    /// occurrences, each one's occurrences listed in word order, its count their
    /// words' counts summed. The words are cut in one part per thread of `pool`:
    /// each part numbers the distinct pairs it holds and counts them (a few
    /// thousand pairs of characters, in tables that stay in cache), writing each
    /// pair's number into its left cell's stamp; one pass here makes the symbols
    /// and each list whole at once; then each part writes its occurrences into its
    /// own places in the lists (and the stamps back to 0).
    fn first_pairs(&mut self, starts: &[usize], pool: Option<&rayon::ThreadPool>) {
        let n = starts.len() - 1;
        let k = pool
            .map_or(1, |p| p.current_num_threads())
            .clamp(1, n.max(1));
        let bounds: Vec<usize> = (0..=k).map(|i| n * i / k).collect();
        // Each part's cells: the words bounds[i]..bounds[i + 1], from the first one's header.
        // The cells are lent to the parts while the symbols are made here.
        let mut cells = std::mem::take(&mut self.words.cells);
        let mut parts = Vec::with_capacity(k);
        let mut rest = &mut cells[..starts[n]];
        for i in 0..k {
            let (lo, hi) = (starts[bounds[i]], starts[bounds[i + 1]]);
            let (cells, tail) = std::mem::take(&mut rest).split_at_mut(hi - lo);
            rest = tail;
            parts.push(PartCells {
                cells,
                base: lo,
                starts: &starts[bounds[i]..=bounds[i + 1]],
            });
        }
        let found = on_threads(pool, parts.iter_mut().collect(), |part| part.count_pairs());

        // The symbols, in the order their first occurrences come; each one's count,
        // and how many occurrences each part holds.
        let mut ids = Vec::with_capacity(k);
        let mut places: Vec<u32> = Vec::new();
        for pairs in &found {
            let mut part_ids = Vec::with_capacity(pairs.keys.len());
            for (j, &key) in pairs.keys.iter().enumerate() {
                let (a, b) = ((key >> 32) as u32, key as u32);
                let id = self.pair_symbol(a, b).unwrap_or(NOT_A_PIECE);
                if id != NOT_A_PIECE {
                    let i = id as usize;
                    if places.len() <= i {
                        places.resize(i + 1, 0);
                    }
                    places[i] += pairs.places[j];
                    self.state[i].freq += pairs.counts[j];
                }
                part_ids.push(id);
            }
            ids.push(part_ids);
        }
        self.lists.reserve(places.iter().map(|&n| n as usize).sum());
        let mut lists: Vec<List> = Vec::new();
        for (id, &n) in places.iter().enumerate() {
            if n > 0 {
                let positions = &mut self.symbols[id].positions;
                self.lists.make(positions, n);
                lists.push(*positions);
            }
        }
        // Each list's entries cut in the parts' shares, in part order.
        let mut whole = self.lists.entries_mut(&lists).into_iter();
        let mut left: Vec<&mut [u64]> = places
            .iter()
            .map(|&n| {
                if n > 0 {
                    whole.next().expect("a list for each pair counted")
                } else {
                    &mut []
                }
            })
            .collect();
        let shares: Vec<Vec<&mut [u64]>> = found
            .iter()
            .zip(&ids)
            .map(|(pairs, part_ids)| {
                let share = |(j, &id): (usize, &u32)| {
                    if id == NOT_A_PIECE {
                        return &mut [][..];
                    }
                    let all = std::mem::take(&mut left[id as usize]);
                    let (mine, rest) = all.split_at_mut(pairs.places[j] as usize);
                    left[id as usize] = rest;
                    mine
                };
                part_ids.iter().enumerate().map(share).collect()
            })
            .collect();
        let jobs = parts.iter_mut().zip(shares).collect();
        on_threads(pool, jobs, |(part, share)| part.write_pairs(share));
        self.words.cells = cells;
    }

    fn new_symbol(&mut self, text: &str, chars: u32, left: u32, right: u32, unk: bool) -> u32 {
        let id = self.symbols.len() as u32;
        self.symbols.push(Symbol {
            order: TextOrder::of(text),
            len: text.len() as u32,
            chars,
            is_unk: unk,
            left,
            right,
            positions: List::default(),
        });
        self.state.push(State {
            freq: 0,
            born: self.clock,
            live_pair: left != NO_SYMBOL,
            active: false,
            queued: false,
        });
        self.cache_len += 1;
        id
    }

    fn char_symbol(&mut self, c: char) -> u32 {
        if let Some(&id) = self.ascii.get(c as usize) {
            if id != NO_SYMBOL {
                return id;
            }
        } else if let Some(&id) = self.chars.get(&c) {
            return id;
        }
        let id = self.new_symbol(
            c.encode_utf8(&mut [0; 4]),
            1,
            NO_SYMBOL,
            NO_SYMBOL,
            c == UNK_CHAR,
        );
        match self.ascii.get_mut(c as usize) {
            Some(slot) => *slot = id,
            None => {
                self.chars.insert(c, id);
            }
        }
        id
    }

    /// The live pair symbol of `(a, b)`, made if it is a valid piece.
    fn pair_symbol(&mut self, a: u32, b: u32) -> Option<u32> {
        let key = pair_key(a, b);
        if let Some(&id) = self.pairs.get(&key) {
            return (id != NOT_A_PIECE).then_some(id);
        }
        let (sa, sb) = (&self.symbols[a as usize], &self.symbols[b as usize]);
        let len = sa.chars + sb.chars;
        // What `allows` would refuse first, told without the texts.
        let mut valid = !sa.is_unk && !sb.is_unk && len as usize <= self.validity.max_piece_length;
        let mut joined = std::mem::take(&mut self.pair_text);
        if valid {
            let mut chars = std::mem::take(&mut self.pair_chars);
            joined.clear();
            sa.push_text(&mut joined);
            sb.push_text(&mut joined);
            chars.clear();
            chars.extend(joined.chars());
            valid = self.validity.allows(&chars);
            self.pair_chars = chars;
        }
        let id = if valid {
            self.new_symbol(&joined, len, a, b, false)
        } else {
            NOT_A_PIECE
        };
        self.pair_text = joined;
        self.pairs.insert(key, id);
        (id != NOT_A_PIECE).then_some(id)
    }

    /// [`Trainer::pair_symbol`] of `(a, b)`, a pair of the merge under way on
    /// `side` of it: looked up once per merge and neighbour (within a merge no pair
    /// symbol is dropped, so the answer holds; the first lookup makes it, in the
    /// same order as before).
    #[inline]
    fn pair_beside(&mut self, a: u32, b: u32, side: Side) -> Option<u32> {
        let neighbour = match side {
            Side::LeftOld | Side::LeftNew => a,
            Side::RightOld | Side::RightNew => b,
        };
        let (stamp, id) = self.beside[neighbour as usize][side as usize];
        if stamp == self.clock {
            return (id != NOT_A_PIECE).then_some(id);
        }
        let id = self.pair_symbol(a, b);
        self.beside[neighbour as usize][side as usize] = (self.clock, id.unwrap_or(NOT_A_PIECE));
        id
    }

    /// Records the occurrence of the pair at `(l, r)` in word `w`; makes it active.
    fn add_pair(&mut self, w: usize, l: usize, r: usize, side: Side) {
        let (a, b) = (self.words.at(l), self.words.at(r));
        if let Some(id) = self.pair_beside(a, b, side) {
            self.add_occurrence(id, w, l);
        }
    }

    /// Records an occurrence of the pair symbol `id` at `l` in word `w`.
    #[inline(always)]
    fn add_occurrence(&mut self, id: u32, w: usize, l: usize) {
        let positions = &mut self.symbols[id as usize].positions;
        self.lists.push(positions, encode_pos(w, l));
        let s = &mut self.state[id as usize];
        s.active = true;
        s.freq += self.words.count(w);
        self.touched(id);
    }

    /// The occurrence of the pair at `(l, r)` is about to break: it no longer
    /// counts (unless the pair is `best`, which is being merged).
    fn reset_pair(&mut self, w: usize, l: usize, r: usize, best: u32, side: Side) {
        let (a, b) = (self.words.at(l), self.words.at(r));
        // Made even when it was not there: sentencepiece looks it up the same
        // way, and every pair symbol made counts toward the active set's size.
        if let Some(id) = self.pair_beside(a, b, side) {
            let s = &mut self.state[id as usize];
            if id != best && self.words.made(l, r) >= s.born {
                s.freq -= self.words.count(w);
                self.touched(id);
            }
        }
    }

    /// Queues `id` for a new heap entry (its count changed).
    fn touched(&mut self, id: u32) {
        let s = &mut self.state[id as usize];
        if !s.queued {
            s.queued = true;
            self.dirty.push(id);
        }
    }

    fn entry(&self, id: u32) -> Entry {
        let s = &self.symbols[id as usize];
        (
            self.state[id as usize].freq,
            Reverse(s.chars),
            Reverse(s.order.clone()),
            Reverse(id),
        )
    }

    /// Rebuilds the active set: the most frequent live pairs.
    ///
    /// Counts change little between rebuilds, so it looks only at the live pairs
    /// counted at least half the last cut. When at least as many of them as the
    /// set holds are left, the set is theirs: every pair left out counts less than
    /// each of them, so it could neither make the set nor tie at its cut. When too
    /// few are left, it looks at all live pairs again.
    fn rebuild_active(&mut self) {
        let by_ratio = (self.cache_len as f32 * ACTIVE_RATIO) as usize;
        let floor = self.last_cut / 2;
        #[cfg(test)]
        let floor = if self.narrow { floor } else { 0 };
        // One pass over the states in order: the live pairs with their counts beside
        // them, so that choosing among them reads no state at random.
        let mut live = std::mem::take(&mut self.live);
        live.clear();
        let mut all_live = 0;
        for (id, s) in self.state.iter_mut().enumerate() {
            s.active = false;
            if s.live_pair {
                all_live += 1;
                if s.freq >= floor {
                    live.push((s.freq, id as u32));
                }
            }
        }
        let size = MIN_ACTIVE.max(by_ratio).min(all_live);
        #[cfg(test)]
        if floor > 0 && live.len() >= size && live.len() < all_live {
            self.narrowed += 1;
        }
        if live.len() < size {
            live.clear();
            live.extend(self.live_pairs());
        }
        let chosen = self.most_frequent(&mut live, size);
        #[cfg(test)]
        self.check_narrowed(&chosen, size);
        self.live = live;
        for &id in &self.dirty {
            self.state[id as usize].queued = false;
        }
        self.dirty.clear();
        let entries: Vec<Entry> = chosen.iter().map(|&id| self.entry(id)).collect();
        self.last_cut = entries.iter().map(|e| e.0).min().unwrap_or(0);
        for &id in &chosen {
            self.state[id as usize].active = true;
        }
        self.heap = BinaryHeap::from(entries);
    }

    /// Every live pair, (count, id), in id order.
    fn live_pairs(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        let live = self.state.iter().enumerate().filter(|(_, s)| s.live_pair);
        live.map(|(id, s)| (s.freq, id as u32))
    }

    /// Tests: the active set chosen is the one chosen among all live pairs.
    #[cfg(test)]
    fn check_narrowed(&self, chosen: &[u32], size: usize) {
        let mut all: Vec<(u64, u32)> = self.live_pairs().collect();
        let mut want = self.most_frequent(&mut all, size);
        let mut got = chosen.to_vec();
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(
            got, want,
            "the active set chosen among pairs over half the last cut"
        );
    }

    /// The `size` most frequent of `live` (count, id); among equal counts at the cut,
    /// the shorter, smaller, older. Reorders `live`.
    fn most_frequent(&self, live: &mut [(u64, u32)], size: usize) -> Vec<u32> {
        if size >= live.len() {
            return live.iter().map(|&(_, id)| id).collect();
        }
        if size == 0 {
            return Vec::new();
        }
        live.select_nth_unstable_by(size - 1, |a, b| b.0.cmp(&a.0));
        let cut = live[size - 1].0;
        let mut chosen = Vec::with_capacity(size);
        let mut ties = Vec::new();
        for &(freq, id) in live.iter() {
            match freq.cmp(&cut) {
                std::cmp::Ordering::Greater => chosen.push(id),
                std::cmp::Ordering::Equal => ties.push(id),
                std::cmp::Ordering::Less => {}
            }
        }
        let need = size - chosen.len();
        if need < ties.len() {
            let key = |id: &u32| {
                let s = &self.symbols[*id as usize];
                (s.chars, s.order.clone(), *id)
            };
            ties.select_nth_unstable_by_key(need - 1, key);
            ties.truncate(need);
        }
        chosen.extend(ties);
        chosen
    }

    /// The best active pair, if any.
    fn pop_best(&mut self) -> Option<u32> {
        let dirty = std::mem::take(&mut self.dirty);
        for &id in &dirty {
            let s = &mut self.state[id as usize];
            s.queued = false;
            if s.active && s.live_pair {
                let e = self.entry(id);
                self.heap.push(e);
            }
        }
        self.dirty = dirty;
        self.dirty.clear();
        while let Some(e) = self.heap.pop() {
            let id = e.3 .0;
            let s = &self.state[id as usize];
            if s.active && s.live_pair && s.freq == e.0 {
                return Some(id);
            }
        }
        None
    }

    /// Drops `best` from the cache and the active set.
    fn forget(&mut self, best: u32) {
        let state = &mut self.state[best as usize];
        state.live_pair = false;
        state.active = false;
        let s = &mut self.symbols[best as usize];
        self.lists.release(&mut s.positions);
        let key = pair_key(s.left, s.right);
        self.pairs.remove(&key);
        self.cache_len -= 1;
    }

    /// Replaces every recorded occurrence of `best`, left to right.
    fn merge(&mut self, best: u32) {
        let (a, b) = (
            self.symbols[best as usize].left,
            self.symbols[best as usize].right,
        );
        let mut positions = std::mem::take(&mut self.merging);
        let list = &mut self.symbols[best as usize].positions;
        self.lists.take_into(list, &mut positions);
        positions.sort_unstable();
        self.clock += 1;
        // Every neighbour is a symbol made before this merge.
        if self.beside.len() < self.symbols.len() {
            self.beside.resize(self.symbols.len(), [(0, 0); 4]);
        }
        for (k, &p) in positions.iter().enumerate() {
            if let Some(&ahead) = positions.get(k + AHEAD) {
                let (w, l) = decode_pos(ahead);
                self.words.prefetch(w, l);
            }
            let (w, l) = decode_pos(p);
            // Broken since it was recorded, or by a previous occurrence of an
            // overlapping pair ("aaa") in this merge.
            if self.words.at(l) != a {
                continue;
            }
            let Some(r) = self.words.next(l).filter(|&r| self.words.at(r) == b) else {
                continue;
            };
            let next = self.words.next(r);
            let prev = self.words.prev(w, l);
            if let Some(prev) = prev {
                self.reset_pair(w, prev, l, best, Side::LeftOld);
            }
            if let Some(next) = next {
                self.reset_pair(w, r, next, best, Side::RightOld);
            }
            self.words.set(l, best, self.clock);
            self.words.set(r, REMOVED, self.clock);
            if let Some(prev) = prev {
                self.add_pair(w, prev, l, Side::LeftNew);
            }
            if let Some(next) = next {
                self.add_pair(w, l, next, Side::RightNew);
            }
        }
        self.merging = positions;
    }
}

/// The distinct pairs of neighbouring characters in a part of the words, in the
/// order they first come: each one's key, how many times it occurs and the sum
/// of its words' counts.
#[derive(Default)]
struct PartPairs {
    keys: Vec<u64>,
    places: Vec<u32>,
    counts: Vec<u64>,
}

/// A part of the words for [`Trainer::first_pairs`]: its cells (from the first
/// word's header), where they are in all the cells, and where its words start
/// there (one more: where the part ends).
struct PartCells<'c> {
    cells: &'c mut [Cell],
    base: usize,
    starts: &'c [usize],
}

impl PartCells<'_> {
    /// The part's distinct pairs ([`PartPairs`]); each pair's number among them is
    /// left in its left cell's stamp.
    fn count_pairs(&mut self) -> PartPairs {
        // Pairs of the most frequent characters (the first ids), looked up in a
        // table rather than hashed: nine in ten pairs of English.
        const MEMO: u32 = 128;
        const UNSET: u32 = u32::MAX;
        let mut memo = vec![UNSET; (MEMO * MEMO) as usize];
        let mut numbers: FxHashMap<u64, u32> = FxHashMap::default();
        let mut pairs = PartPairs::default();
        let (starts, base) = (self.starts, self.base);
        for bounds in starts.windows(2) {
            let (w, end) = (bounds[0] - base, bounds[1] - base);
            let cells = &mut self.cells[w..end];
            let count = u64::from(cells[0].stamp) | u64::from(cells[1].stamp) << 32;
            for i in HEADER + 1..cells.len() {
                let (a, b) = (cells[i - 1].symbol, cells[i].symbol);
                let key = pair_key(a, b);
                let mut number = || {
                    let next = pairs.keys.len() as u32;
                    let j = *numbers.entry(key).or_insert(next);
                    if j == next {
                        pairs.keys.push(key);
                        pairs.places.push(0);
                        pairs.counts.push(0);
                    }
                    j
                };
                let j = if a < MEMO && b < MEMO {
                    let slot = &mut memo[(a * MEMO + b) as usize];
                    if *slot == UNSET {
                        *slot = number();
                    }
                    *slot
                } else {
                    number()
                };
                pairs.places[j as usize] += 1;
                pairs.counts[j as usize] += count;
                cells[i - 1].stamp = j;
            }
        }
        pairs
    }

    /// Writes each pair's occurrences, in word order, into `share` (by the pair's
    /// number; empty for a pair that is not a piece); the stamps go back to 0.
    fn write_pairs(&mut self, mut share: Vec<&mut [u64]>) {
        let mut filled = vec![0usize; share.len()];
        let (starts, base) = (self.starts, self.base);
        for bounds in starts.windows(2) {
            let (w, end) = (bounds[0] - base, bounds[1] - base);
            // A word's last cell starts no pair.
            for i in w + HEADER..end.saturating_sub(1).max(w + HEADER) {
                let j = std::mem::replace(&mut self.cells[i].stamp, 0) as usize;
                if let Some(slot) = share[j].get_mut(filled[j]) {
                    *slot = encode_pos(bounds[0], base + i);
                    filled[j] += 1;
                }
            }
        }
    }
}

/// `f` over `items`, on `pool`'s threads (or this one): its results in order.
pub(super) fn on_threads<I: Send, R: Send>(
    pool: Option<&rayon::ThreadPool>,
    items: Vec<I>,
    f: impl Fn(I) -> R + Sync,
) -> Vec<R> {
    use rayon::prelude::*;
    match pool {
        Some(pool) if items.len() > 1 => pool.install(|| items.into_par_iter().map(&f).collect()),
        _ => items.into_iter().map(f).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ascii_scripts_are_unicodes() {
        for c in (0u8..=127).map(char::from) {
            let want = match c.script() {
                Script::Unknown => Script::Common,
                s => s,
            };
            assert_eq!(script_of(c), want, "{c:?}");
        }
    }

    #[test]
    fn text_order_sorts_as_the_texts_do() {
        // Lengths around the 16-byte prefix, shared prefixes, multi-byte characters.
        let stems = [
            "",
            "a",
            "ab",
            "\u{2581}",
            "abcdefghijklmno",
            "abcdefghijklmnop",
        ];
        let tails = [
            "",
            "a",
            "b",
            "\u{2581}the",
            "qrstuvwxyz",
            "\u{ff}",
            "\u{10ffff}",
        ];
        let mut texts: Vec<Arc<str>> = Vec::new();
        for stem in stems {
            for tail in tails {
                for more in tails {
                    texts.push(format!("{stem}{tail}{more}").into());
                }
            }
        }
        for a in &texts {
            for b in &texts {
                assert_eq!(
                    TextOrder::of(a).cmp(&TextOrder::of(b)),
                    a.cmp(b),
                    "{a:?} vs {b:?}"
                );
            }
            // The text is kept in its order, whole.
            let mut kept = String::from("x");
            TextOrder::of(a).push_text(a.len(), &mut kept);
            assert_eq!(kept, format!("x{a}"));
        }
    }

    /// Words of a few letters, counted as in a Zipfian corpus: many pairs, their
    /// counts spread out (a pseudo-random generator, seeded, so always the same).
    fn zipf_words(n: usize, seed: u64) -> Vec<(String, u64)> {
        let letters: Vec<char> = "abcdefghijklmnopqrstuvwxyzéèàôçñßøåæ".chars().collect();
        zipf_words_of(&letters, n, seed)
    }

    fn zipf_words_of(letters: &[char], n: usize, seed: u64) -> Vec<(String, u64)> {
        let mut next = crate::testing::seeded(seed);
        // Distinct words, as the trainer gets them (a word drawn twice counts twice).
        let mut counts: std::collections::BTreeMap<String, u64> = Default::default();
        for rank in 0..n {
            let len = 2 + next(8) as usize;
            let w: String = (0..len)
                .map(|_| letters[next(letters.len() as u64) as usize])
                .collect();
            *counts.entry(format!("{SPACE}{w}")).or_default() +=
                20_000 / (rank as u64 + 1) + next(3);
        }
        // In sentencepiece's order: count descending, then string.
        let mut words: Vec<(String, u64)> = counts.into_iter().collect();
        words.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        words
    }

    /// Every rebuild checks its choice against the choice among all live pairs
    /// ([`Trainer::check_narrowed`]); the pieces are those learned looking at all.
    #[test]
    fn rebuilds_among_pairs_over_half_the_last_cut_choose_as_among_all() {
        let validity = Validity::default();
        for seed in [1, 2, 3] {
            let owned = zipf_words(6000, seed);
            let words: Vec<(&str, u64)> = owned.iter().map(|(w, n)| (w.as_str(), *n)).collect();
            let learn = |narrow: bool| {
                let mut t = Trainer::new(&words, &validity, None).unwrap();
                t.narrow = narrow;
                let pieces = t.learn(3000, |_| true).unwrap();
                (pieces, t.narrowed)
            };
            let (all, none) = learn(false);
            let (narrowed, used) = learn(true);
            assert_eq!(none, 0);
            // Most of the 30 rebuilds took the narrow road; the pieces are the same.
            assert!(used > 15, "seed {seed}: {used} of 30 rebuilds narrowed");
            assert_eq!(narrowed, all, "seed {seed}");
        }
    }

    /// The first pairs added one by one in word order: what [`Trainer::first_pairs`]
    /// must come to.
    fn first_pairs_one_by_one(t: &mut Trainer, starts: &[usize]) {
        for k in 0..starts.len() - 1 {
            let (w, end) = (starts[k], starts[k + 1]);
            for i in w + HEADER + 1..end {
                let (a, b) = (t.words.at(i - 1), t.words.at(i));
                if let Some(id) = t.pair_symbol(a, b) {
                    t.add_occurrence(id, w, i - 1);
                }
            }
        }
    }

    /// What the merge loop starts from: each symbol's text, pair and count, each
    /// pair symbol's occurrences in order, the pairs looked up, and the cells.
    type Start = (
        Vec<(String, u32, u32, u64)>,
        Vec<Vec<u64>>,
        Vec<(u64, u32)>,
        Vec<(u32, u32)>,
    );

    fn start_of(t: &Trainer) -> Start {
        let symbols = t.symbols.iter().zip(&t.state).map(|(s, state)| {
            let mut text = String::new();
            s.push_text(&mut text);
            (text, s.left, s.right, state.freq)
        });
        let lists = t
            .symbols
            .iter()
            .map(|s| t.lists.entries(&s.positions).to_vec());
        let mut pairs: Vec<(u64, u32)> = t.pairs.iter().map(|(&k, &v)| (k, v)).collect();
        pairs.sort_unstable();
        let cells = t.words.cells.iter().map(|c| (c.symbol, c.stamp));
        (symbols.collect(), lists.collect(), pairs, cells.collect())
    }

    /// Counted in parts on any number of threads, the first pairs are those added one
    /// by one: the same symbols in the same order, counts, occurrences in word order,
    /// lookups (pairs that are no piece too) and cells; and the same pieces follow.
    /// Words of more than 128 characters (hashed, not in the table) and of mixed
    /// scripts (pairs that are no piece), and of one character.
    #[test]
    fn first_pairs_counted_in_parts_are_those_added_one_by_one() {
        let validity = Validity::default();
        let mut letters: Vec<char> = ('a'..='z').chain('\u{e0}'..='\u{ff}').collect();
        letters.extend(('\u{3b1}'..='\u{3c9}').chain('\u{4e00}'..='\u{4e63}'));
        letters.extend([SPACE, UNK_CHAR, '1', '2']);
        let mut owned = zipf_words_of(&letters, 4000, 5);
        owned.push(("x".to_string(), 1));
        let words: Vec<(&str, u64)> = owned.iter().map(|(w, n)| (w.as_str(), *n)).collect();
        let (mut want, starts) = Trainer::laid_out(&words, &validity).unwrap();
        first_pairs_one_by_one(&mut want, &starts);
        assert!(want.symbols.len() > 1000 && want.pairs.values().any(|&v| v == NOT_A_PIECE));
        let want_start = start_of(&want);
        let pieces = want.learn(1500, |_| true).unwrap();
        for threads in [1, 2, 3, 8] {
            let pool = crate::io::test_pool(threads);
            let pool = (threads > 1).then_some(&pool);
            let mut got = Trainer::new(&words, &validity, pool).unwrap();
            assert!(start_of(&got) == want_start, "{threads} threads");
            assert_eq!(
                got.learn(1500, |_| true).unwrap(),
                pieces,
                "{threads} threads"
            );
        }
    }
}
