//! Parsing tiktoken `.tiktoken` files (one `base64(token) rank` a line): the one
//! reader of the format, for `bytepair.formats.tiktoken` and the bundled encodings.
//!
//! The grammar (what Python's `base64.b64decode(validate=True)` and `str.split()`
//! accepted when the reader was Python):
//!
//! - lines end at `\n`, `\r\n` or `\r` (`bytes.splitlines`); line numbers count from 1;
//! - each line is decoded as UTF-8 (bad bytes become U+FFFD, for error messages) and
//!   split at runs of Python's whitespace (`str.split()`); no fields: a blank line,
//!   skipped; else exactly two fields, the token and its rank;
//! - the token is `[A-Za-z0-9+/]*` then padding: with `n` characters before the
//!   padding, `n % 4 == 0` takes none, one or two `=` (but `=` alone is not a token),
//!   `n % 4 == 2` takes exactly `==`, `n % 4 == 3` exactly `=`, `n % 4 == 1` is never
//!   valid; bits left over in the last character are ignored (`YR==` is `a`);
//! - the rank is ASCII digits (leading zeros allowed), at most [`MAX_RANK`];
//! - no token and no rank twice.
//!
//! Every fault is worded here ([`ParseError::message`]), naming the file and the line;
//! the bindings only supply Python's `repr()` for quoting.

use rustc_hash::FxHashMap;

use crate::bpe::ranks::{all_splits, recover, RecoverError, MAX_RANK};
use crate::bpe::special_ids::{assign_special_ids, SpecialIdError, Unnumbered};
use crate::bpe::{BpeModel, Encoder};

/// Why a file was not parsed: the first faulty line, as [`parse`] reads them in order.
#[derive(Debug, PartialEq, Eq)]
pub enum ParseError {
    /// The line is not two fields (`text`: the line, decoded).
    Fields { line: usize, text: String },
    /// The first field is not valid base64.
    Base64 { line: usize, field: String },
    /// The second field is not ASCII digits.
    Rank { line: usize, field: String },
    /// The rank is past [`MAX_RANK`].
    RankTooLarge { line: usize, field: String },
    /// The token was given before, on line `first`.
    DuplicateToken {
        line: usize,
        first: usize,
        token: Vec<u8>,
    },
    /// The rank was given before, on line `first`.
    DuplicateRank {
        line: usize,
        first: usize,
        rank: u32,
    },
}

/// How messages quote text and bytes (the bindings pass Python's `repr()`).
pub struct Quote<'a> {
    pub text: &'a dyn Fn(&str) -> String,
    pub bytes: &'a dyn Fn(&[u8]) -> String,
}

/// The first `n` characters of `s`.
fn prefix(s: &str, n: usize) -> &str {
    s.char_indices().nth(n).map_or(s, |(i, _)| &s[..i])
}

impl ParseError {
    /// The faulty line's number.
    pub fn line(&self) -> usize {
        match self {
            ParseError::Fields { line, .. }
            | ParseError::Base64 { line, .. }
            | ParseError::Rank { line, .. }
            | ParseError::RankTooLarge { line, .. }
            | ParseError::DuplicateToken { line, .. }
            | ParseError::DuplicateRank { line, .. } => *line,
        }
    }

    /// The message for the file at `path`.
    pub fn message(&self, path: &str, quote: &Quote<'_>) -> String {
        let what = match self {
            ParseError::Fields { text, .. } => {
                let text = (quote.text)(prefix(text, 80));
                format!("expected 'base64-token rank', got {text}")
            }
            ParseError::Base64 { field, .. } => {
                format!("{} is not valid base64", (quote.text)(prefix(field, 80)))
            }
            ParseError::Rank { field, .. } => {
                let field = (quote.text)(prefix(field, 40));
                format!("rank {field} is not a non-negative integer")
            }
            ParseError::RankTooLarge { field, .. } => {
                let field = (quote.text)(prefix(field, 40));
                format!("rank {field} is too large: ranks go up to {MAX_RANK}")
            }
            ParseError::DuplicateToken { first, token, .. } => {
                let token = (quote.bytes)(token);
                format!("token {token} was already given on line {first}")
            }
            ParseError::DuplicateRank { first, rank, .. } => {
                format!("rank {rank} was already given on line {first}")
            }
        };
        let line = self.line();
        format!("{path}, line {line}: {what}")
    }
}

