//! How this machine gives two threads of one process work, beside two processes: the
//! two-thread target's ceiling, with no tokenizer in it. `bench_machine.py` runs the
//! work in processes (Python's threads share one interpreter lock); this runs it in
//! threads, so the two can be told apart.
//!
//! ```text
//! cargo build --release --example machine_threads
//! target/release/examples/machine_threads compute|gather THREADS
//! ```
//!
//! Each thread does the same fixed work, so on two full cores two threads take as long
//! as one. `compute`: a xorshift loop in registers. `gather`: random 8-byte reads of a
//! 16 MB table of the thread's own (as big as a warm piece cache's table), many in
//! flight. Run it with 1 and 2 threads, and `... 1` twice at once, in turn.

use std::time::Instant;

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn work(kind: &str, seed: u64) -> u64 {
    let mut x = seed | 1;
    match kind {
        "compute" => (0..400_000_000u64).fold(0, |_, _| xorshift(&mut x)),
        "gather" => {
            let slots = (16 << 20) / 8;
            let table: Vec<u64> = (0..slots as u64)
                .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
                .collect();
            (0..60_000_000u64).fold(0u64, |sum, _| {
                sum.wrapping_add(table[xorshift(&mut x) as usize & (slots - 1)])
            })
        }
        other => panic!("work is compute or gather, not {other}"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: machine_threads compute|gather THREADS");
        std::process::exit(2);
    }
    let kind = args[1].as_str();
    let threads: usize = args[2].parse().expect("THREADS");
    let start = Instant::now();
    let check = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|k| s.spawn(move || work(kind, k as u64 + 7)))
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a worker"))
            .fold(0, |a, b| a ^ b)
    });
    let seconds = start.elapsed().as_secs_f64();
    println!("{kind}, {threads} threads: {seconds:.2} s (check {check:x})");
}
