"""The merge loop alone: seconds, CPU seconds and peak RSS of `PreTokenCounter.train`.

The corpus is counted once (GPT-2 pattern, `<|endoftext|>`) into a counts table; each
run is a fresh process that loads the table and times only the merge loop, so counting
does not blur it. A hash of the merges shows they do not change with the thread count
(or between builds: run it with another PYTHONPATH to compare). Example, on the 2.2 GB
scale corpus (3.7 M distinct pre-tokens; `../shared/tools/make_scale_corpus.py`):

    python benchmarks/bench_merge_loop.py /tmp/scale.txt --vocab 10000 32000 \\
        --threads 1 2 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EOT = "<|endoftext|>"

CHILD = r"""
import hashlib, json, resource, sys, time
from bytepair import _core
table, merges, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(table, "rb") as f:
    counter = _core.PreTokenCounter.from_bytes(f.read(), None, [], threads)
before = resource.getrusage(resource.RUSAGE_SELF)
start = time.perf_counter()
ids, vocab = counter.train(merges)
secs = time.perf_counter() - start
after = resource.getrusage(resource.RUSAGE_SELF)
cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
print(json.dumps({"seconds": secs, "cpu": cpu, "merges": len(ids),
                  "rss_mib": after.ru_maxrss / 1024, "table_rss_mib": before.ru_maxrss / 1024,
                  "hash": hashlib.sha256(repr(ids).encode()).hexdigest()[:16]}))
"""


def count_once(corpus: Path, table: Path) -> tuple[int, float]:
    from bytepair import _core
    from bytepair.patterns import resolve_pattern

    counter = _core.PreTokenCounter(resolve_pattern("gpt2"), [EOT], 2)
    start = time.perf_counter()
    counter.add_file(str(corpus))
    secs = time.perf_counter() - start
    table.write_bytes(counter.to_bytes())
    return len(counter), secs


def run(table: Path, merges: int, threads: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(table), str(merges), str(threads)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--vocab", type=int, nargs="+", default=[10_000])
    ap.add_argument("--threads", type=int, nargs="+", default=[2])
    ap.add_argument("--repeat", type=int, default=3, help="fresh-process runs per cell")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / "counts.bin"
        distinct, count_secs = count_once(args.corpus, table)
        print(
            f"# {args.corpus.name}: {distinct:,} distinct pre-tokens, counted in {count_secs:.1f} s"
        )
        print(
            "| vocab | threads | seconds (min-max) | CPU s | peak RSS MiB (table alone) | merges hash |"
        )
        print("|---:|---:|---|---:|---|---|")
        for vocab in args.vocab:
            merges = vocab - 256 - 1  # the special token takes an id
            for threads in args.threads:
                rs = [run(table, merges, threads) for _ in range(args.repeat)]
                secs = sorted(r["seconds"] for r in rs)
                cpu = sorted(r["cpu"] for r in rs)[len(rs) // 2]
                hashes = {r["hash"] for r in rs}
                print(
                    f"| {vocab} | {threads} | {secs[len(secs) // 2]:.2f} ({secs[0]:.2f}-{secs[-1]:.2f}) "
                    f"| {cpu:.2f} | {max(r['rss_mib'] for r in rs):.0f} ({rs[0]['table_rss_mib']:.0f}) "
                    f"| {', '.join(sorted(hashes))} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
