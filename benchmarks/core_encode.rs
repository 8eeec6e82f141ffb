//! The compiled core's encoder alone, with no Python around it: passes over the same
//! documents, cold (the first) then warm, for a profiler. Under valgrind's callgrind
//! the instruction counts are the same from run to run on a busy machine, where
//! timings are not; the difference between N and 1 passes, divided by N - 1, is one
//! warm pass.
//!
//! ```text
//! cargo build --release --example core_encode
//! target/release/examples/core_encode RANKS.tiktoken cl100k CORPUS.txt [MB] [PASSES]
//! valgrind --tool=callgrind target/release/examples/core_encode ... 2 4
//! ```
//!
//! CORPUS: documents between `<|endoftext|>` separators, or else 50 equal slices (as
//! `bench_gigatoken.py` cuts them); the pattern is `gpt2`, `cl100k` or `o200k`.
//!
//! A sixth argument `cold` makes every pass cold: each is encoded by a copy of the
//! encoder made before its timer starts (a copy starts with no warm cache), so a
//! profile of many passes is a profile of cold passes without the load around them.

#[path = "core_common.rs"]
mod common;

use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!(
            "usage: core_encode RANKS.tiktoken gpt2|cl100k|o200k CORPUS.txt [MB] [PASSES] [cold]"
        );
        std::process::exit(2);
    }
    let encoder = common::encoder(&args[1], &args[2]);
    let mb: usize = args.get(4).map_or(10, |s| s.parse().expect("MB"));
    let passes: usize = args.get(5).map_or(3, |s| s.parse().expect("PASSES"));
    let text = common::corpus(&args[3], mb);
    let text = text.as_str();
    let docs = common::documents(text);
    let plain = encoder.no_specials().clone();
    let cold = args.get(6).is_some_and(|s| s == "cold");
    for pass in 0..passes {
        let fresh = cold.then(|| encoder.clone());
        let encoder = fresh.as_ref().unwrap_or(&encoder);
        let start = Instant::now();
        let tokens: usize = docs
            .iter()
            .map(|d| encoder.encode(d, &plain).expect("encodes").len())
            .sum();
        let seconds = start.elapsed().as_secs_f64();
        let mb_s = text.len() as f64 / seconds / 1e6;
        println!("pass {pass}: {tokens} tokens, {mb_s:.0} MB/s");
    }
}
