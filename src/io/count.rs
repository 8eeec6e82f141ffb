//! Counting pre-tokens: the map step of training.
//!
//! Training only needs how often each distinct pre-token occurs, so this is where
//! the corpus is read. Counts from separate chunks add up (a map-reduce), which is
//! what lets a file be read in blocks and counted on several threads — with a
//! result that does not depend on the number of threads or the block size, because
//! blocks are cut only at safe points (`chunking`).

use std::sync::Mutex;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

#[cfg(any(test, doc))]
use super::blocks::open_input;
use super::blocks::{for_each_part, for_each_part_of, BlockReader, BlockSource, Input};
pub use super::blocks::{ReadError, Utf8Errors, BLOCK_BYTES};
use super::chunking::{split_evenly, TextCuts};
use super::documents::Items;
use crate::packed::{key_hash, pack_pieces, packed, packed_all, PackedMap, Tally, MAX_PACKED};
use crate::pretok::{for_each_unit, Builtin, PreTokenizer, SpecialMatcher, Unit, WINDOW_STARTS};

/// Distinct pre-token bytes → number of occurrences. Pieces that pack into an integer
/// (nearly all) are kept by that key, longer ones by their bytes: no allocation per
/// distinct piece. (A `HashMap<Vec<u8>, u64>` of the 3.7 M distinct pieces of a 2.2 GB
/// corpus cost an allocation each to build and a free each to drop, 2-3 s of training
/// on one thread while the other waited.)
#[derive(Debug, Clone, Default)]
pub struct Counts {
    small: PackedMap<u64>,
    long: FxHashMap<Vec<u8>, u64>,
}

/// A counted piece's bytes, as [`Counts::iter`] gives them: packed ([`packed`]'s
/// layout as little-endian bytes: the piece, then its length in the last byte), or
/// borrowed.
#[derive(Debug, Clone, Copy)]
pub enum PieceBytes<'a> {
    Packed([u8; 16]),
    Long(&'a [u8]),
}

impl AsRef<[u8]> for PieceBytes<'_> {
    fn as_ref(&self) -> &[u8] {
        match self {
            PieceBytes::Packed(b) => &b[..b[15] as usize],
            PieceBytes::Long(b) => b,
        }
    }
}

impl Counts {
    /// Adds `n` occurrences of `piece`.
    pub fn add(&mut self, piece: &[u8], n: u64) {
        if (1..=MAX_PACKED).contains(&piece.len()) {
            let key = packed_all(piece);
            *self.small.entry(key, key_hash(key)) += n;
        } else {
            add_long(&mut self.long, piece, n);
        }
    }

    /// Adds all of `other`'s counts (its keys move in).
    pub fn add_all(&mut self, other: Counts) {
        self.small.add_all(other.small);
        for (piece, n) in other.long {
            *self.long.entry(piece).or_insert(0) += n;
        }
    }

    /// Adds all of `other`'s counts, leaving it as it is.
    pub fn add_counts_of(&mut self, other: &Counts) {
        self.small.add_counts_of(&other.small);
        for (piece, &n) in &other.long {
            add_long(&mut self.long, piece, n);
        }
    }

    /// How often `piece` was counted.
    pub fn get(&self, piece: &[u8]) -> Option<u64> {
        if (1..=MAX_PACKED).contains(&piece.len()) {
            let key = packed_all(piece);
            self.small.get(key, key_hash(key))
        } else {
            self.long.get(piece).copied()
        }
    }

