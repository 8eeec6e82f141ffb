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

use std::time::Instant;

use bytepair::io::tiktoken::load;
use bytepair::pretok::{CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: core_encode RANKS.tiktoken gpt2|cl100k|o200k CORPUS.txt [MB] [PASSES]");
        std::process::exit(2);
    }
    let pattern = match args[2].as_str() {
        "gpt2" => GPT2_PATTERN,
        "cl100k" => CL100K_PATTERN,
        "o200k" => O200K_PATTERN,
        other => panic!("no built-in pattern {other:?}"),
    };
    let ranks = std::fs::read(&args[1]).expect("the .tiktoken file");
    let Ok((encoder, _)) = load(&ranks, &[], Some(pattern)) else {
        panic!("{} does not load", args[1])
    };
    let bytes = std::fs::read(&args[3]).expect("the corpus");
    let mb: usize = args.get(4).map_or(10, |s| s.parse().expect("MB"));
    let passes: usize = args.get(5).map_or(3, |s| s.parse().expect("PASSES"));
    let mut cut = bytes.len().min(mb * 1_000_000);
    while cut < bytes.len() && (bytes[cut] & 0xC0) == 0x80 {
        cut -= 1;
    }
    let text = std::str::from_utf8(&bytes[..cut]).expect("UTF-8");
    let docs: Vec<&str> = if text.contains("<|endoftext|>") {
        text.split("<|endoftext|>")
            .filter(|d| !d.is_empty())
            .collect()
    } else {
        let step = text.len() / 50 + 1;
        let mut slices = Vec::new();
        let mut i = 0;
        while i < text.len() {
            let mut j = (i + step).min(text.len());
            while !text.is_char_boundary(j) {
                j += 1;
            }
            slices.push(&text[i..j]);
            i = j;
        }
        slices
    };
    let plain = encoder.no_specials().clone();
    for pass in 0..passes {
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
