"""bytepair and gigatoken encoding the same documents on one thread, in one process,
pass for pass in turn: a warm ratio less at the mercy of a noisy machine than rows
measured minutes apart (both libraries see the same fast or slow stretch). Used to
compare two builds of bytepair: run it with each build, in turn, a few times.

    python benchmarks/bench_interleaved.py gpt2 /tmp/corpora/english_gutenberg.txt
    # [--mb 10] [--passes 6] [--threads 2 [--ceiling]] [--cold]

Documents as in bench_gigatoken.py: the first --mb MB, cut at <|endoftext|> or in 50
equal slices. "warm" is the fastest pass from the third on; ids are checked equal.
With ``--threads N``, bytepair's batch on N threads (``encode_batch_to_numpy``, as
bench_gigatoken.py's batch row) takes its turn in each pass too, and its warm speed
over bytepair's one thread is printed: the two-thread target's ratio, measured in the
same stretch of the machine as the one thread it is over, by best passes and as the
median of the two in each pass (the steadier).

With ``--ceiling`` too, each pass also measures what the machine gives two workers at
that moment, with bytepair's own work and nothing joining them: two worker processes,
each holding the documents and its own tokenizer, encode them all on one thread
(``encode_batch_to_numpy(..., num_threads=1)``), first one alone, then both at once
(started by a barrier). The ceiling of a pass is the two workers' speeds added up over
the one's alone: 2.0 on two full cores. A batch can be no better than that, and its
ratio over the ceiling in the same pass says how much of the shortfall is the batch's
own. (This is the process ceiling of `bench_machine.py` with the encoder as the work.)

With ``--cold``, each pass is instead a first pass for both libraries, in turn (which
goes first alternates): a tokenizer loaded afresh from the rank file (no cache) encodes fresh copies
of the documents (strings without CPython's UTF-8), and only that first pass is timed.
The ratio of each pass's two times, and their median over the passes, is the cold ratio
in one process: steadier than fresh processes minutes apart, though a process that has
run before gets freed memory back from its allocator, so it pays fewer of the page
faults a fresh process pays (both libraries alike). Each library then encodes fresh
copies once more with the same tokenizer: a second pass, which does all a first pass
does (strings converted, every piece pre-tokenized, looked up and its ids written) but
nothing for the first sight of a piece (merging it, caching it, growing the cache). No
first pass can be faster than that, so gigatoken's first pass over bytepair's second is
the most the cold ratio can reach without a faster second pass: printed as "if it cost
nothing". A third line says what first sight may cost for a cold ratio of 1.5 (gigatoken's
first pass over 1.5, less bytepair's second pass), in all and for each distinct piece
of the text (by the reference pre-tokenizer), beside what it costs today; the merge
alone, in the same unit, is what ``core_first_sight`` prints.
"""

from __future__ import annotations

import argparse
import os
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


def cold(encoding: str, path: str, mb: float, passes: int) -> None:
    """The ``--cold`` passes (see the module doc); prints two lines."""
    import statistics

    import gigatoken

    from bytepair import Tokenizer
    from bytepair.formats import bundled
    from bytepair.formats import tiktoken as tiktoken_format

    file, pattern, specials = bundled.ENCODINGS[encoding]
    ranks = bundled.rank_file_text(file)

    def fresh_model():  # bundled.model keeps one per process, its caches warm
        return tiktoken_format.from_bytes(ranks, bundled.rank_file_path(file), pattern, specials)

    docs = documents(path, mb)
    mb_text = sum(len(d.encode()) for d in docs) / 1e6
    with tempfile.TemporaryDirectory(prefix="bench-vocab-") as tmp:
        rank_file = Path(tmp, f"{file}.tiktoken")
        rank_file.write_bytes(ranks)
        load = {
            "bytepair": lambda: Tokenizer.from_model(fresh_model()),
            "gigatoken": lambda: gigatoken.Tokenizer.from_tiktoken(str(rank_file)),
        }
        run = {
            "bytepair": lambda tok, texts: [tok.encode_to_numpy(d) for d in texts],
            "gigatoken": lambda tok, texts: [tok.encode(d) for d in texts],
        }
        times: dict[str, list[float]] = {"bytepair": [], "gigatoken": []}
        seconds: dict[str, list[float]] = {"bytepair": [], "gigatoken": []}
        for k in range(passes):
            order = ["bytepair", "gigatoken"][:: 1 if k % 2 == 0 else -1]
            for name in order:
                tok = load[name]()
                for spent in (times, seconds):
                    texts = ["".join([d[:1], d[1:]]) for d in docs]  # no UTF-8 kept yet
                    t = time.perf_counter()
                    run[name](tok, texts)
                    spent[name].append(time.perf_counter() - t)
                    del texts
                del tok
    ratios = [g / b for b, g in zip(times["bytepair"], times["gigatoken"])]
    # What the cold ratio would be if bytepair's first pass cost no more than its second:
    # gigatoken's first pass over bytepair's second, pass by pass.
    reach = [g / b for b, g in zip(seconds["bytepair"], times["gigatoken"])]
    first_sight = [1 - s / c for c, s in zip(times["bytepair"], seconds["bytepair"])]
    print(
        f"{encoding} {Path(path).name}: cold, {passes} first passes in turn: bytepair "
        f"{mb_text / statistics.median(times['bytepair']):.0f} MB/s, gigatoken "
        f"{mb_text / statistics.median(times['gigatoken']):.0f} MB/s (medians); ratio "
        f"{statistics.median(ratios):.2f} (paired median; passes "
        f"{min(ratios):.2f}-{max(ratios):.2f})"
    )
    print(
        f"  second passes (fresh strings, same tokenizer): bytepair "
        f"{mb_text / statistics.median(seconds['bytepair']):.0f} MB/s, gigatoken "
        f"{mb_text / statistics.median(seconds['gigatoken']):.0f} MB/s; bytepair's first "
        f"sight {statistics.median(first_sight):.0%} of its first pass; if it cost nothing, "
        f"the cold ratio would be {statistics.median(reach):.2f} (passes "
        f"{min(reach):.2f}-{max(reach):.2f})"
    )
    # What first sight may cost for 1.5x: bytepair's first pass at most gigatoken's over
    # 1.5, less its second pass; over the distinct pieces that a first pass merges.
    from bytepair.reference import pretokenize

    distinct = len({piece for d in docs for piece in pretokenize(d, pattern)})
    budget = statistics.median(times["gigatoken"]) / 1.5 - statistics.median(seconds["bytepair"])
    today = statistics.median(times["bytepair"]) - statistics.median(seconds["bytepair"])
    # Printed only for a negative budget, which the number alone would not explain.
    negative = " (negative: 1.5x needs a faster second pass too)" if budget < 0 else ""
    print(
        f"  for 1.5x, first sight may take {budget * 1e3:.1f} ms, "
        f"{budget / distinct * 1e9:.0f} ns for each of the {distinct:,} distinct pieces"
        f"{negative}; it takes {today * 1e3:.1f} ms, {today / distinct * 1e9:.0f} ns"
    )