    /// The number of distinct pieces.
    pub fn len(&self) -> usize {
        self.small.len() + self.long.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every piece and its count, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (PieceBytes<'_>, u64)> + Clone + '_ {
        let small = self.small.iter();
        let small = small.map(|(k, n)| (PieceBytes::Packed(k.to_le_bytes()), n));
        let long = self.long.iter().map(|(k, &n)| (PieceBytes::Long(k), n));
        small.chain(long)
    }
}

/// Adds `n` occurrences of a piece too long to pack; its bytes are copied only when
/// it is new.
fn add_long(long: &mut FxHashMap<Vec<u8>, u64>, piece: &[u8], n: u64) {
    match long.get_mut(piece) {
        Some(c) => *c += n,
        None => {
            long.insert(piece.to_vec(), n);
        }
    }
}

impl PartialEq for Counts {
    fn eq(&self, other: &Counts) -> bool {
        self.len() == other.len() && self.iter().all(|(k, n)| other.get(k.as_ref()) == Some(n))
    }
}

impl<K: AsRef<[u8]>> FromIterator<(K, u64)> for Counts {
    fn from_iter<I: IntoIterator<Item = (K, u64)>>(items: I) -> Self {
        let mut counts = Counts::default();
        for (piece, n) in items {
            counts.add(piece.as_ref(), n);
        }
        counts
    }
}

/// Counts of one part of the text: pieces that pack into an integer (nearly all) by
/// that key, longer ones borrowed from the text.
#[derive(Default)]
pub struct PartCounts<'t> {
    small: Tally,
    long: FxHashMap<&'t [u8], u64>,
}

/// Adds the pre-tokens of `text` to `counts`.
pub fn count_text<'t>(
    text: &'t str,
    specials: &SpecialMatcher,
    pre: &PreTokenizer,
    counts: &mut PartCounts<'t>,
) -> Result<(), String> {
    let bytes = text.as_bytes();
    if let Some(builtin) = pre.builtin_alone() {
        let mut from = 0;
        for (start, end, _) in specials.find_all(bytes) {
            count_walk(builtin, &text[..start], from, counts);
            from = end;
        }
        count_walk(builtin, text, from, counts);
        return Ok(());
    }
    for_each_unit(text, specials, pre, |u| {
        if let Unit::Piece { start, end } = u {
            if end - start <= MAX_PACKED {
                counts.small.add(packed(bytes, start, end));
            } else {
                *counts.long.entry(&bytes[start..end]).or_insert(0) += 1;
            }
        }
    })
}

/// Counts the pieces of `text[from..]` (free of special tokens; a prefix of the whole
/// text, so offsets are the same) a batch of [`WALK_BATCH`] at a time, as the encoder
/// walks them: their ends ([`Builtin::walker`]), then their keys with each table slot
/// prefetched, then the counts, which by then find their slots in the CPU cache — no
/// call and no queue per piece.
fn count_walk<'t>(builtin: Builtin, text: &'t str, from: usize, counts: &mut PartCounts<'t>) {
    let bytes = text.as_bytes();
    let mut walker = builtin.walker(text, from);
    let mut ends = [0usize; WALK_BATCH + WINDOW_STARTS];
    let mut keys = [(0u128, 0u64); WALK_BATCH + WINDOW_STARTS];
    while let Some((first, n)) = walker.next_batch(&mut ends) {
        pack_pieces(
            bytes,
            first,
            &ends[..n],
            &mut keys,
            |h| counts.small.prefetch(h),
            |_| 0,
        );
        let mut start = first;
        for (&end, &(key, hash)) in ends[..n].iter().zip(&keys) {
            if end - start <= MAX_PACKED {
                counts.small.add_now(key, hash);
            } else {
                *counts.long.entry(&bytes[start..end]).or_insert(0) += 1;
            }
            start = end;
        }
    }
}

/// Pieces [`count_walk`] finds before counting any.
const WALK_BATCH: usize = 64;

/// The short pieces' counts of a file while it is read, in tables the threads count
/// into: a part takes a table, counts into it and puts it back, so there are as many
/// tables as parts run at once, each kept from part to part and block to block, and
/// they are added together once, when the file is read. Counts add up, so which table
/// counted which part changes nothing. (Adding every part's table into one total on
/// the calling thread, while the other threads waited, cost a random access to the
/// total per distinct piece of each part: with 3.7 M distinct pieces, a table far
/// larger than the CPU's caches, that serial step grew with the corpus.)
#[derive(Default)]
struct Tables(Mutex<Vec<PackedMap<u64>>>);

impl Tables {
    fn take(&self) -> PackedMap<u64> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default()
    }

    fn give_back(&self, table: PackedMap<u64>) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(table);
    }

    /// All the tables' counts in one table.
    fn into_total(self) -> PackedMap<u64> {
        let tables = self.0.into_inner().unwrap_or_else(|e| e.into_inner());
        let mut tables = tables.into_iter();
        let mut total = tables.next().unwrap_or_default();
        tables.for_each(|table| total.add_all(table));
        total
    }
}

/// Adds a part's counts into the owned table.
fn absorb(total: &mut Counts, part: PartCounts) {
    total.small.add_all(part.small.into_counts());
    for (piece, n) in part.long {
        total.add(piece, n);
    }
}

