"""Training benchmark: wall time, throughput and peak memory of `bytepair.train`.

Each run is a fresh subprocess, so peak RSS is that run's alone. Example:

    python benchmarks/bench_train.py /path/to/english_gutenberg.txt --vocab 10000 32000
    python benchmarks/bench_train.py corpus.txt --mb 10 50 100 --vocab 10000 --repeat 3

(`python ../shared/corpora/unpack.py /tmp/corpora english` unpacks the corpus.)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
import bytepair
path, vocab, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
start = time.perf_counter()
tok = bytepair.train(path, vocab, special_tokens=["<|endoftext|>"], workers=workers, progress=False)
secs = time.perf_counter() - start
s = tok.training_stats
print(json.dumps({"seconds": secs, "count_seconds": s.count_seconds, "merge_seconds": s.merge_seconds,
                  "merges": s.merges_done, "pretokens": s.distinct_pretokens,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run_once(path: Path, vocab: int, workers: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(vocab), str(workers)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)


def prefix_file(path: Path, mb: float, tmp: Path) -> Path:
    """The first `mb` MB of path (cut at a line end), as a file of its own."""
    dst = tmp / f"{path.stem}.{mb:g}MB.txt"
    with open(path, "rb") as f:
        data = f.read(int(mb * 1e6))
    data = data[: data.rfind(b"\n") + 1] or data
    dst.write_bytes(data)
    return dst


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--vocab", type=int, nargs="+", default=[10_000])
    ap.add_argument(
        "--mb", type=float, nargs="*", default=[], help="also time prefixes of this size"
    )
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, default=1, help="runs per cell; the median is shown")
    args = ap.parse_args()

    import bytepair

    print(
        f"# bytepair {bytepair.__version__}, Python {platform.python_version()}, "
        f"{platform.machine()}, {os.cpu_count()} cores, workers={args.workers}"
    )
    print(
        "| corpus | MB | vocab | seconds | MB/s | count s | merge s | pre-tokens | peak RSS MiB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        files = [prefix_file(args.corpus, mb, Path(tmp)) for mb in args.mb] + [args.corpus]
        for path in files:
            size = path.stat().st_size / 1e6
            for vocab in args.vocab:
                runs = [run_once(path, vocab, args.workers) for _ in range(args.repeat)]
                r = sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]
                secs = statistics.median(x["seconds"] for x in runs)
                print(
                    f"| {args.corpus.name} | {size:.1f} | {vocab} | {secs:.2f} | {size / secs:.1f} "
                    f"| {r['count_seconds']:.2f} | {r['merge_seconds']:.2f} | {r['pretokens']:,} "
                    f"| {max(x['peak_rss_mib'] for x in runs):.0f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
