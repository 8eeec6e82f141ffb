//! What the first sight of a piece costs, in the core: the text's distinct pieces
//! merged one after another in a loop, with nothing else between them (the merge
//! table's lines stay in the CPU's caches: the most favourable case a merge gets),
//! against what a first pass pays for each distinct piece over a second pass (merge,
//! keep, grow the cache, among the hits of the text around them).
//!
//! ```text
//! cargo build --release --example core_first_sight
//! target/release/examples/core_first_sight RANKS.tiktoken gpt2|cl100k|o200k CORPUS.txt [MB]
//! ```
//!
//! `bench_interleaved.py ... --cold` prints what a first sight may cost for a cold
//! ratio of 1.5x against gigatoken, in ns for each distinct piece: this prints the
//! merge's own cost in the same unit.

#[path = "core_common.rs"]
mod common;

use std::collections::HashSet;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: core_first_sight RANKS.tiktoken gpt2|cl100k|o200k CORPUS.txt [MB]");
        std::process::exit(2);
    }
    let encoder = common::encoder(&args[1], &args[2]);
    let mb: usize = args.get(4).map_or(20, |s| s.parse().expect("MB"));
    let text = common::corpus(&args[3], mb);
    let docs = common::documents(&text);

    // The distinct pieces, in the order a pass first meets them.
    let mut seen = HashSet::new();
    let mut pieces: Vec<&[u8]> = Vec::new();
    let mut all = 0usize;
    for doc in &docs {
        encoder
            .pre_tokenizer()
            .for_each_piece(doc, |s, e| {
                all += 1;
                let piece = &doc.as_bytes()[s..e];
                if seen.insert(piece) {
                    pieces.push(piece);
                }
            })
            .expect("a built-in pattern splits any text");
    }
    let n = pieces.len() as f64;
    println!(
        "{} {}, {mb} MB: {} distinct pieces of {all}",
        args[2],
        std::path::Path::new(&args[3]).display(),
        pieces.len()
    );

    // A first pass and a second, with a fresh copy of the encoder (no warm cache).
    let plain = encoder.no_specials().clone();
    let mut first_sight = f64::MAX;
    for _ in 0..3 {
        let fresh = encoder.clone();
        let pass = || {
            let start = Instant::now();
            for d in &docs {
                fresh.encode(d, &plain).expect("encodes");
            }
            start.elapsed().as_secs_f64()
        };
        let (first, second) = (pass(), pass());
        first_sight = first_sight.min(first - second);
        println!(
            "  a first pass {:.1} ms, a second {:.1} ms: first sight {:.0} ns a distinct piece",
            first * 1e3,
            second * 1e3,
            (first - second) / n * 1e9
        );
    }

    // The merges alone, the distinct pieces one after another.
    let model = encoder.model();
    let mut out = Vec::new();
    let mut best = f64::MAX;
    let mut ids = 0usize;
    for _ in 0..5 {
        let start = Instant::now();
        ids = 0;
        for piece in &pieces {
            out.clear();
            model.encode_piece(piece, &mut out).expect("encodes");
            ids += out.len();
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    println!(
        "  merging the distinct pieces alone, in a loop (best of 5): {:.1} ms, {:.0} ns a \
         piece ({ids} ids); first sight in a pass, best of 3: {:.0} ns a piece",
        best * 1e3,
        best / n * 1e9,
        first_sight / n * 1e9
    );
}
