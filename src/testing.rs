//! Helpers shared by the core's tests.

/// A seeded pseudo-random generator (a 64-bit LCG, Knuth's constants): `next(m)` is
/// a number below `m`, the same sequence for the same seed on every machine, so
/// generated inputs never change between runs.
pub fn seeded(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut state = seed;
    move |m| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % m
    }
}
