//! Parsing tiktoken `.tiktoken` files (one `base64(token) rank` a line) natively.
//!
//! The Python reader (`bytepair.formats`) defines what a valid file is and how each
//! fault is worded. This parser gives the same answer for every file in its *plain*
//! form — lines of base64 alphabet, `=` and spaces, canonical base64, decimal ranks —
//! and says [`ParseError::Unsure`] for anything else (tabs, signs, non-ASCII bytes,
//! unusual padding...), so the caller falls back to the Python reader for those rare
//! files instead of this code second-guessing Python's `base64` and `int`.

use rustc_hash::FxHashMap;

use crate::bpe::ranks::{recover_merges, RecoverError};
use crate::bpe::Encoder;

/// Why a file was not parsed. Line numbers count from 1, as `bytes.splitlines` does.
#[derive(Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Not in the plain form: let the Python reader decide.
    Unsure,
    /// The line is not two fields.
    Fields { line: usize },
    /// The first field is not valid base64.
    Base64 { line: usize },
    /// The second field is not a non-negative integer.
    Rank { line: usize },
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

/// Decodes canonical base64 (padded to a multiple of 4, unused bits zero). `Err(true)`:
/// certainly invalid for Python too; `Err(false)`: not canonical, ask Python.
fn decode_base64(s: &[u8]) -> Result<Vec<u8>, bool> {
    let pad = s.iter().rev().take_while(|&&c| c == b'=').count();
    let body = &s[..s.len() - pad];
    if body.contains(&b'=') || pad > 2 {
        return Err(false);
    }
    if !s.len().is_multiple_of(4) {
        // Without padding, a length that is not a multiple of 4 is always an error.
        return Err(pad == 0);
    }
    if body.is_empty() {
        return Err(false);
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
    let rest = chunks.remainder();
    match rest.len() {
        0 => {}
        2 => {
            let (a, b) = (DECODE[rest[0] as usize], DECODE[rest[1] as usize]);
            if b & 0x0f != 0 {
                return Err(false);
            }
            out.push(a << 2 | b >> 4);
        }
        3 => {
            let (a, b, c) = (
                DECODE[rest[0] as usize],
                DECODE[rest[1] as usize],
                DECODE[rest[2] as usize],
            );
            if c & 0x03 != 0 {
                return Err(false);
            }
            out.push(a << 2 | b >> 4);
            out.push(b << 4 | c >> 2);
        }
        _ => return Err(false), // "x===": more padding than data
    }
    Ok(out)
}

/// Parses a `.tiktoken` file: `(token, rank)` in file order. Blank lines are skipped;
/// fields are separated by runs of spaces.
pub fn parse(data: &[u8]) -> Result<Vec<(Vec<u8>, u32)>, ParseError> {
    parse_lines(data, true)
}

/// [`parse`], checking that tokens are distinct only if `check_tokens` (a caller that
/// finds repeats later anyway, as [`recover_merges`] does, skips a hash map of every
/// token; the error it reports then may not be the first line's).
fn parse_lines(data: &[u8], check_tokens: bool) -> Result<Vec<(Vec<u8>, u32)>, ParseError> {
    if data.len() > u32::MAX as usize {
        return Err(ParseError::Unsure);
    }
    let mut entries: Vec<(Vec<u8>, u32)> = Vec::with_capacity(data.len() / 12);
    let mut line_of_token: FxHashMap<&[u8], usize> = FxHashMap::default();
    if check_tokens {
        line_of_token.reserve(data.len() / 12);
    }
    let mut line_of_rank: Vec<u32> = Vec::new(); // 0: not seen
                                                 // A rank past the file's length (ranks are dense in real files) is left to the
                                                 // Python reader, so a stray huge rank never makes a huge table here.
    let max_rank = data.len().min(1 << 30) as u32;
    for (index, line) in lines(data).enumerate() {
        let lineno = index + 1;
        if line
            .iter()
            .any(|&c| c != b' ' && c != b'=' && DECODE[c as usize] == INVALID)
        {
            return Err(ParseError::Unsure);
        }
        let mut fields = line.split(|&c| c == b' ').filter(|f| !f.is_empty());
        let (token, rank) = match (fields.next(), fields.next(), fields.next()) {
            (None, _, _) => continue,
            (Some(token), Some(rank), None) => (token, rank),
            _ => return Err(ParseError::Fields { line: lineno }),
        };
        let bytes = match decode_base64(token) {
            Ok(b) => b,
            Err(true) => return Err(ParseError::Base64 { line: lineno }),
            Err(false) => return Err(ParseError::Unsure),
        };
        if rank.contains(&b'+') {
            return Err(ParseError::Unsure); // int() takes a sign; the checked reader does not
        }
        if !rank.iter().all(u8::is_ascii_digit) {
            return Err(ParseError::Rank { line: lineno });
        }
        let rank = match rank.iter().try_fold(0u32, |n, &d| {
            n.checked_mul(10)?.checked_add((d - b'0') as u32)
        }) {
            Some(r) if r <= max_rank => r,
            _ => return Err(ParseError::Unsure),
        };
        // The token's bytes live in `entries`; key the map by the base64 text instead,
        // which is canonical, so equal tokens have equal text.
        if check_tokens {
            if let Some(&first) = line_of_token.get(token) {
                return Err(ParseError::DuplicateToken {
                    line: lineno,
                    first,
                    token: bytes,
                });
            }
        }
        let r = rank as usize;
        if r >= line_of_rank.len() {
            line_of_rank.resize((r + 1).max(line_of_rank.len() * 2), 0);
        }
        if line_of_rank[r] != 0 {
            return Err(ParseError::DuplicateRank {
                line: lineno,
                first: line_of_rank[r] as usize,
                rank,
            });
        }
        if check_tokens {
            line_of_token.insert(token, lineno);
        }
        line_of_rank[r] = lineno as u32;
        entries.push((bytes, rank));
    }
    Ok(entries)
}

/// `entries` indexed by rank (`None` for ranks the file skips).
pub fn by_rank(entries: Vec<(Vec<u8>, u32)>) -> Vec<Option<Vec<u8>>> {
    let len = entries
        .iter()
        .map(|&(_, r)| r as usize + 1)
        .max()
        .unwrap_or(0);
    let mut tokens = vec![None; len];
    for (token, rank) in entries {
        tokens[rank as usize] = Some(token);
    }
    tokens
}

/// Why [`load`] made no encoder.
#[derive(Debug)]
pub enum LoadError {
    Parse(ParseError),
    Recover(RecoverError),
    /// A special token's id is also a rank: the general constructor sorts that out.
    SpecialIsRank,
    Encoder(String),
}

/// An encoder straight from the text of a `.tiktoken` file: ids are the ranks, the
/// merges are recovered from them ([`recover_merges`]), `specials` get their own ids.
/// What Python's `Tokenizer(ranks inverted, merges_from_ranks(ranks), specials, pattern)`
/// builds, without the Python dicts in between. An error here is only the first
/// one found: [`parse`] names the first faulty line.
pub fn load(
    data: &[u8],
    specials: FxHashMap<String, u32>,
    pattern: Option<&str>,
) -> Result<Encoder, LoadError> {
    // A repeated token makes recover_merges fail (Duplicate).
    let tokens = by_rank(parse_lines(data, false).map_err(LoadError::Parse)?);
    if specials
        .values()
        .any(|&id| tokens.get(id as usize).is_some_and(Option::is_some))
    {
        return Err(LoadError::SpecialIsRank);
    }
    let merges = recover_merges(&tokens).map_err(LoadError::Recover)?;
    let vocab: FxHashMap<u32, Vec<u8>> = tokens
        .into_iter()
        .enumerate()
        .filter_map(|(rank, t)| Some((rank as u32, t?)))
        .collect();
    let merges: Vec<(u32, u32, u32)> = merges.into_iter().map(|(r, a, b)| (a, b, r)).collect();
    Encoder::new(vocab, &merges, specials, pattern).map_err(LoadError::Encoder)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_lines_like_python_bytes_splitlines() {
        let got: Vec<&[u8]> = lines(b"a\r\nb\rc\n\nd").collect();
        assert_eq!(got, vec![&b"a"[..], b"b", b"c", b"", b"d"]);
        assert_eq!(lines(b"a\n").count(), 1);
        assert_eq!(lines(b"").count(), 0);
        assert_eq!(lines(b"\n\n").count(), 2);
    }

    #[test]
    fn decodes_canonical_base64_only() {
        assert_eq!(decode_base64(b"YWJj"), Ok(b"abc".to_vec()));
        assert_eq!(decode_base64(b"YWI="), Ok(b"ab".to_vec()));
        assert_eq!(decode_base64(b"YQ=="), Ok(b"a".to_vec()));
        assert_eq!(decode_base64(b"AA=="), Ok(vec![0]));
        assert_eq!(decode_base64(b"YWI"), Err(true));
        assert_eq!(decode_base64(b"YWJjZ"), Err(true));
        for unsure in [
            &b"YR=="[..],
            b"YWJ=",
            b"YQ=",
            b"YQ===",
            b"=YQ=",
            b"YQ==YQ==",
            b"====",
        ] {
            assert_eq!(decode_base64(unsure), Err(false), "{unsure:?}");
        }
    }

    #[test]
    fn loads_an_encoder_or_says_why_not() {
        let mut text: Vec<u8> = Vec::new();
        let b64 = |t: &[u8]| {
            let mut s = String::new();
            for c in t.chunks(3) {
                let n = c
                    .iter()
                    .enumerate()
                    .fold(0u32, |n, (i, &b)| n | (b as u32) << (16 - 8 * i));
                let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
                for i in 0..4 {
                    s.push(if i <= c.len() {
                        alphabet[(n >> (18 - 6 * i) & 63) as usize] as char
                    } else {
                        '='
                    });
                }
            }
            s
        };
        for b in 0..=255u8 {
            text.extend(format!("{} {b}\n", b64(&[b])).bytes());
        }
        text.extend(format!("{} 256\n{} 257\n", b64(b"ab"), b64(b"abc")).bytes());
        let specials: FxHashMap<String, u32> = [("<|end|>".to_string(), 258)].into_iter().collect();
        let e = load(&text, specials.clone(), None).unwrap();
        let all = e.all_specials().clone();
        assert_eq!(e.encode("abcab<|end|>", &all).unwrap(), vec![257, 256, 258]);
        assert_eq!(e.model().merge_pairs(), vec![(97, 98), (256, 99)]);
        assert_eq!(e.model().vocab_len(), 259);
        // A special id that is a rank, a repeated token, a token BPE cannot make.
        let clash: FxHashMap<String, u32> = [("x".to_string(), 256)].into_iter().collect();
        assert!(matches!(
            load(&text, clash, None),
            Err(LoadError::SpecialIsRank)
        ));
        let mut repeated = text.clone();
        repeated.extend(format!("{} 300\n", b64(b"ab")).bytes());
        assert!(matches!(
            load(&repeated, specials.clone(), None),
            Err(LoadError::Recover(RecoverError::Duplicate { .. }))
        ));
        let mut unreachable = text.clone();
        unreachable.extend(format!("{} 300\n", b64(b"xyz")).bytes());
        assert!(matches!(
            load(&unreachable, specials, None),
            Err(LoadError::Recover(RecoverError::Unreachable {
                rank: 300,
                parts: 3
            }))
        ));
    }

    #[test]
    fn parses_and_reports_lines() {
        assert_eq!(
            parse(b"YQ== 0\r\n\n  YWI=   5  \nYg== 1").unwrap(),
            vec![(b"a".to_vec(), 0), (b"ab".to_vec(), 5), (b"b".to_vec(), 1)]
        );
        assert_eq!(parse(b"YQ== 0\nYQ== 1"), {
            Err(ParseError::DuplicateToken {
                line: 2,
                first: 1,
                token: b"a".to_vec(),
            })
        });
        assert_eq!(
            parse(b"YQ== 0\n\nYg== 0"),
            Err(ParseError::DuplicateRank {
                line: 3,
                first: 1,
                rank: 0
            })
        );
        assert_eq!(parse(b"YQ== 0\nYg=="), Err(ParseError::Fields { line: 2 }));
        assert_eq!(parse(b"YQ== 0 1"), Err(ParseError::Fields { line: 1 }));
        assert_eq!(parse(b"YQ== x1"), Err(ParseError::Rank { line: 1 }));
        assert_eq!(parse(b"YWI 1"), Err(ParseError::Base64 { line: 1 }));
        for unsure in [
            &b"YQ== +1"[..],
            b"YQ==\t1",
            b"YQ== -1",
            b"!! 1",
            b"YQ== 99999999999",
        ] {
            assert_eq!(parse(unsure), Err(ParseError::Unsure), "{unsure:?}");
        }
    }
}