/// The lines of `data` as `bytes.splitlines()` cuts them: at `\n`, `\r` and `\r\n`.
pub fn lines(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= data.len() {
            return None;
        }
        let rest = &data[start..];
        match memchr::memchr2(b'\n', b'\r', rest) {
            Some(i) => {
                let step = if rest[i] == b'\r' && rest.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                start += i + step;
                Some(&rest[..i])
            }
            None => {
                start = data.len();
                Some(rest)
            }
        }
    })
}

const INVALID: u8 = 0xff;

const fn decode_table() -> [u8; 256] {
    let mut table = [INVALID; 256];
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut i = 0;
    while i < 64 {
        table[alphabet[i] as usize] = i as u8;
        i += 1;
    }
    table
}

static DECODE: [u8; 256] = decode_table();

/// Decodes one token field by the grammar in the module header; `None`: not base64.
fn decode_base64(s: &[u8]) -> Option<Vec<u8>> {
    let pad = s.iter().rev().take_while(|&&c| c == b'=').count();
    let body = &s[..s.len() - pad];
    let valid_pad = match body.len() % 4 {
        0 => pad <= 2 && !body.is_empty(),
        2 => pad == 2,
        3 => pad == 1,
        _ => false,
    };
    if !valid_pad || body.iter().any(|&c| DECODE[c as usize] == INVALID) {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() / 4 * 3 + 2);
    let mut chunks = body.chunks_exact(4);
    for c in &mut chunks {
        let n = (DECODE[c[0] as usize] as u32) << 18
            | (DECODE[c[1] as usize] as u32) << 12
            | (DECODE[c[2] as usize] as u32) << 6
            | DECODE[c[3] as usize] as u32;
        out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8, n as u8]);
    }
    // The last 2 or 3 characters carry 1 or 2 bytes; their spare bits are ignored.
    let rest: Vec<u8> = chunks
        .remainder()
        .iter()
        .map(|&c| DECODE[c as usize])
        .collect();
    if rest.len() >= 2 {
        out.push(rest[0] << 2 | rest[1] >> 4);
    }
    if rest.len() == 3 {
        out.push(rest[1] << 4 | rest[2] >> 2);
    }
    Some(out)
}

/// Python's `str.isspace()`: Unicode white space plus the ASCII separators
/// U+001C..U+001F, which Rust's `char::is_whitespace` leaves out.
fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// One parsed line: `(token, rank)`, or `None` for a blank line.
fn parse_line(line: &[u8], lineno: usize) -> Result<Option<(Vec<u8>, u32)>, ParseError> {
    let text = String::from_utf8_lossy(line);
    let mut fields = text.split(is_python_space).filter(|f| !f.is_empty());
    let (token, rank) = match (fields.next(), fields.next(), fields.next()) {
        (None, _, _) => return Ok(None),
        (Some(token), Some(rank), None) => (token, rank),
        _ => {
            return Err(ParseError::Fields {
                line: lineno,
                text: text.into_owned(),
            })
        }
    };
    let bytes = decode_base64(token.as_bytes()).ok_or_else(|| ParseError::Base64 {
        line: lineno,
        field: token.to_string(),
    })?;
    if !rank.bytes().all(|d| d.is_ascii_digit()) {
        return Err(ParseError::Rank {
            line: lineno,
            field: rank.to_string(),
        });
    }
    let value = rank
        .bytes()
        .try_fold(0u32, |n, d| {
            n.checked_mul(10)?.checked_add((d - b'0') as u32)
        })
        .filter(|&r| r <= MAX_RANK)
        .ok_or_else(|| ParseError::RankTooLarge {
            line: lineno,
            field: rank.to_string(),
        })?;
    Ok(Some((bytes, value)))
}

/// `(token, rank)` in file order.
pub type Entries = Vec<(Vec<u8>, u32)>;