def _ceiling_worker(encoding: str, path: str, mb: float, conn, barrier, cpu: int) -> None:
    """A ceiling worker (see the module doc): encodes the documents on one thread each
    time it is asked, after the barrier if asked "together", and sends back the time."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # no idle BLAS threads spinning
    if cpu >= 0:
        os.sched_setaffinity(0, {cpu})
    import bytepair

    docs = documents(path, mb)
    tok = bytepair.get_encoding(encoding)
    # Warm, and each string holding CPython's UTF-8 as the parent's do (its one-thread
    # pass makes it): without it a batch converts every string again each call.
    for _ in range(2):
        [tok.encode_to_numpy(d) for d in docs]
        tok.encode_batch_to_numpy(docs, num_threads=1)
    conn.send("ready")
    while (task := conn.recv()) != "stop":
        if task == "together":
            barrier.wait(timeout=600)
        t = time.perf_counter()
        tok.encode_batch_to_numpy(docs, num_threads=1)
        conn.send(time.perf_counter() - t)


class Ceiling:
    """Two ceiling workers; `measure()` is one pass's ceiling (see the module doc)."""

    def __init__(self, encoding: str, path: str, mb: float):
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        barrier = ctx.Barrier(2)
        self.conns, self.procs = [], []
        pin = os.environ.get("CEILING_PIN") == "1"
        for i in range(2):
            here, there = ctx.Pipe()
            args = (encoding, path, mb, there, barrier, i if pin else -1)
            proc = ctx.Process(target=_ceiling_worker, args=args)
            proc.start()
            self.conns.append(here)
            self.procs.append(proc)
        for conn in self.conns:
            assert conn.recv() == "ready"
        self.turn = 0

    def measure(self) -> float:
        alone = self.conns[self.turn]  # each worker alone in turn (they may sit on other cores)
        self.turn ^= 1
        alone.send("alone")
        t_alone = alone.recv()
        for conn in self.conns:
            conn.send("together")
        return sum(t_alone / conn.recv() for conn in self.conns)

    def close(self) -> None:
        for conn in self.conns:
            conn.send("stop")
        for proc in self.procs:
            proc.join(timeout=60)


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
    p.add_argument(
        "--ceiling", action="store_true", help="also the machine's two-worker ceiling (--threads 2)"
    )
    p.add_argument("--cold", action="store_true", help="first passes of fresh tokenizers, in turn")
    a = p.parse_args()
    # Before numpy is imported (here or by gigatoken): OpenBLAS's idle threads would
    # otherwise spin beside the measured work (12% of a warm run's samples in
    # blas_thread_server), taking a core from the two-thread batch.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if a.cold:
        cold(a.encoding, a.path, a.mb, a.passes)
        return
    if a.ceiling and a.threads != 2:
        p.error("--ceiling is the ceiling of two workers: give --threads 2 with it")
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
    ceiling = Ceiling(a.encoding, a.path, a.mb) if a.ceiling else None
    ceilings: list[float] = []
    for _ in range(a.passes):
        if ceiling:
            ceilings.append(ceiling.measure())
        got = {}
        for name, run in runs.items():
            t = time.perf_counter()
            got[name] = run()
            times[name].append(time.perf_counter() - t)
        for name in got:
            assert len(got[name]) == len(docs) and all(
                np.array_equal(x, np.asarray(y)) for x, y in zip(got[name], got["gigatoken"])
            ), f"{name}'s ids differ from gigatoken's"
    if ceiling:
        ceiling.close()
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
        + (f"; the machine's ceiling for two {ceiling_text(times, ceilings)}" if ceilings else "")
    )


def ceiling_text(times: dict[str, list[float]], ceilings: list[float]) -> str:
    """The ceiling's paired median and range over the warm passes, and the batch's
    ratio over it, pass by pass (paired median)."""
    import statistics

    warm = ceilings[2:]
    over = [o / b / c for o, b, c in zip(times["bytepair"][2:], times["batch"][2:], warm)]
    return (
        f"{statistics.median(warm):.2f}x (passes {min(warm):.2f}-{max(warm):.2f}x); "
        f"the batch at {statistics.median(over):.2f} of it (paired median)"
    )


if __name__ == "__main__":
    main()
