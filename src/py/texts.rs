//! The strings of a batch as UTF-8: borrowed where CPython already has their UTF-8
//! (an ASCII string is its own; a string whose UTF-8 was asked for before keeps it),
//! else converted by the core from the string's code points, on the batch's threads
//! and without the GIL ([`crate::code_points`]), into memory the call owns and frees.
//! Taking a `&str` of each string instead had CPython convert them one after another
//! under the GIL before any encoding started, and keep the UTF-8 inside every string
//! for the rest of its life.

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
        let room = Utf8Texts::room(&points);
        let buffer = buffers.take(room).map_err(|_| {
            PyMemoryError::new_err(format!("no memory for the UTF-8 of a batch ({room} bytes)"))
        })?;
        let converted = py.detach(|| Utf8Texts::convert(&points, threads, buffer));
        let converted = match converted {
            Ok(converted) => converted,
            // CPython refuses the same string, with its message (which character,
            // where); the Python layer retries without surrogates, as tiktoken does.
            Err((i, _)) => {
                texts[converted_from[i]].to_str()?;
                return Err(pyo3::exceptions::PyRuntimeError::new_err(
                    "a string of the batch holds a surrogate that CPython encodes",
                ));
            }
        };
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
