//! A text file as the documents between separators, a block at a time: what a shard
//! folder is written from (`bytepair.shards`), read by the core instead of Python.
//!
//! The documents are those of Python's text source (`bytepair/sources/text.py`): the
//! text between separators (leftmost, longest first), separators in no document,
//! empty documents dropped. A document that spans blocks comes in parts, each with
//! whether it begins and ends its document; blocks are cut only at safe cuts, so the
//! parts encode to the ids of the whole document.

#[cfg(any(test, doc))]
use super::blocks::open_input;
use super::blocks::{decode_block, BlockReader, Input, ReadError, Utf8Errors};
use super::chunking::TextCuts;
use crate::pretok::SpecialMatcher;

/// One block's items: parts of documents, in order.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Items {
    /// The block's text.
    pub text: String,
    /// Each item's byte range in `text`.
    pub spans: Vec<(usize, usize)>,
    /// Each item's document, numbered from the reader's first.
    pub docs: Vec<u64>,
    /// Whether each item begins its document.
    pub firsts: Vec<bool>,
    /// Whether each item ends its document.
    pub lasts: Vec<bool>,
    /// File offsets where the block starts and ends (bytes of the file: with
    /// `Utf8Errors::Replace`, `text` may be longer).
    pub start: u64,
    pub end: u64,
}

/// Reads a file's documents a block at a time ([`DocumentReader::next_items`]).
pub struct DocumentReader {
    reader: BlockReader,
    separators: SpecialMatcher,
    /// Where blocks may not be cut inside: the separators and the special tokens.
    cut_at: SpecialMatcher,
    cuts: TextCuts,
    errors: Utf8Errors,
    block_bytes: usize,
    /// The number the next document gets.
    next_doc: u64,
    /// The open document (one a block ended inside) has items handed out already.
    started: bool,
}

impl super::pipeline::Texts for Items {
    fn count(&self) -> usize {
        self.spans.len()
    }

    fn text(&self, i: usize) -> &str {
        let (a, b) = self.spans[i];
        &self.text[a..b]
    }

    fn starts_text(&self, i: usize) -> bool {
        self.firsts[i]
    }
}

impl DocumentReader {
    /// `input`: the file ([`open_input`]) or a compressed one's bytes; `separators`:
    /// what documents are separated by; `specials`: tokens blocks must not be cut
    /// inside (those the encoder matches); `first_doc`: the number of the file's first
    /// document.
    pub fn open(
        input: Input,
        separators: &[String],
        specials: &[String],
        cuts: TextCuts,
        errors: Utf8Errors,
        block_bytes: usize,
        first_doc: u64,
    ) -> Result<Self, ReadError> {
        let both: Vec<String> = separators.iter().chain(specials).cloned().collect();
        Ok(Self {
            reader: BlockReader::new(input),
            separators: SpecialMatcher::new(separators).map_err(ReadError::Other)?,
            cut_at: SpecialMatcher::new(&both).map_err(ReadError::Other)?,
            cuts,
            errors,
            block_bytes,
            next_doc: first_doc,
            started: false,
        })
    }

    /// The number the next document gets: after the last block, the first document
    /// number after this file's.
    pub fn next_doc(&self) -> u64 {
        self.next_doc
    }

    /// The next block's items, or None at the end of the file. A block may hold no
    /// item (only separators, or empty documents).
    pub fn next_items(&mut self) -> Result<Option<Items>, ReadError> {
        let Some((bytes, offset)) =
            self.reader
                .next_block(&self.cut_at, self.cuts, self.block_bytes)?
        else {
            return Ok(None);
        };
        let at_end = self.reader.at_end();
        let mut items = Items {
            start: offset,
            end: offset + bytes.len() as u64,
            ..Items::default()
        };
        let text = decode_block(bytes, offset, self.errors)?;
        let mut from = 0;
        for (start, end, _) in self.separators.find_all(text.as_bytes()) {
            self.push(&mut items, from, start, true);
            from = end;
        }
        self.push(&mut items, from, text.len(), at_end);
        items.text = text;
        Ok(Some(items))
    }

