"""bytepair and gigatoken encoding the same documents on one thread, in one process,
pass for pass in turn: a warm ratio less at the mercy of a noisy machine than rows
measured minutes apart (both libraries see the same fast or slow stretch). Used to
compare two builds of bytepair: run it with each build, in turn, a few times.

    python benchmarks/bench_interleaved.py gpt2 /tmp/corpora/english_gutenberg.txt
    # [--mb 10] [--passes 6]

Documents as in bench_gigatoken.py: the first --mb MB, cut at <|endoftext|> or in 50
equal slices. "warm" is the fastest pass from the third on; ids are checked equal.
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("encoding", choices=["gpt2", "cl100k_base", "o200k_base"])
    p.add_argument("path")
    p.add_argument("--mb", type=float, default=10)
    p.add_argument("--passes", type=int, default=6)
    a = p.parse_args()
    import gigatoken
    import numpy as np

    import bytepair
    from bytepair.formats import bundled

    # Named as the encoding's rank file: gigatoken picks its pre-tokenizer by the name.
    ranks = bundled.ENCODINGS[a.encoding][0]
    docs = documents(a.path, a.mb)
    mb = sum(len(d.encode()) for d in docs) / 1e6
    ours = bytepair.get_encoding(a.encoding)
    with tempfile.TemporaryDirectory(prefix="bench-vocab-") as tmp:
        rank_file = Path(tmp, f"{ranks}.tiktoken")
        rank_file.write_bytes(bundled.rank_file_text(ranks))
        theirs = gigatoken.Tokenizer.from_tiktoken(str(rank_file))
    times: dict[str, list[float]] = {"bytepair": [], "gigatoken": []}
    runs = {
        "bytepair": lambda: [ours.encode_to_numpy(d) for d in docs],
        "gigatoken": lambda: [theirs.encode(d) for d in docs],
    }
    for _ in range(a.passes):
        got = {}
        for name, run in runs.items():
            t = time.perf_counter()
            got[name] = run()
            times[name].append(time.perf_counter() - t)
        assert all(
            np.array_equal(x, np.asarray(y)) for x, y in zip(got["bytepair"], got["gigatoken"])
        ), "ids differ"
    warm = {name: min(t[2:]) for name, t in times.items()}
    print(
        f"{a.encoding} {Path(a.path).name}: bytepair {mb / warm['bytepair']:.0f} MB/s, "
        f"gigatoken {mb / warm['gigatoken']:.0f} MB/s, "
        f"ratio {warm['gigatoken'] / warm['bytepair']:.2f} (warm, {a.passes} passes in turn)"
    )


if __name__ == "__main__":
    main()
