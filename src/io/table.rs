//! Pre-token count tables as bytes, so that counts made apart (other processes,
//! other machines) can be sent, stored and added up before one merge loop — the
//! reduce of distributed training. Never pickle: reading a table runs no code.
//!
//! Layout, all integers little-endian:
//! - `BPCOUNTS` (8 bytes), then the version (u32, now 1) and the number of entries
//!   (u64);
//! - per entry: the pre-token's length (u32), its bytes, its count (u64).
//!
//! Entries are written in byte order, so equal tables are equal bytes.

use super::count::Counts;

const MAGIC: &[u8; 8] = b"BPCOUNTS";
const VERSION: u32 = 1;

/// The table as bytes.
pub fn to_bytes(counts: &Counts) -> Vec<u8> {
    let mut entries: Vec<_> = counts.iter().collect();
    entries.sort_unstable_by(|(a, _), (b, _)| a.as_ref().cmp(b.as_ref()));
    let size: usize = entries.iter().map(|(k, _)| 12 + k.as_ref().len()).sum();
    let mut out = Vec::with_capacity(20 + size);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for (token, count) in entries {
        let token = token.as_ref();
        out.extend_from_slice(&(token.len() as u32).to_le_bytes());
        out.extend_from_slice(token);
        out.extend_from_slice(&count.to_le_bytes());
    }
    out
}

/// Reads a table made by [`to_bytes`], adding its counts to `counts`. A fault is a
/// message naming the byte offset where it is.
pub fn add_from_bytes(data: &[u8], counts: &mut Counts) -> Result<(), String> {
    let mut r = Reader { data, at: 0 };
    if r.take(8, || "the header".into())? != MAGIC {
        return Err("not a bytepair pre-token count table (no BPCOUNTS at byte offset 0)".into());
    }
    let version = u32::from_le_bytes(r.array(|| "the version".into())?);
    if version != VERSION {
        return Err(format!(
            "count table version {version} (at byte offset 8) is not supported: this \
             bytepair reads version {VERSION}; upgrade bytepair"
        ));
    }
    let entries = u64::from_le_bytes(r.array(|| "the number of entries".into())?);
    for n in 0..entries {
        // Named only on a fault: formatting millions of names cost more than reading.
        let what = || format!("entry {n}");
        let len = u32::from_le_bytes(r.array(what)?) as usize;
        let token = r.take(len, what)?;
        let count = u64::from_le_bytes(r.array(what)?);
        counts.add(token, count);
    }
    if r.at != data.len() {
        return Err(format!(
            "corrupt count table: {} bytes after the last entry, at byte offset {}",
            data.len() - r.at,
            r.at
        ));
    }
    Ok(())
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// The next `n` bytes; `what` names them in the message if there are fewer.
    fn take(&mut self, n: usize, what: impl Fn() -> String) -> Result<&'a [u8], String> {
        let rest = self.data.len() - self.at;
        if n > rest {
            let what = what();
            return Err(format!(
                "truncated count table: {what} at byte offset {} needs {n} bytes; the data \
                 ends at byte offset {}",
                self.at,
                self.data.len()
            ));
        }
        self.at += n;
        Ok(&self.data[self.at - n..self.at])
    }

    fn array<const N: usize>(&mut self, what: impl Fn() -> String) -> Result<[u8; N], String> {
        Ok(self.take(N, what)?.try_into().expect("N bytes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(entries: &[(&str, u64)]) -> Counts {
        entries.iter().map(|&(k, v)| (k, v)).collect()
    }

    #[test]
    fn a_table_round_trips_through_bytes() {
        let long = "a piece of more than fifteen bytes";
        let counts = table(&[
            (" the", 7),
            ("a", 1),
            ("", 3),
            ("\u{e9}\0", 1 << 40),
            (long, 2),
        ]);
        let bytes = to_bytes(&counts);
        assert_eq!(&bytes[..8], b"BPCOUNTS");
        let mut back = Counts::default();
        add_from_bytes(&bytes, &mut back).unwrap();
        assert_eq!(back, counts);
        assert_eq!(to_bytes(&back), bytes, "equal tables are equal bytes");
    }

    #[test]
    fn reading_and_merging_add_counts() {
        let mut total = table(&[("a", 1), ("b", 2)]);
        total.add_all(table(&[("b", 3), ("c", 4)]));
        assert_eq!(total, table(&[("a", 1), ("b", 5), ("c", 4)]));
        let long = "a piece of more than fifteen bytes";
        let other = table(&[("c", 1), (long, 2)]);
        total.add_counts_of(&other);
        total.add_counts_of(&other);
        assert_eq!(total, table(&[("a", 1), ("b", 5), ("c", 6), (long, 4)]));
        assert_eq!(other, table(&[("c", 1), (long, 2)]));
        total.add_all(table(&[(long, 1)]));
        assert_eq!(total.get(long.as_bytes()), Some(5));
        total.add_all(table(&[("c", 1)]));
        assert_eq!(total.get(b"c"), Some(7));
        add_from_bytes(&to_bytes(&table(&[("a", 10)])), &mut total).unwrap();
        assert_eq!(total.get(b"a"), Some(11));
        assert_ne!(total, table(&[("a", 11), ("b", 5), ("c", 5)]));
    }

    #[test]
    fn faults_name_their_byte_offset() {
        let bytes = to_bytes(&table(&[("ab", 1), ("cd", 2)]));
        let read = |data: &[u8]| add_from_bytes(data, &mut Counts::default()).unwrap_err();
        assert!(
            read(b"pickle").contains("byte offset 0"),
            "{}",
            read(b"pickle")
        );
        let mut v2 = bytes.clone();
        v2[8] = 2;
        assert!(read(&v2).contains("version 2 (at byte offset 8)"));
        // Cut inside entry 1's bytes: it starts at 20 + (4 + 2 + 8) = 34.
        assert_eq!(
            read(&bytes[..39]),
            "truncated count table: entry 1 at byte offset 38 needs 2 bytes; the data ends \
             at byte offset 39"
        );
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(read(&longer).ends_with(&format!("at byte offset {}", bytes.len())));
    }
}