/// Where a block of text that starts and ends at safe cuts is cut into parts for the
/// threads of a pool: a few parts per thread (which keeps them busy when parts differ
/// in cost), each of at least `min_part` bytes. The parts' ends.
fn plan_block(
    text: &str,
    specials: &SpecialMatcher,
    pre: &PreTokenizer,
    threads: usize,
    min_part: usize,
) -> Vec<usize> {
    let bytes = text.as_bytes();
    let parts = if threads == 1 {
        1
    } else {
        (threads * 4).min(bytes.len() / min_part.max(1)).max(1)
    };
    let matches = specials.find_all(bytes);
    split_evenly(
        bytes,
        bytes.len(),
        parts,
        &matches,
        TextCuts::of(pre),
        specials,
    )
}

/// Counts one part of a block, one or more texts each pre-tokenized on its own: short
/// pieces into one of `tables`, longer ones (rare) into `long`.
fn count_part<'t>(
    texts: impl IntoIterator<Item = &'t str>,
    specials: &SpecialMatcher,
    pre: &PreTokenizer,
    tables: &Tables,
    long: &Mutex<FxHashMap<Vec<u8>, u64>>,
) -> Result<(), String> {
    let mut m = PartCounts {
        small: Tally::with_counts(tables.take()),
        long: FxHashMap::default(),
    };
    let counted = texts
        .into_iter()
        .try_for_each(|text| count_text(text, specials, pre, &mut m));
    tables.give_back(m.small.into_counts());
    counted?;
    if !m.long.is_empty() {
        let mut long = long.lock().unwrap_or_else(|e| e.into_inner());
        for (piece, n) in m.long {
            add_long(&mut long, piece, n);
        }
    }
    Ok(())
}

/// Counts the pre-tokens of a whole file (`input`: [`open_input`], or a compressed
/// file's bytes), reading it in blocks cut at safe points while the pool counts the
/// block before ([`for_each_part`]). `progress(bytes_read)` is called after each block
/// is counted; returning false stops.
pub fn count_file(
    input: Input,
    specials: &SpecialMatcher,
    pre: &PreTokenizer,
    errors: Utf8Errors,
    pool: &rayon::ThreadPool,
    block_bytes: usize,
    progress: impl FnMut(u64) -> bool,
) -> Result<Counts, ReadError> {
    let counting = Counting::new(pool, block_bytes);
    for_each_part(
        BlockReader::new(input),
        specials,
        TextCuts::of(pre),
        errors,
        block_bytes,
        pool,
        |text| plan_block(text, specials, pre, counting.threads, counting.min_part),
        |part| counting.part([part], specials, pre),
        until_stopped(progress),
    )?;
    Ok(counting.into_counts())
}

/// What the parts of a file's counting share: the tables they count into
/// ([`Tables`]), the long pieces, and how blocks are cut into parts.
struct Counting {
    tables: Tables,
    long: Mutex<FxHashMap<Vec<u8>, u64>>,
    threads: usize,
    /// The least bytes of a part.
    min_part: usize,
}

impl Counting {
    fn new(pool: &rayon::ThreadPool, block_bytes: usize) -> Self {
        Self {
            tables: Tables::default(),
            long: Mutex::default(),
            threads: pool.current_num_threads().max(1),
            min_part: (block_bytes / 16).max(1),
        }
    }

    /// Counts one part ([`count_part`]).
    fn part<'t>(
        &self,
        texts: impl IntoIterator<Item = &'t str>,
        specials: &SpecialMatcher,
        pre: &PreTokenizer,
    ) -> Result<(), String> {
        count_part(texts, specials, pre, &self.tables, &self.long)
    }

    fn into_counts(self) -> Counts {
        Counts {
            small: self.tables.into_total(),
            long: self.long.into_inner().unwrap_or_else(|e| e.into_inner()),
        }
    }
}

/// `progress` as the `done` of [`for_each_part_of`]: false stops the reading.
fn until_stopped(
    mut progress: impl FnMut(u64) -> bool,
) -> impl FnMut(u64) -> Result<(), ReadError> {
    move |end| {
        if progress(end) {
            Ok(())
        } else {
            Err(ReadError::Interrupted)
        }
    }
}

