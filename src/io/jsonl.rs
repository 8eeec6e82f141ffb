//! A JSON Lines file as its records' texts, a block of whole lines at a time: what a
//! shard folder is written from, read by the core instead of Python (whose
//! `json.loads` of every line was half of a JSON Lines shard job's CPU).
//!
//! The records are those of Python's source (`bytepair/sources/jsonl.py`): one a
//! line (lines end at `\n`; the last may end at the end of the file), blank lines
//! (ASCII whitespace only, as `bytes.strip()` sees it) skipped, each record's text the
//! string at a dotted field path, an empty string an empty document. Lines are
//! numbered from 1, blank ones included.
//!
//! Exact by construction: the core takes a record's text only where Python would take
//! the same string — the line is UTF-8, serde_json parses all of it, and the last
//! value under each step of the path (a key given twice: the last one, as in
//! Python's `dict`) is an object, and at the end a string. Any other line (not JSON,
//! `NaN`, a lone surrogate escape in the text, no string at the field...) is handed
//! to the caller's `slow` function: Python's own reading of it, which gives its text,
//! skips it as a bad record, or fails naming it. (One line reads otherwise: nested
//! deeper than Python's recursion limit outside the text, where Python's road fails
//! with a RecursionError and the core reads the text.)

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

#[cfg(any(test, doc))]
use super::blocks::open_input;
use super::blocks::{read_more, valid_utf8, Input, ReadError};
use super::documents::Items;
use super::shards::refused;
use crate::pretok::SpecialMatcher;

/// What the caller's reading of a line the core did not parse gives: Ok(Some(text)),
/// Ok(None) for a record skipped as bad, or the error. Given the line's bytes and its
/// number.
pub type Slow<'a> = dyn FnMut(&[u8], u64) -> Result<Option<String>, ReadError> + 'a;

/// Reads a JSON Lines file's records a block at a time ([`JsonlReader::next_items`]).
pub struct JsonlReader {
    file: Input,
    field: Vec<String>,
    block_bytes: usize,
    /// Bytes read and not yet handed out: from `offset` on, starting a line.
    buf: Vec<u8>,
    offset: u64,
    eof: bool,
    /// Lines before `buf`.
    lines: u64,
    next_doc: u64,
}

impl JsonlReader {
    /// `input`: the file ([`open_input`]) or a compressed one's bytes; `field`: the
    /// path to each record's text (`["meta", "body"]`); `first_doc`: the number of the
    /// file's first record.
    pub fn open(input: Input, field: &[String], block_bytes: usize, first_doc: u64) -> Self {
        Self {
            file: input,
            field: field.to_vec(),
            block_bytes: block_bytes.max(1),
            buf: Vec::new(),
            offset: 0,
            eof: false,
            lines: 0,
            next_doc: first_doc,
        }
    }

    /// The number the next record gets: after the last block, the first number after
    /// this file's.
    pub fn next_doc(&self) -> u64 {
        self.next_doc
    }

