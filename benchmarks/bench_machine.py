"""How much this machine gives two threads at all, to read the two-thread rows by.

A two-thread speed-up of encoding can be no better than the machine's own: on a shared
VM two vCPUs may be two hyperthreads of one core, or lose time to other tenants. This
runs the same pure-CPU work (a Python integer loop, no memory traffic to speak of) in
one process, then in two processes at once, in turn, and prints the throughput ratio
of two over one for each round (wall times seen by the parent): 2.0 is two full cores.

    python benchmarks/bench_machine.py [--rounds 3] [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time


def spin(n: int) -> float:
    """Seconds this process took for `n` loop steps."""
    start = time.perf_counter()
    total = 0
    for i in range(n):
        total += i & 7
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=1.0, help="rough length of one run")
    args = ap.parse_args()
    steps = 1_000_000
    while spin(steps) < args.seconds / 4:
        steps *= 2
    steps *= 4
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        pool.map(spin, [1000, 1000])  # both workers started
        print("| round | one process (s) | two at once (s) | two over one |")
        print("|---:|---:|---:|---:|")
        for r in range(1, args.rounds + 1):
            # Wall time seen from here: two runs that did not overlap take twice one.
            start = time.perf_counter()
            pool.apply(spin, (steps,))
            one = time.perf_counter() - start
            start = time.perf_counter()
            pool.map(spin, [steps, steps], chunksize=1)
            two = time.perf_counter() - start
            print(f"| {r} | {one:.2f} | {two:.2f} | {2 * one / two:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
