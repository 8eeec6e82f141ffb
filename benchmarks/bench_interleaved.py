"""bytepair and gigatoken encoding the same documents on one thread, in one process,
pass for pass in turn: a warm ratio less at the mercy of a noisy machine than rows
measured minutes apart (both libraries see the same fast or slow stretch). Used to
compare two builds of bytepair: run it with each build, in turn, a few times.

    python benchmarks/bench_interleaved.py gpt2 /tmp/corpora/english_gutenberg.txt
    # [--mb 10] [--passes 6] [--threads 2]

Documents as in bench_gigatoken.py: the first --mb MB, cut at <|endoftext|> or in 50
equal slices. "warm" is the fastest pass from the third on; ids are checked equal.
With ``--threads N``, bytepair's batch on N threads (``encode_batch_to_numpy``, as
bench_gigatoken.py's batch row) takes its turn in each pass too, and its warm speed
over bytepair's one thread is printed: the two-thread target's ratio, measured in the
same stretch of the machine as the one thread it is over, by best passes and as the
median of the two in each pass (the steadier).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

EOT = "<|endoftext|>"


def documents(path: str, mb: float) -> list[str]:
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read(int(mb * 1e6))
    if EOT in text:
        return [d for d in text.split(EOT) if d]
    step = len(text) // 50 + 1
    return [text[i : i + step] for i in range(0, len(text), step)]


def both(encoding: str):
    """bytepair's and gigatoken's tokenizer of `encoding` (gigatoken's from the same
    bundled rank file, named as the encoding's: gigatoken picks its pre-tokenizer by
    the name)."""
    import gigatoken

    import bytepair
    from bytepair.formats import bundled

    ranks = bundled.ENCODINGS[encoding][0]
    with tempfile.TemporaryDirectory(prefix="bench-vocab-") as tmp:
        rank_file = Path(tmp, f"{ranks}.tiktoken")
        rank_file.write_bytes(bundled.rank_file_text(ranks))
        theirs = gigatoken.Tokenizer.from_tiktoken(str(rank_file))
    return bytepair.get_encoding(encoding), theirs


def paired(one: list[float], batch: list[float]) -> float:
    """The median over warm passes of one thread's time over the batch's in the same
    pass: less at the mercy of the machine's fast and slow stretches than the ratio of
    two best passes, which may come from different stretches."""
    import statistics

    return statistics.median(o / b for o, b in zip(one[2:], batch[2:]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("encoding", choices=["gpt2", "cl100k_base", "o200k_base"])
    p.add_argument("path")
    p.add_argument("--mb", type=float, default=10)
    p.add_argument("--passes", type=int, default=6)
    p.add_argument("--threads", type=int, default=0, help="also bytepair's batch on N threads")
    a = p.parse_args()
    import numpy as np

    docs = documents(a.path, a.mb)
    mb = sum(len(d.encode()) for d in docs) / 1e6
    ours, theirs = both(a.encoding)
    runs = {
        "bytepair": lambda: [ours.encode_to_numpy(d) for d in docs],
        "gigatoken": lambda: [theirs.encode(d) for d in docs],
    }
    if a.threads:

        def batch() -> list:
            ids, offsets = ours.encode_batch_to_numpy(docs, num_threads=a.threads)
            return np.split(ids, offsets[1:-1])

        runs["batch"] = batch
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(a.passes):
        got = {}
        for name, run in runs.items():
            t = time.perf_counter()
            got[name] = run()
            times[name].append(time.perf_counter() - t)
        for name in got:
            assert len(got[name]) == len(docs) and all(
                np.array_equal(x, np.asarray(y)) for x, y in zip(got[name], got["gigatoken"])
            ), f"{name}'s ids differ from gigatoken's"
    warm = {name: min(t[2:]) for name, t in times.items()}
    print(
        f"{a.encoding} {Path(a.path).name}: bytepair {mb / warm['bytepair']:.0f} MB/s, "
        f"gigatoken {mb / warm['gigatoken']:.0f} MB/s, "
        f"ratio {warm['gigatoken'] / warm['bytepair']:.2f} (warm, {a.passes} passes in turn)"
        + (
            f"; bytepair batch on {a.threads} threads {mb / warm['batch']:.0f} MB/s, "
            f"{warm['bytepair'] / warm['batch']:.2f}x its one thread "
            f"(paired median {paired(times['bytepair'], times['batch']):.2f}x)"
            if a.threads
            else ""
        )
    )


if __name__ == "__main__":
    main()
