//! Reading a UTF-8 file in blocks that start and end at safe cuts (`chunking`), so
//! each block can be pre-tokenized on its own — by training's counter and by file
//! encoding alike. Memory holds one block (plus the tail carried to the next one).

use std::fs::File;
use std::io::Read;

use super::chunking::{find_cut, TextCuts};
use crate::pretok::SpecialMatcher;

/// How invalid UTF-8 is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Utf8Errors {
    /// Invalid UTF-8 is an error naming the byte offset.
    Strict,
    /// Invalid sequences become U+FFFD, as Python's `errors="replace"`.
    Replace,
}

#[derive(Debug)]
pub enum ReadError {
    Io(std::io::Error),
    /// Writing the output failed (a full disk): the output's fault, not the input's.
    Write(std::io::Error),
    InvalidUtf8 {
        offset: u64,
        byte: u8,
    },
    /// A problem the block's consumer found (message).
    Other(String),
    /// The consumer asked to stop (e.g. Ctrl-C in a progress callback).
    Interrupted,
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) | ReadError::Write(e) => write!(f, "{e}"),
            ReadError::InvalidUtf8 { offset, byte } => write!(
                f,
                "invalid UTF-8 at byte offset {offset} (byte 0x{byte:02x}); \
                 fix the file or pass errors=\"replace\" (CLI: --errors replace)"
            ),
            ReadError::Other(e) => write!(f, "{e}"),
            ReadError::Interrupted => write!(f, "interrupted"),
        }
    }
}

/// Bytes read from the file per block, by default.
pub const BLOCK_BYTES: usize = 32 << 20;

/// Calls `f(text, offset)` for consecutive blocks of the file, where `offset` is the
/// file offset of the block's first byte. Blocks are cut at the edges of `specials`
/// and at `cuts` (`chunking`); a block grows until such a cut is found.
pub fn for_each_block(
    path: &str,
    specials: &SpecialMatcher,
    cuts: TextCuts,
    errors: Utf8Errors,
    block_bytes: usize,
    mut f: impl FnMut(&str, u64) -> Result<(), ReadError>,
) -> Result<(), ReadError> {
    let mut reader = BlockReader::open(path)?;
    while let Some((bytes, offset)) = reader.next_block(specials, cuts, block_bytes)? {
        f(&decode(&bytes, offset, errors)?, offset)?;
        reader.recycle(bytes);
    }
    Ok(())
}

/// A file read in blocks cut at safe cuts, one block per call ([`for_each_block`]
/// with the caller in charge of the loop).
pub struct BlockReader {
    file: File,
    /// Read and not yet handed out: the start of the next block.
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    offset: u64,
    eof: bool,
    /// A block handed back ([`BlockReader::recycle`]): the next one is read into it.
    spare: Vec<u8>,
}

impl BlockReader {
    pub fn open(path: &str) -> Result<Self, ReadError> {
        Ok(Self {
            file: File::open(path).map_err(ReadError::Io)?,
            buf: Vec::new(),
            offset: 0,
            eof: false,
            spare: Vec::new(),
        })
    }

    /// The next block's bytes (not yet checked as UTF-8: [`decode_block`]) and its
    /// file offset, or None at the end of the file. Cut at the edges of `specials`
    /// and at `cuts`, after about `block_bytes` (a block grows until such a cut).
    pub fn next_block(
        &mut self,
        specials: &SpecialMatcher,
        cuts: TextCuts,
        block_bytes: usize,
    ) -> Result<Option<(Vec<u8>, u64)>, ReadError> {
        loop {
            if self.eof && self.buf.is_empty() {
                return Ok(None);
            }
            let buf = &mut self.buf;
            if !self.eof {
                let old = buf.len();
                buf.resize(old + block_bytes.max(1), 0);
                let mut filled = old;
                while filled < buf.len() {
                    let n = self.file.read(&mut buf[filled..]).map_err(ReadError::Io)?;
                    if n == 0 {
                        self.eof = true;
                        break;
                    }
                    filled += n;
                }
                buf.truncate(filled);
            }
            let cut = if self.eof {
                buf.len()
            } else {
                // Leave room for the longest special token and one byte of look-ahead.
                let hi = buf.len().saturating_sub(specials.max_len() + 1);
                let matches = specials.find_all(buf);
                match find_cut(buf, 0, hi, &matches, cuts, specials) {
                    Some(c) => c,
                    None => continue, // no safe cut yet: read more
                }
            };
            let mut rest = std::mem::take(&mut self.spare);
            rest.clear();
            rest.extend_from_slice(&buf[cut..]);
            buf.truncate(cut);
            let block = std::mem::replace(buf, rest);
            let offset = self.offset;
            self.offset += cut as u64;
            return Ok(Some((block, offset)));
        }
    }

    /// Takes back a block's buffer, to read a later block into: a new buffer per block
    /// made the kernel map and zero fresh pages for every block (blocks of 32 MB are
    /// past the size malloc keeps for reuse), a tenth of counting's time.
    pub fn recycle(&mut self, block: Vec<u8>) {
        if block.capacity() > self.spare.capacity() {
            self.spare = block;
        }
    }

    /// True once the whole file has been read and handed out.
    pub fn at_end(&self) -> bool {
        self.eof && self.buf.is_empty()
    }
}

/// A block's bytes as text ([`Utf8Errors`]); an error names the file offset.
/// Valid text is checked once and kept in its buffer (checking it, then making the
/// `String` with a second check, was a tenth of a shard run's reading thread).
pub fn decode_block(bytes: Vec<u8>, offset: u64, errors: Utf8Errors) -> Result<String, ReadError> {
    let bytes = match String::from_utf8(bytes) {
        Ok(text) => return Ok(text),
        Err(e) => e.into_bytes(),
    };
    Ok(decode(&bytes, offset, errors)?.into_owned())
}

/// UTF-8 decoding of one block, with the error offset relative to the file.
fn decode(
    bytes: &[u8],
    offset: u64,
    errors: Utf8Errors,
) -> Result<std::borrow::Cow<'_, str>, ReadError> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(std::borrow::Cow::Borrowed(s)),
        Err(e) => match errors {
            Utf8Errors::Replace => Ok(String::from_utf8_lossy(bytes)),
            Utf8Errors::Strict => Err(ReadError::InvalidUtf8 {
                offset: offset + e.valid_up_to() as u64,
                byte: bytes[e.valid_up_to()],
            }),
        },
    }
}