/// Blocks of documents read by a closure ([`Items`]: a JSON Lines file's records).
struct ItemBlocks<F>(F);

impl<F: FnMut() -> Result<Option<Items>, ReadError>> BlockSource for ItemBlocks<F> {
    type Block = Items;

    fn next_block(&mut self) -> Result<Option<(Items, u64)>, ReadError> {
        Ok((self.0)()?.map(|items| {
            let end = items.end;
            (items, end)
        }))
    }
}

/// Counts the documents of the blocks `next` reads (each item of a block a document
/// of its own: a JSON Lines file's records), on `pool` while the calling thread reads
/// the next block ([`for_each_part_of`]), as [`count_file`] counts a text file's.
/// A block's documents are grouped into a few parts per thread, and a document longer
/// than a part is cut at safe cuts into parts of its own. `progress(end)` after each
/// block, in order (`end`: the file offset where it ends); returning false stops.
pub fn count_items(
    next: impl FnMut() -> Result<Option<Items>, ReadError>,
    specials: &SpecialMatcher,
    pre: &PreTokenizer,
    pool: &rayon::ThreadPool,
    block_bytes: usize,
    progress: impl FnMut(u64) -> bool,
) -> Result<Counts, ReadError> {
    let counting = Counting::new(pool, block_bytes);
    let (threads, min_part) = (counting.threads, counting.min_part);
    for_each_part_of(
        &mut ItemBlocks(next),
        pool,
        |items: &Items| plan_items(items, specials, pre, threads, min_part),
        |items: &Items, spans: Vec<(usize, usize)>| {
            let texts = spans.into_iter().map(|(a, b)| &items.text[a..b]);
            counting.part(texts, specials, pre)
        },
        until_stopped(progress),
    )?;
    Ok(counting.into_counts())
}

/// A block of documents' parts for [`count_items`]: each a list of texts (byte ranges
/// of `items.text`) counted one after another, about the same size, a few per thread
/// and each of at least `min_part` bytes. A document longer than that is cut at safe
/// cuts (as [`plan_block`] cuts a text file's block) into parts of its own.
fn plan_items(
    items: &Items,
    specials: &SpecialMatcher,
    pre: &PreTokenizer,
    threads: usize,
    min_part: usize,
) -> Vec<Vec<(usize, usize)>> {
    let total = items.text.len();
    let size = if threads == 1 {
        total.max(1)
    } else {
        (total / (threads * 4)).max(min_part)
    };
    let mut parts = Vec::new();
    let mut part = Vec::new();
    let mut bytes = 0;
    for &(a, b) in &items.spans {
        if b - a > size {
            let doc = &items.text[a..b];
            let ends = split_evenly(
                doc.as_bytes(),
                doc.len(),
                (b - a).div_ceil(size),
                &specials.find_all(doc.as_bytes()),
                TextCuts::of(pre),
                specials,
            );
            let mut from = a;
            parts.extend(ends.into_iter().map(|end| {
                let range = (from, a + end);
                from = a + end;
                vec![range]
            }));
            continue;
        }
        part.push((a, b));
        bytes += b - a;
        if bytes >= size {
            parts.push(std::mem::take(&mut part));
            bytes = 0;
        }
    }
    if !part.is_empty() {
        parts.push(part);
    }
    parts
}

