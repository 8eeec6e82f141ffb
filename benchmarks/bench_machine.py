"""How much this machine gives two threads at all, to read the two-thread rows by.

A two-thread speed-up of encoding can be no better than the machine's own: on a shared
VM two vCPUs may be two hyperthreads of one core, share a last-level cache with other
tenants, or lose time to them. This runs the same work in one process, then in two
processes at once, in turn, and prints the throughput ratio of two over one for each
round (wall times seen by the parent): 2.0 is two full cores.

- `--work loop` (the default): pure CPU, a Python integer loop with no memory traffic
  to speak of.
- `--work gather`: what warm encoding mostly does, random reads of a table as big as
  one worker's piece cache (`--table-mb`, 16 by default: the cache's hash table),
  many independent ones in flight (numpy's `take` with random indices). Each process
  has a table of its own, as each process's encoder has its own cache.

    python benchmarks/bench_machine.py [--work loop|gather] [--rounds 3] [--seconds 1.0]
        [--table-mb 16]
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing as mp
import time


def spin(n: int) -> float:
    """Seconds this process took for `n` loop steps."""
    start = time.perf_counter()
    total = 0
    for i in range(n):
        total += i & 7
    return time.perf_counter() - start


def gather(n: int, table_mb: int = 16) -> float:
    """Seconds this process took for `n` random 8-byte reads of a `table_mb` table."""
    import numpy as np

    rng = np.random.default_rng(12345)
    table = rng.integers(0, 1 << 62, size=(table_mb << 20) // 8, dtype=np.uint64)
    index = rng.integers(0, table.size, size=1 << 20, dtype=np.int64)
    rounds = max(1, n // index.size)
    start = time.perf_counter()
    total = 0
    for _ in range(rounds):
        total ^= int(np.bitwise_xor.reduce(np.take(table, index)))
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=1.0, help="rough length of one run")
    ap.add_argument("--work", choices=["loop", "gather"], default="loop")
    ap.add_argument("--table-mb", type=int, default=16, help="gather: one process's table")
    args = ap.parse_args()
    work = spin if args.work == "loop" else functools.partial(gather, table_mb=args.table_mb)
    steps = 1_000_000
    while work(steps) < args.seconds / 4:
        steps *= 2
    steps *= 4
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        pool.map(work, [1000, 1000])  # both workers started
        print("| round | one process (s) | two at once (s) | two over one |")
        print("|---:|---:|---:|---:|")
        for r in range(1, args.rounds + 1):
            # Wall time seen from here: two runs that did not overlap take twice one.
            start = time.perf_counter()
            pool.apply(work, (steps,))
            one = time.perf_counter() - start
            start = time.perf_counter()
            pool.map(work, [steps, steps], chunksize=1)
            two = time.perf_counter() - start
            print(f"| {r} | {one:.2f} | {two:.2f} | {2 * one / two:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