/// Parses a `.tiktoken` file: `(token, rank)` in file order, or the first faulty line.
pub fn parse(data: &[u8]) -> Result<Entries, ParseError> {
    let (entries, lines, fault) = parse_lines(data);
    // Repeated tokens are looked for after the lines are read, in a map borrowing the
    // tokens (no copy of each): the first repeat is the error if no other fault
    // comes before it (on its own line, a repeated token is reported before a repeated
    // rank, which `parse_lines` keeps the entry of).
    let mut line_of_token: FxHashMap<&[u8], usize> = FxHashMap::default();
    line_of_token.reserve(entries.len());
    for ((token, _), &line) in entries.iter().zip(&lines) {
        if fault.as_ref().is_some_and(|f| f.line() < line) {
            break;
        }
        if let Some(&first) = line_of_token.get(&token[..]) {
            return Err(ParseError::DuplicateToken {
                line,
                first,
                token: token.clone(),
            });
        }
        line_of_token.insert(token, line);
    }
    drop(line_of_token);
    match fault {
        Some(fault) => Err(fault),
        None => Ok(entries),
    }
}

/// The entries up to the first fault other than a repeated token, their line numbers,
/// and that fault (a repeated rank's entry is kept: its token may be repeated too).
fn parse_lines(data: &[u8]) -> (Entries, Vec<usize>, Option<ParseError>) {
    let mut entries: Entries = Vec::with_capacity(data.len() / 12);
    let mut lines_of: Vec<usize> = Vec::with_capacity(data.len() / 12);
    // Ranks of real files are dense: a table for ranks up to the file's length, a map
    // beyond, so a stray huge rank costs one entry.
    let mut line_of_rank: Vec<usize> = vec![0; data.len() / 4]; // 0: not seen
    let mut line_of_huge_rank: FxHashMap<u32, usize> = FxHashMap::default();
    for (index, line) in lines(data).enumerate() {
        let lineno = index + 1;
        let (token, rank) = match parse_line(line, lineno) {
            Ok(Some(entry)) => entry,
            Ok(None) => continue,
            Err(e) => return (entries, lines_of, Some(e)),
        };
        let seen = match line_of_rank.get_mut(rank as usize) {
            Some(first) => std::mem::replace(first, lineno),
            None => line_of_huge_rank.insert(rank, lineno).unwrap_or(0),
        };
        entries.push((token, rank));
        lines_of.push(lineno);
        if seen != 0 {
            let fault = ParseError::DuplicateRank {
                line: lineno,
                first: seen,
                rank,
            };
            return (entries, lines_of, Some(fault));
        }
    }
    (entries, lines_of, None)
}

/// Why [`load`] made no encoder.
#[derive(Debug)]
pub enum LoadError {
    Parse(ParseError),
    Recover(RecoverError),
    /// A special token's id holds other bytes (an ordinary token's, or another
    /// special's).
    SpecialId {
        special: String,
        id: u32,
        holder: Vec<u8>,
    },
    /// Merge `n` (in rank order) needs `token`, whose id a special token shares.
    MergeUsesSpecial {
        n: usize,
        left: Vec<u8>,
        right: Vec<u8>,
        token: Vec<u8>,
    },
    Encoder(String),
}

impl LoadError {
    /// The message for the file at `path`, quoting as [`ParseError::message`] does.
    pub fn message(&self, path: &str, quote: &Quote<'_>) -> String {
        let what = match self {
            LoadError::Parse(e) => return e.message(path, quote),
            LoadError::Recover(e) => e.message(quote.bytes),
            LoadError::SpecialId {
                special,
                id,
                holder,
            } => format!(
                "special token {} has id {id}, which the vocabulary gives to {}",
                (quote.text)(special),
                (quote.bytes)(holder)
            ),
            LoadError::MergeUsesSpecial {
                n,
                left,
                right,
                token,
            } => format!(
                "merge #{n} ({}, {}) uses {}, which is not in the vocabulary",
                (quote.bytes)(left),
                (quote.bytes)(right),
                (quote.bytes)(token)
            ),
            LoadError::Encoder(message) => message.clone(),
        };
        format!("{path}: {what}")
    }
}

