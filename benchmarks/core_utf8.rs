//! The core's conversion of Python's code points to UTF-8 (`code_points.rs`, what a
//! batch of strings without CPython's UTF-8 runs), alone: a corpus held in the width
//! Python would hold each document in, converted on one thread, pass after pass.
//!
//! ```text
//! cargo build --release --example core_utf8
//! target/release/examples/core_utf8 CORPUS.txt [MB] [PASSES]
//! ```
//!
//! Documents as `core_encode` cuts them; prints the best pass and the median.

#[path = "core_common.rs"]
#[allow(dead_code)] // the encoder it builds for the other examples
mod common;

use std::time::Instant;

use bytepair::code_points::{CodePoints, Utf8Texts};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 2 {
        eprintln!("usage: core_utf8 CORPUS.txt [MB] [PASSES]");
        std::process::exit(2);
    }
    let mb: usize = args.get(2).map_or(20, |s| s.parse().expect("MB"));
    let passes: usize = args.get(3).map_or(20, |s| s.parse().expect("PASSES"));
    let text = common::corpus(&args[1], mb);
    let docs = common::documents(&text);
    // Each document in the narrowest width that holds its largest code point (PEP 393).
    let held: Vec<(Vec<u8>, Vec<u16>, Vec<u32>)> = docs
        .iter()
        .map(|d| {
            let top = d.chars().map(|c| c as u32).max().unwrap_or(0);
            let cs = d.chars().map(|c| c as u32);
            match top {
                0..=0xFF => (cs.map(|c| c as u8).collect(), vec![], vec![]),
                0x100..=0xFFFF => (vec![], cs.map(|c| c as u16).collect(), vec![]),
                _ => (vec![], vec![], cs.collect()),
            }
        })
        .collect();
    let points: Vec<CodePoints> = held
        .iter()
        .map(|(l, u2, u4)| {
            if !u4.is_empty() {
                CodePoints::Ucs4(u4)
            } else if !u2.is_empty() {
                CodePoints::Ucs2(u2)
            } else {
                CodePoints::Latin1(l)
            }
        })
        .collect();
    let bytes: usize = docs.iter().map(|d| d.len()).sum();
    let mut buffer = Vec::with_capacity(Utf8Texts::room(&points));
    let mut times = Vec::new();
    for _ in 0..passes {
        let start = Instant::now();
        let texts = Utf8Texts::convert(&points, 1, buffer).expect("no surrogates");
        times.push(start.elapsed().as_secs_f64());
        assert_eq!(texts.get(0), docs[0]);
        buffer = texts.into_buffer();
    }
    times.sort_by(f64::total_cmp);
    println!(
        "{} MB in {} documents: best {:.2} ms ({:.0} MB/s), median {:.2} ms",
        bytes / 1_000_000,
        docs.len(),
        times[0] * 1e3,
        bytes as f64 / times[0] / 1e6,
        times[times.len() / 2] * 1e3
    );
}
