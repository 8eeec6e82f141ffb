//! This CPU's clock while it runs one thread: a chain of dependent additions (each
//! waits for the one before, one a cycle on every x86-64 core since the Pentium Pro),
//! timed. What a budget in nanoseconds is in cycles, for the cold target's measurement
//! (`core_first_sight` under callgrind counts the merge's instructions a piece; their
//! ratio to the cycles a budget allows is the IPC the merge would need).
//!
//! ```text
//! cargo build --release --example machine_clock
//! target/release/examples/machine_clock
//! ```

use std::time::Instant;

fn main() {
    let rounds: u64 = 500_000_000;
    for _ in 0..3 {
        let mut x: u64 = 1;
        let start = Instant::now();
        for _ in 0..rounds {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: four additions to a register, nothing else touched.
            unsafe {
                std::arch::asm!(
                    "add {0}, 1", "add {0}, 1", "add {0}, 1", "add {0}, 1",
                    inout(reg) x,
                    options(nomem, nostack),
                );
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                x = std::hint::black_box(x + 4);
            }
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{:.2} GHz: {} dependent additions in {secs:.3} s ({x})",
            4.0 * rounds as f64 / secs / 1e9,
            4 * rounds
        );
    }
}
