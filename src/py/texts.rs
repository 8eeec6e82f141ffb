//! The strings of a batch as UTF-8: borrowed where CPython already has their UTF-8
//! (an ASCII string is its own; a string whose UTF-8 was asked for before keeps it),
//! else converted by the core from the string's code points, on the batch's threads
//! and without the GIL ([`crate::code_points`]), into memory the call owns and frees.
//! Taking a `&str` of each string instead had CPython convert them one after another
//! under the GIL before any encoding started, and keep the UTF-8 inside every string
//! for the rest of its life.
//!
//! A single-text call ([`Text`]) converts a long string the same way the first time
//! it meets it, and takes it as `&str` when it meets it again ([`met_before`]): the
//! first call on a string is the common one (a corpus goes through once), and the
//! core's conversion is the cheaper one there; a string encoded again and again (a
//! benchmark, an interactive session) then pays one conversion of CPython's, and
//! borrows the UTF-8 CPython keeps from then on.

use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::exceptions::PyMemoryError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::code_points::{CodePoints, Utf8Texts};
use crate::pages::OutputPool;

/// Where one string's UTF-8 comes from.
enum Source<'a> {
    Utf8(&'a str),
    /// Converted: the index among the converted strings.
    Converted(usize),
}

/// A batch's strings as UTF-8 (see the module docs).
pub struct Texts<'a> {
    sources: Vec<Source<'a>>,
    converted: Utf8Texts,
}

impl<'a> Texts<'a> {
    /// The UTF-8 of `texts`, converted on up to `threads` threads where needed, into a
    /// buffer of `buffers` (given back by [`Texts::give_back`]). A string holding a
    /// surrogate raises CPython's own UnicodeEncodeError (the one taking its `&str`
    /// raises).
    pub fn new(
        py: Python<'_>,
        texts: &'a [Bound<'_, PyString>],
        threads: usize,
        buffers: &OutputPool,
    ) -> PyResult<Self> {
        let mut sources = Vec::with_capacity(texts.len());
        let mut points = Vec::new();
        let mut converted_from = Vec::new();
        for (i, text) in texts.iter().enumerate() {
            match held(text) {
                Held::Utf8(utf8) => sources.push(Source::Utf8(utf8)),
                Held::CodePoints(p) => {
                    sources.push(Source::Converted(points.len()));
                    points.push(p);
                    converted_from.push(i);
                }
                Held::Other => sources.push(Source::Utf8(text.to_str()?)),
            }
        }
        if points.is_empty() {
            let converted = Utf8Texts::default();
            return Ok(Self { sources, converted });
        }
        let converted = convert(py, &points, threads, buffers, |i| &texts[converted_from[i]])?;
        Ok(Self { sources, converted })
    }

    /// Gives the buffer the strings were converted into (if any) back to `buffers`.
    pub fn give_back(self, buffers: &OutputPool) {
        let buffer = self.converted.into_buffer();
        if buffer.capacity() > 0 {
            buffers.give_back(buffer);
        }
    }

    /// Every string's UTF-8, in order.
    pub fn strs(&self) -> Vec<&str> {
        self.sources
            .iter()
            .map(|s| match *s {
                Source::Utf8(utf8) => utf8,
                Source::Converted(i) => self.converted.get(i),
            })
            .collect()
    }
}

/// Converts `points` into a buffer of `buffers`, on up to `threads` threads, without
/// the GIL. A string holding a surrogate raises CPython's own UnicodeEncodeError (the
/// one taking its `&str` raises): `text(i)` is the string of `points[i]`.
fn convert<'t, 'py: 't>(
    py: Python<'_>,
    points: &[CodePoints<'_>],
    threads: usize,
    buffers: &OutputPool,
    text: impl Fn(usize) -> &'t Bound<'py, PyString>,
) -> PyResult<Utf8Texts> {
    let room = Utf8Texts::room(points);
    let buffer = buffers.take(room).map_err(|_| {
        PyMemoryError::new_err(format!("no memory for the UTF-8 of a text ({room} bytes)"))
    })?;
    match py.detach(|| Utf8Texts::convert(points, threads, buffer)) {
        Ok(converted) => Ok(converted),
        // CPython refuses the same string, with its message (which character, where);
        // the Python layer retries without surrogates, as tiktoken does.
        Err((i, _)) => {
            text(i).to_str()?;
            Err(pyo3::exceptions::PyRuntimeError::new_err(
                "a string holds a surrogate that CPython encodes",
            ))
        }
    }
}

/// One string's UTF-8 for a single-text call: borrowed where CPython has it; else, for
/// a string of at least [`SINGLE_CHARS`] characters not met lately, converted by the
/// core into a buffer of `buffers` (see the module docs); else, or when that buffer
/// cannot be had, taken as `&str`.
/// CPython's own conversion of a long string that is not ASCII was a sixth of a first
/// encode of English books (27 ms for 20 MB, against the core's 7 ms), and it left a
/// copy of the text inside the string.
pub enum Text<'a> {
    Utf8(&'a str),
    Converted(Utf8Texts),
}