    /// Adds the item `from..to` (`last`: its document ends there), unless it is
    /// empty and nothing of its document came before: an empty document is dropped,
    /// and an empty part that does not end its document says nothing.
    fn push(&mut self, items: &mut Items, from: usize, to: usize, last: bool) {
        if from == to && !(last && self.started) {
            if last {
                self.started = false;
            }
            return;
        }
        items.spans.push((from, to));
        items.docs.push(self.next_doc);
        items.firsts.push(!self.started);
        items.lasts.push(last);
        if last {
            self.next_doc += 1;
            self.started = false;
        } else {
            self.started = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The items of `text` as (item text, doc, first, last), read in blocks of about
    /// `block` bytes.
    fn items(text: &str, separators: &[&str], block: usize) -> Vec<(String, u64, bool, bool)> {
        let dir = std::env::temp_dir().join(format!(
            "bytepair-docs-{}-{}",
            std::process::id(),
            text.len() * 31 + block
        ));
        std::fs::write(&dir, text).unwrap();
        let seps: Vec<String> = separators.iter().map(|s| s.to_string()).collect();
        let path = dir.to_str().unwrap();
        let mut reader = DocumentReader::open(
            open_input(path).unwrap(),
            &seps,
            &[],
            TextCuts::Pattern,
            Utf8Errors::Strict,
            block,
            0,
        )
        .unwrap();
        let mut out = Vec::new();
        while let Some(items) = reader.next_items().unwrap() {
            for (k, &(a, b)) in items.spans.iter().enumerate() {
                out.push((
                    items.text[a..b].to_string(),
                    items.docs[k],
                    items.firsts[k],
                    items.lasts[k],
                ));
            }
        }
        std::fs::remove_file(&dir).unwrap();
        out
    }

    /// Whole documents from the items: what must equal the text split at separators.
    fn documents(items: &[(String, u64, bool, bool)]) -> Vec<String> {
        let mut docs: Vec<String> = Vec::new();
        for (k, (text, doc, first, last)) in items.iter().enumerate() {
            if *first {
                assert_eq!(*doc as usize, docs.len(), "documents numbered in order");
                docs.push(String::new());
            } else {
                assert_eq!(items[k - 1].1, *doc, "a part continues its document");
                assert!(!items[k - 1].3, "a document ended before this part");
            }
            docs.last_mut().unwrap().push_str(text);
            if k + 1 == items.len() {
                assert!(*last, "the file ends its last document");
            }
        }
        docs
    }

    #[test]
    fn documents_are_the_text_between_separators_without_empty_ones() {
        let text = "one. two\n<|e|><|e|>three\n\nfour. five<|e|>x<|e|>";
        let want = vec!["one. two\n", "three\n\nfour. five", "x"];
        for block in [1, 2, 3, 5, 8, 13, 64, 1 << 20] {
            let got = items(text, &["<|e|>"], block);
            assert_eq!(documents(&got), want, "blocks of {block}");
        }
        assert_eq!(documents(&items("", &["<|e|>"], 4)), Vec::<String>::new());
        assert_eq!(
            documents(&items("<|e|>", &["<|e|>"], 4)),
            Vec::<String>::new()
        );
        assert_eq!(documents(&items("a b", &[], 1)), vec!["a b"]);
    }

    #[test]
    fn blocks_end_at_file_offsets_even_where_invalid_utf8_was_replaced() {
        let path = std::env::temp_dir().join(format!("bytepair-docs-bad-{}", std::process::id()));
        let mut bytes = b"one\xff two\n".repeat(40);
        bytes.extend_from_slice(b"<|e|>tail\xfe");
        std::fs::write(&path, &bytes).unwrap();
        let seps = vec!["<|e|>".to_string()];
        let mut reader = DocumentReader::open(
            open_input(path.to_str().unwrap()).unwrap(),
            &seps,
            &[],
            TextCuts::Pattern,
            Utf8Errors::Replace,
            50,
            0,
        )
        .unwrap();
        let mut at = 0;
        while let Some(items) = reader.next_items().unwrap() {
            assert_eq!(items.start, at);
            assert!(items.text.len() >= (items.end - items.start) as usize);
            at = items.end;
        }
        std::fs::remove_file(&path).unwrap();
        assert_eq!(at, bytes.len() as u64);
    }

    #[test]
    fn the_longest_separator_wins_where_two_start() {
        let got = items("a<|e|>b<|e|>|c", &["<|e|>", "<|e|>|"], 1 << 10);
        assert_eq!(documents(&got), vec!["a", "b", "c"]);
    }

    #[test]
    fn long_documents_come_in_parts_cut_only_at_safe_points() {
        let doc = "Word after word.\nAnd a line.\n".repeat(200);
        let text = format!("{doc}<|e|>{doc}");
        let got = items(&text, &["<|e|>"], 100);
        assert!(got.len() > 4, "parts: {}", got.len());
        assert_eq!(documents(&got), vec![doc.clone(), doc]);
    }
}
