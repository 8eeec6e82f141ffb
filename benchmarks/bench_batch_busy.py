"""How busy a batch keeps its threads: bytepair's ``encode_batch_to_numpy`` on one
thread and on N, in turn, warm, with the process's CPU time over the wall time of each
run of calls (1.00 for one thread; N when every thread works from a call's start to its
end).

    python benchmarks/bench_batch_busy.py cl100k_base /tmp/corpora/multilingual_all.txt
    # [--mb 10] [--calls 30] [--rounds 3] [--threads 2] [--idle 20]

Documents as in bench_gigatoken.py (the first --mb MB, cut at <|endoftext|> or in 50
equal slices), the same strings every call. Each round prints, for one thread and for
N: the best call's MB/s, the mean over the run's calls, and CPU over wall. The ratio of
the speeds moves with the machine's fast and slow stretches; CPU over wall much less.

With ``--idle MS``, each round also times the N-thread calls one at a time after the
calling thread has kept one core busy for MS ms while the others idled (as in
bench_interleaved.py, where each batch follows gigatoken's pass on one thread): their
best and median wall time and CPU time beside the same of calls made back to back, in
turn. A batch's threads then take longer over the same work (CPU time) when a core of
theirs sat idle just before, which no part of the batch's own work explains.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # no idle BLAS threads spinning
sys.path.insert(0, str(Path(__file__).parent))
from bench_interleaved import documents  # noqa: E402


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("encoding", choices=["gpt2", "cl100k_base", "o200k_base"])
    p.add_argument("path")
    p.add_argument("--mb", type=float, default=10)
    p.add_argument("--calls", type=int, default=30)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--idle", type=float, default=0, help="also N-thread calls after MS ms of one busy core"
    )
    a = p.parse_args()

    import bytepair

    docs = documents(a.path, a.mb)
    mb = sum(len(d.encode()) for d in docs) / 1e6
    tok = bytepair.get_encoding(a.encoding)
    for _ in range(2):  # warm caches, and each string's UTF-8 made
        for d in docs:
            tok.encode_to_numpy(d)
        for threads in (1, a.threads):
            tok.encode_batch_to_numpy(docs, num_threads=threads)
    print(f"{a.encoding} {Path(a.path).name}: {len(docs)} texts, {mb:.1f} MB")
    for r in range(a.rounds):
        for threads in (1, a.threads):
            best, cpu, wall = float("inf"), cpu_seconds(), time.perf_counter()
            for _ in range(a.calls):
                t = time.perf_counter()
                tok.encode_batch_to_numpy(docs, num_threads=threads)
                best = min(best, time.perf_counter() - t)
            wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
            print(
                f"  round {r + 1}, {threads} thread(s): best {mb / best:.0f} MB/s, "
                f"mean {mb * a.calls / wall:.0f} MB/s, CPU over wall {cpu / wall:.2f}"
            )
        if a.idle:
            after_idle(tok, docs, a.threads, a.calls, a.idle / 1e3)


def after_idle(tok, docs: list[str], threads: int, calls: int, idle: float) -> None:
    """The ``--idle`` lines of a round: calls back to back and calls after `idle`
    seconds of one busy core, in turn, each timed alone (wall and CPU, in ms)."""
    import statistics

    def call() -> tuple[float, float]:
        cpu, t = cpu_seconds(), time.perf_counter()
        tok.encode_batch_to_numpy(docs, num_threads=threads)
        return time.perf_counter() - t, cpu_seconds() - cpu

    kinds: dict[str, list[tuple[float, float]]] = {"back to back": [], "after idle": []}
    for _ in range(calls):
        kinds["back to back"].append(call())
        end = time.perf_counter() + idle
        while time.perf_counter() < end:  # one core busy, the others idle
            pass
        kinds["after idle"].append(call())
    for kind, times in kinds.items():
        wall, cpu = [w * 1e3 for w, _ in times], [c * 1e3 for _, c in times]
        print(
            f"    {threads} threads, {kind}: wall best {min(wall):.2f}, median "
            f"{statistics.median(wall):.2f} ms; CPU best {min(cpu):.2f}, median "
            f"{statistics.median(cpu):.2f} ms"
        )


if __name__ == "__main__":
    main()
