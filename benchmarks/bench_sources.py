"""Training time from the same documents stored as .txt, .jsonl.zst and Parquet.

Takes the first `--mb` MB of a text corpus (cut at a document end), splits it into
documents at `<|endoftext|>`, writes them as `c.txt` (documents joined by the special
token: the Rust core reads it in blocks), `c.jsonl.zst` and `c.parquet` (streamed as
documents), then trains each in a fresh subprocess, `--repeat` times, and prints the
best wall time, the ratio to `.txt`, and whether the merges are identical. Example:

    python /work/shared/corpora/unpack.py /tmp/corpora english
    python benchmarks/bench_sources.py /tmp/corpora/english_gutenberg.txt --mb 50 --vocab 10000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

EOT = "<|endoftext|>"

CHILD = r"""
import hashlib, json, sys, time
import bytepair
path, vocab = sys.argv[1], int(sys.argv[2])
start = time.perf_counter()
tok = bytepair.train(path, vocab, special_tokens=["<|endoftext|>"], progress=False)
secs = time.perf_counter() - start
s = tok.training_stats
digest = hashlib.sha256(repr(tok.merges).encode()).hexdigest()[:16]
print(json.dumps({"seconds": secs, "count_seconds": s.count_seconds,
                  "merge_seconds": s.merge_seconds, "merges": digest}))
"""


def write_inputs(corpus: Path, mb: float, out: Path) -> dict[str, Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    with open(corpus, "rb") as f:
        data = f.read(int(mb * 1e6)).decode("utf-8", errors="ignore")
    docs = [d for d in data.split(EOT)[:-1] if d] or [data]  # whole documents only
    paths = {"txt": out / "c.txt", "jsonl.zst": out / "c.jsonl.zst", "parquet": out / "c.parquet"}
    paths["txt"].write_text(EOT.join(docs), "utf-8")
    lines = "".join(json.dumps({"text": d}) + "\n" for d in docs).encode()
    paths["jsonl.zst"].write_bytes(zstandard.ZstdCompressor(level=3).compress(lines))
    pq.write_table(pa.table({"text": docs}), paths["parquet"], row_group_size=64)
    print(f"{len(docs):,} documents, {sum(map(len, docs)) / 1e6:.1f} M chars", file=sys.stderr)
    return paths


def run_once(path: Path, vocab: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(vocab)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("corpus", type=Path, help="a UTF-8 text corpus")
    ap.add_argument("--mb", type=float, default=50, help="how much of it (default 50 MB)")
    ap.add_argument("--vocab", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=2, help="runs per input; the best counts")
    ap.add_argument("--keep", type=Path, help="write the inputs here instead of a temp folder")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        paths = write_inputs(args.corpus, args.mb, folder)
        results = {}
        for _ in range(args.repeat):  # rounds: each input once per round
            for kind, path in paths.items():
                r = run_once(path, args.vocab)
                if kind not in results or r["seconds"] < results[kind]["seconds"]:
                    results[kind] = r
        base = results["txt"]
        print(f"{'input':<10} {'size MB':>8} {'total s':>8} {'count s':>8} {'merge s':>8} "
              f"{'vs txt':>7}  merges")  # fmt: skip
        for kind, r in results.items():
            size = paths[kind].stat().st_size / 1e6
            same = "identical" if r["merges"] == base["merges"] else "DIFFERENT"
            print(
                f"{kind:<10} {size:>8.1f} {r['seconds']:>8.2f} {r['count_seconds']:>8.2f} "
                f"{r['merge_seconds']:>8.2f} {r['seconds'] / base['seconds']:>6.2f}x  {same}"
            )


if __name__ == "__main__":
    main()