    /// The next block's records (whole lines of about `block_bytes`; a longer line
    /// whole), or None at the end of the file. A special token of `forbidden` in a
    /// record's text is an error naming its line. A block may hold no record.
    pub fn next_items(
        &mut self,
        forbidden: &SpecialMatcher,
        slow: &mut Slow,
    ) -> Result<Option<Items>, ReadError> {
        let Some(end) = self.fill()? else {
            return Ok(None);
        };
        let start = self.offset;
        let mut items = Items {
            start,
            end: start + end as u64,
            ..Items::default()
        };
        let mut numbers = Vec::new();
        let block = &self.buf[..end];
        // The block's lines: each ends at a `\n`, the last at the end of the file.
        let mut from = 0;
        while from < block.len() {
            let to = memchr::memchr(b'\n', &block[from..]).map_or(block.len(), |i| from + i);
            self.lines += 1;
            let line = &block[from..to];
            from = to + 1;
            if line
                .iter()
                .all(|&b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
            {
                continue;
            }
            let at = items.text.len();
            if !text_at(line, &self.field, &mut items.text) {
                items.text.truncate(at);
                match slow(line, self.lines)? {
                    Some(text) => items.text.push_str(&text),
                    None => continue,
                }
            }
            items.spans.push((at, items.text.len()));
            items.docs.push(self.next_doc);
            items.firsts.push(true);
            items.lasts.push(true);
            numbers.push(self.lines);
            self.next_doc += 1;
        }
        self.buf.drain(..end);
        self.offset += end as u64;
        // Record by record: two records' texts may join into a token neither holds.
        for (k, &(a, b)) in items.spans.iter().enumerate() {
            if forbidden.is_empty() {
                break;
            }
            if let Some((_, _, i)) = forbidden.find_first(&items.text.as_bytes()[a..b]) {
                let token = &forbidden.tokens()[i];
                return Err(refused(token, format_args!("at line {}", numbers[k])));
            }
        }
        Ok(Some(items))
    }

    /// Reads until `buf` holds `block_bytes` and a line's end, or the end of the
    /// file; where the block ends in `buf` (past its last `\n`, or all of it at the
    /// end of the file), or None when nothing is left.
    fn fill(&mut self) -> Result<Option<usize>, ReadError> {
        let mut searched = 0;
        loop {
            if self.buf.len() >= self.block_bytes || self.eof {
                if let Some(i) = memchr::memrchr(b'\n', &self.buf[searched..]) {
                    return Ok(Some(searched + i + 1));
                }
                if self.eof {
                    return Ok((!self.buf.is_empty()).then_some(self.buf.len()));
                }
                searched = self.buf.len();
            }
            let want = self.block_bytes.max(self.buf.len() / 2);
            self.eof = read_more(&mut self.file, &mut self.buf, want)?;
        }
    }
}

/// Appends the record's text in `line` to `out` and returns true, where Python's
/// `json.loads` and `text_of` would give that string for certain (see the module);
/// else false (`out` may then hold part of a text: the caller cuts it back).
fn text_at(line: &[u8], field: &[String], out: &mut String) -> bool {
    if !valid_utf8(line) {
        return false;
    }
    // SAFETY: just checked to be UTF-8.
    let line = unsafe { std::str::from_utf8_unchecked(line) };
    let mut de = serde_json::Deserializer::from_str(line);
    let start = out.len();
    let found = matches!(AtPath { field, out, start }.deserialize(&mut de), Ok(true));
    found && de.end().is_ok()
}

/// The value at `field` of what is being read, written to `out` from `start` on if
/// it is a string: true then.
struct AtPath<'f, 'o> {
    field: &'f [String],
    out: &'o mut String,
    start: usize,
}

impl<'de> DeserializeSeed<'de> for AtPath<'_, '_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for AtPath<'_, '_> {
    type Value = bool;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_str<E>(self, v: &str) -> Result<bool, E> {
        if !self.field.is_empty() {
            return Ok(false);
        }
        self.out.truncate(self.start);
        self.out.push_str(v);
        Ok(true)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let Some((key, rest)) = self.field.split_first() else {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(false);
        };
        // The last value of the key counts (Python's dict keeps the last one).
        let mut found = false;
        while let Some(is_key) = map.next_key_seed(KeyIs(key))? {
            if is_key {
                found = map.next_value_seed(AtPath {
                    field: rest,
                    out: &mut *self.out,
                    start: self.start,
                })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(false)
    }

    fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_unit<E>(self) -> Result<bool, E> {
        Ok(false)
    }
}

/// Whether a map's key is `.0` (compared as read: no string made for it).
struct KeyIs<'k>(&'k str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E>(self, v: &str) -> Result<bool, E> {
        Ok(v == self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(line: &str, field: &[&str]) -> Option<String> {
        let field: Vec<String> = field.iter().map(|s| s.to_string()).collect();
        let mut out = String::from("before");
        let found = text_at(line.as_bytes(), &field, &mut out);
        assert!(out.starts_with("before"));
        found.then(|| out["before".len()..].to_string())
    }

    #[test]
    fn the_string_at_the_field_is_the_text() {
        assert_eq!(text(r#"{"text": "hi"}"#, &["text"]), Some("hi".into()));
        assert_eq!(
            text(r#" {"id": 3, "text": ""} "#, &["text"]),
            Some("".into())
        );
        assert_eq!(
            text(
                r#"{"a": [1, {"text": 2}], "text": "a\nb\u00e9\ud83d\ude00"}"#,
                &["text"]
            ),
            Some("a\nbé😀".into())
        );
        assert_eq!(
            text(r#"{"meta": {"body": "x", "n": null}}"#, &["meta", "body"]),
            Some("x".into())
        );
        // A key written with escapes is the key.
        assert_eq!(text(r#"{"te\u0078t": "y"}"#, &["text"]), Some("y".into()));
        assert_eq!(text("{\"text\": \"a\"}\r", &["text"]), Some("a".into()));
    }

    #[test]
    fn a_key_given_twice_counts_its_last_value_as_python_does() {
        assert_eq!(
            text(r#"{"text": "a", "text": "b"}"#, &["text"]),
            Some("b".into())
        );
        assert_eq!(text(r#"{"text": "a", "text": 5}"#, &["text"]), None);
        assert_eq!(
            text(r#"{"text": 5, "text": "b"}"#, &["text"]),
            Some("b".into())
        );
        assert_eq!(
            text(r#"{"m": {"b": "a"}, "m": {"c": "x"}}"#, &["m", "b"]),
            None
        );
        assert_eq!(
            text(r#"{"m": {"b": "a"}, "m": {"b": "z"}}"#, &["m", "b"]),
            Some("z".into())
        );
    }

    #[test]
    fn lines_python_might_read_otherwise_are_left_to_it() {
        for line in [
            r#"{"text": 3}"#,
            r#"{"other": "a"}"#,
            r#"["text"]"#,
            r#""text""#,
            r#"{"text": "a"} x"#,
            r#"{"text": "a", "v": NaN}"#,
            r#"{"text": "a", "v": Infinity}"#,
            r#"{"text": "a\ud800"}"#,
            r#"{"text": "a", "v": 01}"#,
            r#"{"text": "a", "v": 1.}"#,
            r#"{"text": "a", "v": .5}"#,
            r#"{"text": "a", "v": 1e}"#,
            r#"{"text": "a", "v": -}"#,
            r#"{"text": "a", "v": tru}"#,
            r#"{"text": "a", "v": "\x"}"#,
            r#"{"text": "a", "v": "\u12"}"#,
            "{\"text\": \"a\", \"v\": \"\u{1}\"}",
            r#"{"text": "a", "v": [1,]}"#,
            r#"{"text": "a", "v": {"k": 1,}}"#,
            r#"{"text": "a",}"#,
            r#"{"text": "a" "v": 1}"#,
            r#"{'text': "a"}"#,
            "{\"text\": \"a\tb\"}",
            "\u{feff}{\"text\": \"a\"}",
            r#"{"text": "a""#,
            r#"{"meta": "a"}"#,
        ] {
            assert_eq!(text(line, &["text"]), None, "{line}");
        }
        assert_eq!(text(r#"{"meta": "a"}"#, &["meta", "body"]), None);
        // What Python reads as the same text (values it takes, such as a float past
        // the largest or a lone surrogate, in a field that is not the text).
        assert_eq!(
            text(r#"{"text": "a", "v": 1e400}"#, &["text"]),
            Some("a".into())
        );
        assert_eq!(
            text(r#"{"text": "a", "v": "\ud800"}"#, &["text"]),
            Some("a".into())
        );
        let mut out = String::new();
        assert!(!text_at(
            b"{\"text\": \"\xff\"}",
            &["text".into()],
            &mut out
        ));
        // Deep nesting where the text is not: skipped unbuilt, as Python reads it
        // (past its recursion limit, about a thousand, Python fails with a
        // RecursionError and the core still reads the text).
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(
            text(&format!(r#"{{"text": "a", "d": {deep}}}"#), &["text"]),
            Some("a".into())
        );
    }

    fn read_all(
        content: &[u8],
        block: usize,
        forbidden: &[&str],
    ) -> Result<Vec<(String, u64)>, String> {
        let path = std::env::temp_dir().join(format!(
            "bytepair-jsonl-{}-{}-{block}",
            std::process::id(),
            content.len()
        ));
        std::fs::write(&path, content).unwrap();
        let forbidden: Vec<String> = forbidden.iter().map(|s| s.to_string()).collect();
        let forbidden = SpecialMatcher::new(&forbidden).unwrap();
        let input = open_input(path.to_str().unwrap()).unwrap();
        let mut reader = JsonlReader::open(input, &["text".into()], block, 10);
        let mut slow = |line: &[u8], n: u64| -> Result<Option<String>, ReadError> {
            match line {
                b"skip" => Ok(None),
                b"fail" => Err(ReadError::Other(format!("line {n} fails"))),
                other => Ok(Some(format!(
                    "slow {n}: {}",
                    String::from_utf8_lossy(other)
                ))),
            }
        };
        let mut got = Vec::new();
        let mut at = 0;
        let result = loop {
            match reader.next_items(&forbidden, &mut slow) {
                Ok(Some(items)) => {
                    assert_eq!(items.start, at, "blocks follow each other");
                    at = items.end;
                    for (k, &(a, b)) in items.spans.iter().enumerate() {
                        assert!(items.firsts[k] && items.lasts[k]);
                        got.push((items.text[a..b].to_string(), items.docs[k]));
                    }
                }
                Ok(None) => {
                    assert_eq!(at, content.len() as u64, "every byte read");
                    assert_eq!(reader.next_doc(), 10 + got.len() as u64);
                    break Ok(got);
                }
                Err(e) => break Err(e.to_string()),
            }
        };
        std::fs::remove_file(&path).unwrap();
        result
    }

    #[test]
    fn records_in_blocks_of_any_size_are_the_lines_in_order() {
        let content = b"{\"text\": \"one\"}\n\n  \t\r\n{\"text\": \"\"}\nskip\n{\"text\": 7}\n\x0c\n{\"text\": \"last\"}";
        let want = vec![
            ("one".to_string(), 10),
            ("".to_string(), 11),
            ("slow 6: {\"text\": 7}".to_string(), 12),
            ("last".to_string(), 13),
        ];
        for block in [1, 2, 7, 16, 40, 1 << 20] {
            assert_eq!(
                read_all(content, block, &[]).unwrap(),
                want,
                "blocks of {block}"
            );
        }
        let mut ended = content.to_vec();
        ended.push(b'\n');
        assert_eq!(read_all(&ended, 5, &[]).unwrap(), want);
        assert_eq!(read_all(b"", 5, &[]).unwrap(), vec![]);
        assert_eq!(read_all(b"\n\n", 5, &[]).unwrap(), vec![]);
    }

    #[test]
    fn the_slow_readers_error_and_a_forbidden_token_name_the_line() {
        let content = b"{\"text\": \"a\"}\n\nfail\n";
        assert_eq!(read_all(content, 4, &[]).unwrap_err(), "line 3 fails");
        let content = b"{\"text\": \"a\"}\n\n{\"text\": \"b <|x|>\"}\n";
        for block in [1, 1 << 20] {
            let e = read_all(content, block, &["<|x|>"]).unwrap_err();
            assert!(
                e.starts_with("the special token '<|x|>' at line 3 is not allowed"),
                "{e}"
            );
        }
        // Two records whose texts join into the token hold none.
        let content = b"{\"text\": \"a <|\"}\n{\"text\": \"x|> b\"}\n";
        assert_eq!(read_all(content, 1 << 20, &["<|x|>"]).unwrap().len(), 2);
    }
}
