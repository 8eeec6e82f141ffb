//! sentencepiece's BPE merge loop in the core, alone: the distinct words of a text
//! (split at spaces, each after a `▁`, as the `identity` rule gives them) learned
//! into pieces, best of a few rounds, each from a fresh trainer. What
//! `bench_spm_train.py` times around it (reading, counting, the alphabet, the
//! returned model) is left out, so that a change to the loop can be measured
//! with less noise than a whole training run. With THREADS over 1, the words'
//! first pairs are counted on that many threads, as in training.
//!
//! ```text
//! cargo build --release --example core_spm_learn
//! target/release/examples/core_spm_learn CORPUS.txt [PIECES] [ROUNDS] [THREADS]
//! ```

use std::collections::HashMap;
use std::time::Instant;

use bytepair::spm::train_merge::{learn_pieces, Validity, SPACE};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 2 {
        eprintln!("usage: core_spm_learn CORPUS.txt [PIECES] [ROUNDS] [THREADS]");
        std::process::exit(2);
    }
    let text = std::fs::read_to_string(&args[1]).expect("a UTF-8 text file");
    let pieces: usize = args.get(2).map_or(7800, |s| s.parse().expect("PIECES"));
    let rounds: usize = args.get(3).map_or(5, |s| s.parse().expect("ROUNDS"));
    let threads: usize = args.get(4).map_or(1, |s| s.parse().expect("THREADS"));
    let pool = (threads > 1).then(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a pool of THREADS threads")
    });

    let mut counts: HashMap<String, u64> = HashMap::new();
    for line in text.lines() {
        for word in line.split(' ').filter(|w| !w.is_empty()) {
            *counts.entry(format!("{SPACE}{word}")).or_default() += 1;
        }
    }
    // sentencepiece's order: count descending, then string.
    let mut words: Vec<(&str, u64)> = counts.iter().map(|(w, &n)| (w.as_str(), n)).collect();
    words.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    println!("{} distinct words", words.len());

    let validity = Validity::default();
    let mut best = f64::INFINITY;
    for round in 0..rounds {
        let start = Instant::now();
        let learned =
            learn_pieces(&words, pieces, &validity, |_| true, pool.as_ref()).expect("enough pairs");
        let seconds = start.elapsed().as_secs_f64();
        best = best.min(seconds);
        println!("round {round}: {} pieces in {seconds:.3} s", learned.len());
    }
    println!("best {best:.3} s");
}