impl<'a> Text<'a> {
    pub fn new(
        py: Python<'_>,
        text: &'a Bound<'_, PyString>,
        buffers: &OutputPool,
    ) -> PyResult<Self> {
        if chars(text) >= SINGLE_CHARS {
            match held(text) {
                Held::Utf8(utf8) => return Ok(Text::Utf8(utf8)),
                Held::CodePoints(p) if !met_before(text) => {
                    match convert(py, &[p], 1, buffers, |_| text) {
                        Ok(converted) => return Ok(Text::Converted(converted)),
                        // No memory for the core's buffer (room for the widest
                        // UTF-8): CPython's conversion, of the exact size, may fit.
                        Err(e) if e.is_instance_of::<PyMemoryError>(py) => {}
                        // A surrogate: CPython's own error, raised already once.
                        Err(e) => return Err(e),
                    }
                }
                _ => {}
            }
        }
        Ok(Text::Utf8(text.to_str()?))
    }

    pub fn as_str(&self) -> &str {
        match self {
            Text::Utf8(utf8) => utf8,
            Text::Converted(converted) => converted.get(0),
        }
    }

    /// Gives the buffer the string was converted into (if it was) back to `buffers`.
    pub fn give_back(self, buffers: &OutputPool) {
        if let Text::Converted(converted) = self {
            buffers.give_back(converted.into_buffer());
        }
    }
}

/// Strings shorter than this (in characters) are taken as `&str` by a single-text
/// call: CPython's conversion of them is short, and kept for the next call. Longer
/// ones are remembered by [`met_before`].
const SINGLE_CHARS: usize = 4096;

/// Slots of [`MET`]: a power of two.
const MET_SLOTS: usize = 4096;

/// The long strings met lately, one word each (see [`met_before`]).
static MET: [AtomicU64; MET_SLOTS] = [const { AtomicU64::new(0) }; MET_SLOTS];

/// Whether `text` (this very object, of this length) was met lately; remembers it if
/// not. A string's word is its address and length mixed, in a slot of its own: a
/// string met since in the same slot makes this one new again, and a new string at a
/// freed one's address may pass for it. Either way only the cost changes (who
/// converts the string), never the UTF-8 taken, which is always the string's own.
fn met_before(text: &Bound<'_, PyString>) -> bool {
    let (at, len) = (text.as_ptr() as u64, chars(text) as u64);
    let word = (at ^ len.rotate_left(40)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let slot = &MET[(word >> (64 - MET_SLOTS.trailing_zeros())) as usize];
    if slot.load(Ordering::Relaxed) == word {
        return true;
    }
    slot.store(word, Ordering::Relaxed);
    false
}

/// How many characters `text` holds.
fn chars(text: &Bound<'_, PyString>) -> usize {
    // SAFETY: a str, as the Bound says, alive while borrowed.
    unsafe { ffi::PyUnicode_GET_LENGTH(text.as_ptr()) as usize }
}

/// What CPython holds of a string.
enum Held<'a> {
    /// Its UTF-8: an ASCII string's own bytes, or the copy kept after a `&str` of it.
    Utf8(&'a str),
    /// Only its code points.
    CodePoints(CodePoints<'a>),
    /// A string not in CPython's compact form (a subclass's instance, or one made by
    /// the legacy API): taken as `&str`.
    Other,
}

fn held<'a>(text: &'a Bound<'_, PyString>) -> Held<'a> {
    let op = text.as_ptr();
    // SAFETY: `op` is a str (the Bound says so) that `text` keeps alive for 'a, and a
    // string's length, kind, data and cached UTF-8 never change once it is made
    // (compact strings are always ready). Each slice covers the string's own data.
    unsafe {
        if ffi::PyUnicode_IS_COMPACT(op) == 0 {
            return Held::Other;
        }
        let len = ffi::PyUnicode_GET_LENGTH(op) as usize;
        let data = ffi::PyUnicode_DATA(op);
        if ffi::PyUnicode_IS_ASCII(op) != 0 {
            let bytes = std::slice::from_raw_parts(data.cast::<u8>(), len);
            return Held::Utf8(std::str::from_utf8_unchecked(bytes));
        }
        let compact = &*op.cast::<ffi::PyCompactUnicodeObject>();
        if !compact.utf8.is_null() {
            let bytes =
                std::slice::from_raw_parts(compact.utf8.cast::<u8>(), compact.utf8_length as usize);
            return Held::Utf8(std::str::from_utf8_unchecked(bytes));
        }
        Held::CodePoints(match ffi::PyUnicode_KIND(op) {
            ffi::PyUnicode_1BYTE_KIND => {
                CodePoints::Latin1(std::slice::from_raw_parts(data.cast(), len))
            }
            ffi::PyUnicode_2BYTE_KIND => {
                CodePoints::Ucs2(std::slice::from_raw_parts(data.cast(), len))
            }
            ffi::PyUnicode_4BYTE_KIND => {
                CodePoints::Ucs4(std::slice::from_raw_parts(data.cast(), len))
            }
            _ => return Held::Other,
        })
    }
}