/// An encoder straight from the text of a `.tiktoken` file: ids are the ranks,
/// `specials` get their ids ([`assign_special_ids`], the CS336 rule), and the text
/// encodes exactly as tiktoken encodes it ([`from_ranks`]). What Python's
/// `Tokenizer(ranks inverted, merges_from_ranks(ranks), specials, pattern)` builds when
/// merges make every token, without the Python dicts in between, with the same first
/// error. Returns the specials with their ids, in order.
pub fn load(
    data: &[u8],
    specials: &[(String, Option<u32>)],
    pattern: Option<&str>,
) -> Result<(Encoder, Vec<(String, u32)>), LoadError> {
    // Repeated tokens are found by recover (Duplicate), without a map here; any fault
    // is then reported as parse() reports it: the first faulty line.
    let first_fault = || LoadError::Parse(parse(data).expect_err("parse finds the fault"));
    let (entries, _, fault) = parse_lines(data);
    if fault.is_some() {
        return Err(first_fault());
    }
    match from_ranks(entries, specials, pattern) {
        Err(LoadError::Recover(RecoverError::Duplicate { .. })) => Err(first_fault()),
        loaded => loaded,
    }
}

/// An encoder over `(token, id)` entries that encodes as tiktoken does with these ids
/// as ranks. When merges build every token (every BPE-trained vocabulary) the model
/// holds the recovered merges ([`recover`]), which encode exactly as tiktoken's rule
/// does; otherwise (Llama 3's file) it holds tiktoken's rule itself
/// ([`BpeModel::from_ranks`]). `specials` get their ids as in [`load`].
pub fn from_ranks(
    entries: Entries,
    specials: &[(String, Option<u32>)],
    pattern: Option<&str>,
) -> Result<(Encoder, Vec<(String, u32)>), LoadError> {
    let recovered = recover(&entries).map_err(LoadError::Recover)?;
    let token_at: FxHashMap<u32, &[u8]> = entries.iter().map(|(t, r)| (*r, t.as_slice())).collect();
    let assigned = assign_special_ids(&token_at, specials, Unnumbered::SameBytesOrNext).map_err(
        |e| match e {
            SpecialIdError::Taken {
                special,
                id,
                holder,
            } => LoadError::SpecialId {
                special,
                id,
                holder,
            },
            e => LoadError::Encoder(e.message(&|s| format!("{s:?}"), &|b| format!("{b:?}"))),
        },
    )?;
    let special_ids: FxHashMap<u32, ()> = assigned.iter().map(|&(_, id)| (id, ())).collect();
    let ranks_only = !recovered.unbuildable.is_empty();
    // (left, right, token) ids: the merges, or under tiktoken's rule every split.
    let table: Vec<(u32, u32, u32)> = if ranks_only {
        all_splits(&entries)
    } else {
        recovered
            .merges
            .iter()
            .map(|&(r, a, b)| (a, b, r))
            .collect()
    };
    // A special sharing an ordinary token's id takes it over: a merge needing that
    // token cannot be made (nor, under tiktoken's rule, a whole piece looked up).
    if !special_ids.is_empty() {
        if ranks_only {
            if let Some((special, id)) = assigned.iter().find(|(_, id)| token_at.contains_key(id)) {
                return Err(LoadError::SpecialId {
                    special: special.clone(),
                    id: *id,
                    holder: token_at[id].to_vec(),
                });
            }
        }
        for (n, &(left, right, rank)) in table.iter().enumerate() {
            if let Some(&taken) = [left, right, rank]
                .iter()
                .find(|id| special_ids.contains_key(id))
            {
                return Err(LoadError::MergeUsesSpecial {
                    n,
                    left: token_at[&left].to_vec(),
                    right: token_at[&right].to_vec(),
                    token: token_at[&taken].to_vec(),
                });
            }
        }
    }
    drop(token_at);
    let vocab: FxHashMap<u32, Vec<u8>> = entries
        .into_iter()
        .filter(|(_, r)| !special_ids.contains_key(r))
        .map(|(t, r)| (r, t))
        .collect();
    let ids: FxHashMap<String, u32> = assigned.iter().cloned().collect();
    let model = if ranks_only {
        let merges: Vec<(u32, u32, u32)> = recovered
            .merges
            .iter()
            .map(|&(r, a, b)| (a, b, r))
            .collect();
        let unbuildable = recovered.unbuildable.iter().map(|&(r, _)| r).collect();
        BpeModel::from_ranks(vocab, &table, &merges, unbuildable, ids)
    } else {
        BpeModel::new(vocab, &table, ids)
    }
    .map_err(LoadError::Encoder)?;
    let encoder = Encoder::from_model(model, pattern).map_err(LoadError::Encoder)?;
    Ok((encoder, assigned))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn debug(s: &str) -> String {
        format!("{s:?}")
    }

    fn debug_bytes(b: &[u8]) -> String {
        format!("{b:?}")
    }

    const QUOTE: Quote<'static> = Quote {
        text: &debug,
        bytes: &debug_bytes,
    };

    /// `parse`, as (token, rank) pairs or the error message for file `f`.
    fn parsed(data: &[u8]) -> Result<Vec<(Vec<u8>, u32)>, String> {
        parse(data).map_err(|e| e.message("f", &QUOTE))
    }

    fn b64(t: &[u8]) -> String {
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut s = String::new();
        for c in t.chunks(3) {
            let n = c
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, &b)| n | (b as u32) << (16 - 8 * i));
            for i in 0..4 {
                s.push(if i <= c.len() {
                    alphabet[(n >> (18 - 6 * i) & 63) as usize] as char
                } else {
                    '='
                });
            }
        }
        s
    }

    /// The 256 bytes, "ab" (256) and "abc" (257), then `more` lines.
    fn file(more: &str) -> Vec<u8> {
        let mut text: Vec<u8> = Vec::new();
        for b in 0..=255u8 {
            text.extend(format!("{} {b}\n", b64(&[b])).bytes());
        }
        text.extend(format!("{} 256\n{} 257\n{more}", b64(b"ab"), b64(b"abc")).bytes());
        text
    }

    #[test]
    fn splits_lines_like_python_bytes_splitlines() {
        let got: Vec<&[u8]> = lines(b"a\r\nb\rc\n\nd").collect();
        assert_eq!(got, vec![&b"a"[..], b"b", b"c", b"", b"d"]);
        assert_eq!(lines(b"a\n").count(), 1);
        assert_eq!(lines(b"").count(), 0);
        assert_eq!(lines(b"\n\n").count(), 2);
    }

    #[test]
    fn decodes_base64_with_the_padding_python_accepted() {
        let ok = |s: &str| decode_base64(s.as_bytes());
        assert_eq!(ok("YWJj"), Some(b"abc".to_vec()));
        assert_eq!(ok("YWJj="), Some(b"abc".to_vec()));
        assert_eq!(ok("YWJj=="), Some(b"abc".to_vec()));
        assert_eq!(ok("YWI="), Some(b"ab".to_vec()));
        assert_eq!(ok("YQ=="), Some(b"a".to_vec()));
        assert_eq!(ok("YR=="), Some(b"a".to_vec())); // spare bits ignored
        assert_eq!(ok("YWJ="), Some(b"ab".to_vec()));
        assert_eq!(ok("AA=="), Some(vec![0]));
        for bad in [
            "=", "==", "YWI", "YWJjZ", "YQ", "YQ=", "YQ===", "YWI==", "=YQ=", "YQ==YQ==", "Y",
            "Y=", "Y==", "YW!=", "YWJjZ===",
        ] {
            assert_eq!(ok(bad), None, "{bad}");
        }
    }

    #[test]
    fn splits_fields_at_python_whitespace() {
        assert!(is_python_space('\u{1f}') && is_python_space('\u{3000}'));
        assert!(!is_python_space('\u{200b}') && !is_python_space('x'));
        assert_eq!(
            parsed(b"\tYQ==\x0b0\x1c\nYg==\xc2\xa01\xe2\x80\xa8"),
            Ok(vec![(b"a".to_vec(), 0), (b"b".to_vec(), 1)])
        );
    }

    #[test]
    fn parses_in_file_order_skipping_blank_lines() {
        assert_eq!(
            parsed(b"YQ== 0\r\n\n \t \n  YWI=   5  \nYg== 001"),
            Ok(vec![
                (b"a".to_vec(), 0),
                (b"ab".to_vec(), 5),
                (b"b".to_vec(), 1)
            ])
        );
        assert_eq!(parsed(b""), Ok(vec![]));
        assert_eq!(
            parsed(b"YQ== 2147483647"),
            Ok(vec![(b"a".to_vec(), MAX_RANK)])
        );
    }

    #[test]
    fn names_the_first_faulty_line() {
        let cases: [(&[u8], &str); 14] = [
            (
                b"YQ== 0\nYQ== 1",
                "f, line 2: token [97] was already given on line 1",
            ),
            (
                b"YQ== 0\nYR== 1",
                "f, line 2: token [97] was already given on line 1",
            ),
            (
                b"YQ== 0\n\nYg== 0",
                "f, line 3: rank 0 was already given on line 1",
            ),
            (
                b"YQ== 0\nYg==",
                "f, line 2: expected 'base64-token rank', got \"Yg==\"",
            ),
            (
                b"YQ== 0 1",
                "f, line 1: expected 'base64-token rank', got \"YQ== 0 1\"",
            ),
            (
                b"YQ== x1",
                "f, line 1: rank \"x1\" is not a non-negative integer",
            ),
            (
                b"YQ== +1",
                "f, line 1: rank \"+1\" is not a non-negative integer",
            ),
            (
                b"YQ== 1_0",
                "f, line 1: rank \"1_0\" is not a non-negative integer",
            ),
            (b"YWI 1", "f, line 1: \"YWI\" is not valid base64"),
            (b"\xc3\xa9 1", "f, line 1: \"\u{e9}\" is not valid base64"),
            (
                b"YQ== 2147483648",
                "f, line 1: rank \"2147483648\" is too large: ranks go up to 2147483647",
            ),
            // The first fault in file order, whatever its kind; on one line, a repeated
            // token before a repeated rank.
            (
                b"YQ== 0\nYg== 0\nYg== 1",
                "f, line 2: rank 0 was already given on line 1",
            ),
            (
                b"YQ== 0\nYQ== 0",
                "f, line 2: token [97] was already given on line 1",
            ),
            (
                b"YQ== 0\nYQ== 1\nYWI 2",
                "f, line 2: token [97] was already given on line 1",
            ),
        ];
        for (data, message) in cases {
            assert_eq!(parsed(data), Err(message.to_string()), "{data:?}");
        }
        let long = format!("{} 1 2", "A".repeat(100));
        let e = parsed(long.as_bytes()).unwrap_err();
        assert!(e.ends_with(&format!("got {:?}", &long[..80])), "{e}");
    }

    #[test]
    fn loads_an_encoder_with_specials() {
        let specials = [("<|end|>".to_string(), Some(258))];
        let (e, ids) = load(&file(""), &specials, None).unwrap();
        assert_eq!(ids, vec![("<|end|>".to_string(), 258)]);
        let all = e.all_specials().clone();
        assert_eq!(e.encode("abcab<|end|>", &all).unwrap(), vec![257, 256, 258]);
        assert_eq!(e.model().merge_pairs(), vec![(97, 98), (256, 99)]);
        assert_eq!(e.model().vocab_len(), 259);
        // No id: the next free one.
        let specials = [
            ("<|end|>".to_string(), None),
            ("<|pad|>".to_string(), None),
            ("<|end|>".to_string(), Some(7)), // repeated: the first one counts
        ];
        let (_, ids) = load(&file(""), &specials, None).unwrap();
        let ids: Vec<u32> = ids.into_iter().map(|(_, id)| id).collect();
        assert_eq!(ids, vec![258, 259]);
    }

    #[test]
    fn load_words_each_fault() {
        let message = |more: &str, specials: &[(String, Option<u32>)]| {
            load(&file(more), specials, None)
                .err()
                .unwrap()
                .message("f", &QUOTE)
        };
        let special = |name: &str, id: u32| vec![(name.to_string(), Some(id))];
        assert_eq!(
            message("YWI= 300\n", &[]),
            "f, line 259: token [97, 98] was already given on line 257"
        );
        assert_eq!(
            message("YWI= 300\nYWJ 301\n", &[]),
            "f, line 259: token [97, 98] was already given on line 257"
        );
        assert_eq!(
            message("eHl6 300\n", &special("<|x|>", 120)),
            "f: special token \"<|x|>\" has id 120, which the vocabulary gives to [120]"
        );
        assert_eq!(
            message("", &special("<|x|>", 256)),
            "f: special token \"<|x|>\" has id 256, which the vocabulary gives to [97, 98]"
        );
        let two = [
            ("<|x|>".to_string(), Some(300)),
            ("<|y|>".to_string(), Some(300)),
        ];
        assert_eq!(
            message("", &two),
            "f: special token \"<|y|>\" has id 300, which the vocabulary gives to \
             [60, 124, 120, 124, 62]"
        );
        // A special with an ordinary token's bytes shares its id, taking it from the
        // merges (or from the bytes): always an error, as the general constructor says.
        assert_eq!(
            message("", &[("x".to_string(), None)]),
            "f: the vocabulary has no token for the single byte 0x78; byte-level BPE needs \
             all 256 bytes"
        );
        assert_eq!(
            message("", &special("ab", 256)),
            "f: merge #0 ([97], [98]) uses [97, 98], which is not in the vocabulary"
        );
        let no_a: Vec<u8> = file("")
            .split(|&c| c == b'\n')
            .filter(|l| !l.starts_with(b"YQ=="))
            .flat_map(|l| l.iter().chain(b"\n").copied())
            .collect();
        assert_eq!(
            load(&no_a, &[], None).err().unwrap().message("f", &QUOTE),
            "f: the single byte [97] has no rank: a byte-level BPE vocabulary holds all 256 bytes"
        );
    }

    #[test]
    fn tokens_merges_cannot_make_load_under_tiktokens_rule() {
        // "xyz" (300): no "xy" or "yz"; nor "abcxyz" (301): "abc", "x", "y", "z".
        let (e, _) = load(&file("eHl6 300\nYWJjeHl6 301\n"), &[], None).unwrap();
        assert_eq!(e.model().unbuildable(), &[300, 301]);
        // The merges of the tokens merges make.
        assert_eq!(e.model().merge_pairs(), vec![(97, 98), (256, 99)]);
        let none = e.no_specials().clone();
        // A whole piece that is a token is that token.
        assert_eq!(e.encode("xyz", &none).unwrap(), vec![300]);
        assert_eq!(e.encode("abcxyz", &none).unwrap(), vec![301]);
        assert_eq!(e.encode("xyzabc", &none).unwrap(), vec![120, 121, 122, 257]);
        // Buildable files keep their merges and no whole-piece rule.
        let (e, _) = load(&file(""), &[], None).unwrap();
        assert!(e.model().unbuildable().is_empty());
    }

    #[test]
    fn tiktokens_rule_merges_parts_by_the_rank_of_their_concatenation() {
        // "abcd" (259) is no merge: "ab" merges first, and "abc" ranks after it. Inside
        // "abcde" tiktoken still makes it: ab, then ab+c = abc, then abc+d = abcd.
        let mut text: Vec<u8> = Vec::new();
        for b in 0..=255u8 {
            text.extend(format!("{} {b}\n", b64(&[b])).bytes());
        }
        for (t, r) in [
            ("ab", 256),
            ("bc", 257),
            ("bcd", 258),
            ("abcd", 259),
            ("abc", 260),
        ] {
            text.extend(format!("{} {r}\n", b64(t.as_bytes())).bytes());
        }
        let (e, _) = load(&text, &[], None).unwrap();
        assert_eq!(e.model().unbuildable(), &[259]);
        let none = e.no_specials().clone();
        assert_eq!(e.encode("abcde", &none).unwrap(), vec![259, 101]);
        assert_eq!(e.encode("bcd", &none).unwrap(), vec![258]);
    }

    #[test]
    fn a_huge_rank_costs_no_table_of_its_size() {
        let (e, _) = load(&file("eHk= 2000000000\n"), &[], None).unwrap();
        assert_eq!(e.model().max_id(), 2_000_000_000);
    }

    #[test]
    fn a_rank_past_the_largest_id_is_refused_naming_the_line() {
        let e = load(&file("eHk= 4000000000\n"), &[], None).err().unwrap();
        assert_eq!(
            e.message("f", &QUOTE),
            "f, line 259: rank \"4000000000\" is too large: ranks go up to 2147483647"
        );
    }
}