/// Counts in-memory documents; each document is pre-tokenized on its own (no piece
/// crosses from one document to the next).
pub fn count_documents<D: AsRef<str> + Sync>(
    docs: &[D],
    specials: &SpecialMatcher,
    pre: &PreTokenizer,
    pool: &rayon::ThreadPool,
    total: &mut Counts,
) -> Result<(), String> {
    let threads = pool.current_num_threads().max(1);
    let per = docs.len().div_ceil(threads * 4).max(1);
    let parts: Vec<Result<PartCounts, String>> = pool.install(|| {
        docs.par_chunks(per)
            .map(|group| {
                let mut m = PartCounts::default();
                for d in group {
                    count_text(d.as_ref(), specials, pre, &mut m)?;
                }
                Ok(m)
            })
            .collect()
    });
    for part in parts {
        absorb(total, part?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::test_pool as pool;
    use crate::pretok::GPT2_PATTERN;

    #[test]
    fn counts_pieces_and_skips_specials() {
        let specials = SpecialMatcher::new(&["<|e|>".into()]).unwrap();
        let pre = PreTokenizer::new(Some(GPT2_PATTERN)).unwrap();
        let mut total = Counts::default();
        count_documents(&["a a<|e|>a"], &specials, &pre, &pool(1), &mut total).unwrap();
        assert_eq!(total.get(b"a"), Some(2));
        assert_eq!(total.get(b" a"), Some(1));
        assert_eq!(total.len(), 2);
    }

    #[test]
    fn batched_counts_of_the_builtin_patterns_are_the_regex_engines() {
        // Pieces of every kind, special tokens at every position, runs longer than a
        // packed key and than the walker's 64-byte windows.
        let bits = [
            "a",
            "The",
            " cat",
            "  ",
            "\n",
            "\r\n",
            "\u{e9}",
            "\u{65e5}\u{672c}",
            "'s",
            "'LL",
            "123456",
            "!!",
            ".",
            "<|e|>",
            "\t",
            "xxxxxxxxxxxxxxxxxxxxx",
            "                 ",
            "\u{1f600}",
            "\u{dc}n\u{ef}",
            " 7",
            "\u{a0}",
            "DON'T",
            "<|e|><|e|>",
        ];
        let specials = SpecialMatcher::new(&["<|e|>".into()]).unwrap();
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as usize % n
        };
        let docs: Vec<String> = (0..400)
            .map(|_| (0..next(120)).map(|_| bits[next(bits.len())]).collect())
            .collect();
        for pattern in crate::pretok::BUILTIN_PATTERNS {
            let fast = PreTokenizer::new(Some(pattern)).unwrap();
            assert!(fast.builtin_alone().is_some());
            let slow = PreTokenizer::regex_only(Some(pattern)).unwrap();
            let (mut a, mut b) = (Counts::default(), Counts::default());
            count_documents(&docs, &specials, &fast, &pool(2), &mut a).unwrap();
            count_documents(&docs, &specials, &slow, &pool(1), &mut b).unwrap();
            assert_eq!(a, b, "{pattern}");
            assert!(a.get(b"<|e|>").is_none() && a.len() > 50);
        }
    }

    #[test]
    fn file_counts_do_not_depend_on_threads() {
        let dir = std::env::temp_dir().join(format!("bytepair-count-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.txt");
        let line = "The cat sat.\nOn 12345 mats, don't   you\n\n see?<|e|>";
        std::fs::write(&path, line.repeat(5_000)).unwrap();
        let specials = SpecialMatcher::new(&["<|e|>".into()]).unwrap();
        let pre = PreTokenizer::new(Some(GPT2_PATTERN)).unwrap();
        let count = |input: Input, threads, block| {
            let (errors, pool) = (Utf8Errors::Strict, pool(threads));
            count_file(input, &specials, &pre, errors, &pool, block, |_| true).unwrap()
        };
        let p = path.to_str().unwrap();
        let one = count(open_input(p).unwrap(), 1, BLOCK_BYTES);
        let two = count(open_input(p).unwrap(), 2, 1000);
        assert_eq!(one, two);
        assert_eq!(one.get(b" cat"), Some(5_000));
        // The same bytes from a reader that hands out a few at a time (as a
        // decompressor may): the same counts.
        struct Trickle(std::io::Cursor<Vec<u8>>);
        impl std::io::Read for Trickle {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = buf.len().min(7);
                self.0.read(&mut buf[..n])
            }
        }
        let trickle = Trickle(std::io::Cursor::new(std::fs::read(&path).unwrap()));
        assert_eq!(count(Box::new(trickle), 2, 1000), one);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Blocks of `per` documents each, as a JSON Lines reader hands them out.
    fn item_blocks(docs: &[String], per: usize) -> Vec<Items> {
        let mut offset = 0;
        docs.chunks(per)
            .map(|group| {
                let mut items = Items {
                    start: offset,
                    ..Items::default()
                };
                for doc in group {
                    let a = items.text.len();
                    items.text.push_str(doc);
                    items.spans.push((a, items.text.len()));
                    items.firsts.push(true);
                    items.lasts.push(true);
                }
                offset += items.text.len() as u64;
                items.end = offset;
                items
            })
            .collect()
    }

    #[test]
    fn counted_items_are_their_documents_counts_however_they_are_parted() {
        // Documents of very different lengths, one far longer than any part (cut at
        // safe cuts into parts of its own), empty ones, and specials at their edges.
        // Most end in a word and begin with one, which would join were two counted as
        // one text.
        let mut docs: Vec<String> = (0..40)
            .map(|i| "The cat sat.\nOn 12345 mats,<|e|>  don't you\n\n see".repeat(i % 7))
            .collect();
        docs.insert(5, "a long one's   words, 2024\r\n".repeat(3_000));
        docs.push("<|e|>x".into());
        let specials = SpecialMatcher::new(&["<|e|>".into()]).unwrap();
        let pre = PreTokenizer::new(Some(GPT2_PATTERN)).unwrap();
        let mut want = Counts::default();
        count_documents(&docs, &specials, &pre, &pool(1), &mut want).unwrap();
        assert_eq!(want.get(b" words"), Some(3_000));
        for (threads, block_bytes, per) in [(1, BLOCK_BYTES, 100), (2, 1000, 3), (3, 16, 1)] {
            let mut blocks = item_blocks(&docs, per).into_iter();
            let mut ends = Vec::new();
            let got = count_items(
                || Ok(blocks.next()),
                &specials,
                &pre,
                &pool(threads),
                block_bytes,
                |end| {
                    ends.push(end);
                    true
                },
            )
            .unwrap();
            assert_eq!(got, want, "{threads} threads, {block_bytes}-byte blocks");
            // Each block reported once, in order (an empty document's block ends where
            // the one before did).
            let last = docs.iter().map(|d| d.len() as u64).sum::<u64>();
            assert_eq!(ends.len(), docs.len().div_ceil(per));
            assert!(ends.windows(2).all(|w| w[0] <= w[1]) && ends.last() == Some(&last));
        }
        // The long document (90 KB) is cut into parts of about an eighth of the block
        // (12 KB) of its own; the parts cover the block's text once.
        let block = &item_blocks(&docs, 100)[0];
        let long = block.spans[5];
        let parts = plan_items(block, &specials, &pre, 2, 1000);
        let own = parts
            .iter()
            .filter(|p| p[0].0 >= long.0 && p[0].1 <= long.1);
        assert!((7..=9).contains(&own.count()));
        let covered: usize = parts.iter().flatten().map(|(a, b)| b - a).sum();
        assert_eq!(covered, block.text.len());
    }

    #[test]
    fn counting_items_stops_at_a_reading_error_or_when_told() {
        let docs: Vec<String> = (0..10).map(|i| format!("doc {i} words")).collect();
        let specials = SpecialMatcher::new(&[]).unwrap();
        let pre = PreTokenizer::new(Some(GPT2_PATTERN)).unwrap();
        let mut blocks = item_blocks(&docs, 2).into_iter().take(2);
        let mut calls = 0;
        let failed = count_items(
            || match blocks.next() {
                Some(items) => Ok(Some(items)),
                None => Err(ReadError::Other("line 5: bad record".into())),
            },
            &specials,
            &pre,
            &pool(2),
            BLOCK_BYTES,
            |_| {
                calls += 1;
                true
            },
        );
        assert!(matches!(failed, Err(ReadError::Other(e)) if e == "line 5: bad record"));
        assert_eq!(
            calls, 2,
            "the blocks before the error were finished in order"
        );
        let mut blocks = item_blocks(&docs, 2).into_iter();
        let stopped = count_items(
            || Ok(blocks.next()),
            &specials,
            &pre,
            &pool(2),
            64,
            |_| false,
        );
        assert!(matches!(stopped, Err(ReadError::Interrupted)));
    }

    #[test]
    fn invalid_utf8_names_the_offset() {
        let dir = std::env::temp_dir().join(format!("bytepair-utf8-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.txt");
        std::fs::write(&path, b"hello \xff world").unwrap();
        let specials = SpecialMatcher::new(&[]).unwrap();
        let pre = PreTokenizer::new(Some(GPT2_PATTERN)).unwrap();
        let err = count_file(
            open_input(path.to_str().unwrap()).unwrap(),
            &specials,
            &pre,
            Utf8Errors::Strict,
            &pool(1),
            BLOCK_BYTES,
            |_| true,
        )
        .unwrap_err();
        assert!(matches!(
            err,
            ReadError::InvalidUtf8 {
                offset: 6,
                byte: 0xff
            }
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
