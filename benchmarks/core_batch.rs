//! The compiled core's batch (`io::batch::encode_flat`, what `encode_batch_to_numpy`
//! runs) beside a plain loop of one-text encodes, with no Python around either, for
//! the two-thread ratio. Each pass runs, in turn: the loop; the batch on one thread;
//! the batch on THREADS threads; and the same batch with its ids received but not
//! placed in the flat output (what the batch's copying costs).
//!
//! ```text
//! cargo build --release --example core_batch
//! target/release/examples/core_batch RANKS.tiktoken gpt2|cl100k|o200k CORPUS.txt [MB] [PASSES] [THREADS]
//! target/release/examples/core_batch ... MB PASSES THREADS independent
//! ```
//!
//! `independent`: instead, THREADS threads each encode all the documents, PASSES times,
//! each with its own cache, never waiting for one another (as THREADS processes would),
//! and each prints its median warm pass: what the machine gives threads of one process
//! for this work when nothing joins them at the end of each call.
//!
//! Printed per variant: the best warm pass (from the third on) and the warm passes'
//! total (MB over seconds of them all): on a VM whose cores change speed every few
//! seconds, a best pass may come from a fast stretch that another variant missed, and
//! the total is the steadier ratio. Documents as `core_encode` cuts them. The batch
//! writes into the same buffer each pass, as the binding writes into the buffer of a
//! batch Python let go of.

#[path = "core_common.rs"]
mod common;

use std::mem::MaybeUninit;
use std::time::Instant;

use bytepair::io::batch::{encode_each_in_parts, encode_flat, most_ids, Specials, Workers};
use bytepair::model::Frame;
use bytepair::pages::advise_huge_pages;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!(
            "usage: core_batch RANKS.tiktoken gpt2|cl100k|o200k CORPUS.txt [MB] [PASSES] [THREADS]"
        );
        std::process::exit(2);
    }
    let encoder = common::encoder(&args[1], &args[2]);
    let mb: usize = args.get(4).map_or(10, |s| s.parse().expect("MB"));
    let passes: usize = args.get(5).map_or(20, |s| s.parse().expect("PASSES"));
    let threads: usize = args.get(6).map_or(2, |s| s.parse().expect("THREADS"));
    assert!(passes >= 3, "at least 3 passes: the first two are not warm");
    let text = common::corpus(&args[3], mb);
    let text = text.as_str();
    let docs = common::documents(text);
    let plain = encoder.no_specials().clone();
    let specials = Specials {
        allowed: &plain,
        disallowed: &plain,
    };
    let frame = Frame::default();
    if args.get(7).map(String::as_str) == Some("independent") {
        independent(&encoder, &docs, text.len(), passes, threads);
        return;
    }
    // Each variant returns the number of ids, checked equal to the loop's.
    // One output buffer for every pass, as the binding reuses the buffer of a batch
    // Python let go of (`py::buffers::OutputPool`).
    let mut out: Box<[MaybeUninit<u8>]> =
        Box::new_uninit_slice(most_ids(&encoder, &docs, &frame) * 4);
    advise_huge_pages(&mut out);
    let mut flat = |n: usize| {
        let offsets = encode_flat(
            &encoder,
            &docs,
            specials,
            &frame,
            Workers::Spawned(n),
            &mut out,
        )
        .expect("encodes");
        *offsets.last().expect("offsets") as usize
    };
    let not_placed = |n: usize| {
        let mut count = 0;
        encode_each_in_parts(
            &encoder,
            &docs,
            specials,
            &frame,
            Workers::Spawned(n),
            |next| next(),
            |_, parts| {
                count += parts.iter().map(|p| p.len()).sum::<usize>();
                Ok::<(), ()>(())
            },
        )
        .map_err(|_| "a text failed")
        .expect("encodes");
        count
    };
    // The loop's documents shared out among threads, each thread looping over its own:
    // what this machine gives threads of one process for this work, with no batch.
    let loops = |n: usize| {
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..n)
                .map(|k| {
                    let (encoder, plain, docs) = (&encoder, &plain, &docs);
                    s.spawn(move || {
                        let mine = docs.iter().skip(k).step_by(n);
                        mine.map(|d| encoder.encode(d, plain).expect("encodes").len())
                            .sum::<usize>()
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().expect("a loop")).sum()
        })
    };
    let names = [
        "loop".to_string(),
        "batch 1".to_string(),
        format!("batch {threads}"),
        format!("batch {threads}, not placed"),
        format!("{threads} loops on {threads} threads"),
    ];
    let mut best = [0f64; 5];
    let mut total = [0f64; 5];
    for pass in 0..passes {
        let mut seconds = [0f64; 5];
        let start = Instant::now();
        let tokens: usize = docs
            .iter()
            .map(|d| encoder.encode(d, &plain).expect("encodes").len())
            .sum();
        seconds[0] = start.elapsed().as_secs_f64();
        for k in 1..5 {
            let start = Instant::now();
            let got = match k {
                1 => flat(1),
                2 => flat(threads),
                3 => not_placed(threads),
                _ => loops(threads),
            };
            seconds[k] = start.elapsed().as_secs_f64();
            assert_eq!(got, tokens, "{} gave other ids than the loop", names[k]);
        }
        if pass >= 2 {
            for k in 0..5 {
                best[k] = best[k].max(text.len() as f64 / seconds[k] / 1e6);
                total[k] += seconds[k];
            }
        }
    }
    let warm_mb = (passes - 2) as f64 * text.len() as f64 / 1e6;
    for k in 0..5 {
        println!(
            "{:>22}: best {:4.0} MB/s, warm total {:4.0} MB/s ({:.2}x the loop's total)",
            names[k],
            best[k],
            warm_mb / total[k],
            total[0] / total[k]
        );
    }
}

/// `threads` threads, each encoding every document `passes` times with a cache of its
/// own and printing its median warm pass (see the module docs).
fn independent(
    encoder: &bytepair::bpe::Encoder,
    docs: &[&str],
    bytes: usize,
    passes: usize,
    threads: usize,
) {
    use bytepair::model::Model;
    let plain = encoder.no_specials();
    std::thread::scope(|s| {
        for k in 0..threads {
            s.spawn(move || {
                let mut cache = encoder.take_cache();
                let mut ids = Vec::new();
                let mut speeds: Vec<f64> = (0..passes)
                    .map(|_| {
                        let start = Instant::now();
                        for d in docs {
                            ids.clear();
                            encoder
                                .encode_cached(d, plain, &mut cache, &mut ids)
                                .expect("encodes");
                        }
                        bytes as f64 / start.elapsed().as_secs_f64() / 1e6
                    })
                    .skip(2)
                    .collect();
                speeds.sort_by(f64::total_cmp);
                println!(
                    "thread {k}: median warm pass {:.0} MB/s",
                    speeds[speeds.len() / 2]
                );
                encoder.give_back_cache(cache);
            });
        }
    });
}
