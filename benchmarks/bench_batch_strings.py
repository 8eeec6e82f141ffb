"""bytepair's batch and gigatoken's on all cores, in one process, pass for pass in turn,
over strings as a data loader hands them over: new string objects every pass (CPython
has no UTF-8 of them yet), and, for comparison, the same strings again.

    python benchmarks/bench_batch_strings.py gpt2 /tmp/corpora/english_gutenberg.txt
    # [--mb 20] [--passes 8] [--threads 2]

Documents as in bench_gigatoken.py: the first --mb MB, cut at <|endoftext|> or in 50
equal slices. Each pass makes new strings (equal to the documents) for both libraries,
then times bytepair's ``encode_batch_to_numpy`` and gigatoken's ``encode_batch`` on
them; then both again on those same strings (now with whatever UTF-8 each library had
CPython keep in them). Printed: best passes from the third on (MB/s), and bytepair's
speed over gigatoken's as the median of the pairs of each pass; ids are checked equal.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_interleaved import both, documents  # noqa: E402


def fresh(docs: list[str]) -> list[str]:
    """New string objects equal to `docs`: CPython holds no UTF-8 of them yet."""
    return ["".join([d[:1], d[1:]]) for d in docs]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("encoding", choices=["gpt2", "cl100k_base", "o200k_base"])
    p.add_argument("path")
    p.add_argument("--mb", type=float, default=20)
    p.add_argument("--passes", type=int, default=8)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    a = p.parse_args()
    import awkward as ak
    import numpy as np

    docs = documents(a.path, a.mb)
    mb = sum(len(d.encode()) for d in docs) / 1e6
    ours, theirs = both(a.encoding)

    def bytepair_batch(texts: list[str]) -> list:
        ids, offsets = ours.encode_batch_to_numpy(texts, num_threads=a.threads)
        return np.split(ids, offsets[1:-1])

    def gigatoken_batch(texts: list[str]) -> list:
        return [ak.to_numpy(x) for x in theirs.encode_batch(texts)]

    runs = {"bytepair": bytepair_batch, "gigatoken": gigatoken_batch}
    times = {(kind, lib): [] for kind in ("new", "same") for lib in runs}
    for _ in range(a.passes):
        texts = {lib: fresh(docs) for lib in runs}
        for kind in ("new", "same"):
            got = {}
            for lib, run in runs.items():
                t = time.perf_counter()
                got[lib] = run(texts[lib])
                times[kind, lib].append(time.perf_counter() - t)
            assert len(got["bytepair"]) == len(docs) and all(
                np.array_equal(x, y) for x, y in zip(got["bytepair"], got["gigatoken"])
            ), "bytepair's ids differ from gigatoken's"
        del texts
    for kind, what in (("new", "new strings each pass"), ("same", "the same strings again")):
        ours_t, theirs_t = times[kind, "bytepair"][2:], times[kind, "gigatoken"][2:]
        ratio = statistics.median(t / o for o, t in zip(ours_t, theirs_t))
        print(
            f"{a.encoding} {Path(a.path).name}, {what}, {a.threads} threads: "
            f"bytepair {mb / min(ours_t):.0f} MB/s, gigatoken {mb / min(theirs_t):.0f} MB/s, "
            f"bytepair {ratio:.2f}x (paired median of {len(ours_t)} passes)"
        )


if __name__ == "__main__":
    main()
