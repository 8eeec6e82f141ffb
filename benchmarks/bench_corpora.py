"""Training and shard encoding at corpus scale (0.2 / 1 / 2.2 GB), from .txt, .jsonl.zst
and Parquet, locally and on a Ray cluster: wall time, peak RSS and the load average.

Corpora are paths (never stored in the repository):

    python /work/shared/corpora/unpack.py /tmp/corpora english          # 0.2 GB
    python /work/shared/tools/make_scale_corpus.py /tmp/scale.txt        # 2.2 GB

    # the same documents as c.txt, c.jsonl.zst and c.parquet (streamed, bounded memory)
    python benchmarks/bench_corpora.py prepare /tmp/scale.txt /tmp/b1g --mb 1000
    # one measurement per line of JSON, each in a fresh process
    python benchmarks/bench_corpora.py train /tmp/b1g/c.txt [--engine ray --ray-address A]
    python benchmarks/bench_corpora.py encode /tmp/b1g/c.txt /tmp/shards [--engine ray ...]
    # everything for one folder, as a markdown table
    python benchmarks/bench_corpora.py all /tmp/b1g [--ray-address A]

Training: vocab 10,000, the gpt2 pattern, ``<|endoftext|>`` special. Encoding: cl100k_base
to a folder of shards (``bytepair encode FILE -o OUT/``). Peak RSS is the measuring
process's own (``ru_maxrss``; with Ray, the driver's: tasks run in Ray's workers). The
machine may be shared: the 1-minute load average is read before and after each run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

EOT = "<|endoftext|>"
KINDS = ("txt", "jsonl.zst", "parquet")

CHILD = r"""
import hashlib, json, resource, sys, time
import bytepair
task, path, out, engine, address = sys.argv[1:6]
address = address or None
start = time.perf_counter()
if task == "train":
    tok = bytepair.train(path, 10_000, special_tokens=["<|endoftext|>"], progress=False,
                         engine=engine, ray_address=address)
    extra = {"merges": hashlib.sha256(repr(tok.merges).encode()).hexdigest()[:16]}
else:
    from bytepair.sources import open_sources, part_chars_for
    tok = bytepair.get_encoding("cl100k_base")
    corpus = open_sources([path], special_tokens=["<|endoftext|>"], part_chars=part_chars_for(tok))
    m = bytepair.write_shards(tok, corpus, out,
                              progress=False, engine=engine, ray_address=address,
                              inputs=[{"path": s.name, "bytes": s.size} for s in corpus.sources])
    shards = json.dumps(m["shards"], sort_keys=True).encode()  # names, sizes, sha256s
    extra = {"tokens": sum(s["tokens"] for s in m["splits"].values()),
             "shards": hashlib.sha256(shards).hexdigest()[:16]}
secs = time.perf_counter() - start
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": secs, "peak_rss": rss, **extra}))
"""


def documents(corpus: Path, limit: int):
    """The documents (split at ``<|endoftext|>``) of about the first ``limit`` bytes,
    the last one cut at a line end. (In the scale corpus only copy 0 keeps its
    separators: the others permute their letters too, so each is one 200 MB document.)"""
    held, done = "", 0
    with open(corpus, encoding="utf-8", newline="") as f:
        while done < limit and (chunk := f.read(min(16 << 20, limit - done))):
            done += len(chunk.encode("utf-8"))
            parts = (held + chunk).split(EOT)
            held = parts.pop()
            yield from (d for d in parts if d)
    if done < os.path.getsize(corpus):
        held = held[: held.rfind("\n") + 1]
    if held:
        yield held


def prepare(corpus: Path, out: Path, mb: float) -> None:
    """c.txt, c.jsonl.zst and c.parquet holding the same documents, written streaming."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    out.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([("text", pa.string())])
    with (
        open(out / "c.txt", "w", encoding="utf-8", newline="") as txt,
        open(out / "c.jsonl.zst", "wb") as raw,
        zstandard.ZstdCompressor(level=3).stream_writer(raw) as jsonl,
        pq.ParquetWriter(out / "c.parquet", schema) as parquet,
    ):
        batch: list[str] = []
        for n, doc in enumerate(documents(corpus, int(mb * 1e6))):
            txt.write((EOT if n else "") + doc)
            jsonl.write((json.dumps({"text": doc}) + "\n").encode())
            batch.append(doc)
            # Row groups of 64 rows (as bench_sources.py writes them), or fewer long ones
            # (an Arrow string array holds at most 2 GB).
            if len(batch) == 64 or sum(map(len, batch)) > 256 << 20:
                parquet.write_table(pa.table({"text": batch}, schema=schema))
                batch = []
        if batch:
            parquet.write_table(pa.table({"text": batch}, schema=schema))
    for kind in KINDS:
        print(f"{out / ('c.' + kind)}: {(out / ('c.' + kind)).stat().st_size:,} bytes")


def measure(task: str, path: Path, out: Path | None, engine: str, address: str | None) -> dict:
    """One measurement in a fresh process, with the load average around it."""
    if out is not None and out.exists():
        shutil.rmtree(out)
    before = os.getloadavg()[0]
    r = subprocess.run(
        [sys.executable, "-c", CHILD, task, str(path), str(out or ""), engine, address or ""],
        capture_output=True,
        text=True,
    )
    if r.returncode:
        sys.exit(f"{task} {path} ({engine}) failed:\n{r.stderr[-3000:]}")
    result = json.loads(r.stdout.strip().splitlines()[-1])
    # MB of text (the same documents as c.txt), whatever the input's format
    text = path.with_name("c.txt")
    size = (text if text.exists() else path).stat().st_size
    result.update(
        task=task,
        input=path.name,
        engine=engine,
        mb=size / 1e6,
        mb_per_s=size / 1e6 / result["seconds"],
        load=[round(before, 2), round(os.getloadavg()[0], 2)],
    )
    if out is not None:
        shutil.rmtree(out)
    return result


def row(r: dict) -> str:
    what = r.get("merges") or f"{r['tokens']:,} tokens, shards {r.get('shards', '?')}"
    return (
        f"| {r['task']} | {r['input']} | {r['engine']} | {r['mb']:,.0f} | {r['seconds']:.1f} | "
        f"{r['mb_per_s']:.1f} | {r['peak_rss'] / 2**20:,.0f} | {r['load'][0]} → {r['load'][1]} | "
        f"{what} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="write c.txt, c.jsonl.zst, c.parquet")
    p.add_argument("corpus", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--mb", type=float, default=1e9, help="how much of the corpus (default all)")
    for name in ("train", "encode", "all"):
        q = sub.add_parser(name)
        q.add_argument("input", type=Path, help="a file (train, encode) or a prepared folder")
        if name == "encode":
            q.add_argument("out", type=Path, help="the shard folder (removed afterwards)")
        q.add_argument("--engine", choices=["local", "ray"], default="local")
        q.add_argument("--ray-address", help="also measure on this Ray cluster (all)")
    args = ap.parse_args()
    if args.cmd == "prepare":
        return prepare(args.corpus, args.out, args.mb)
    if args.cmd in ("train", "encode"):
        out = getattr(args, "out", None)
        r = measure(args.cmd, args.input, out, args.engine, args.ray_address)
        print(json.dumps(r), flush=True)
        return
    print(
        "| task | input | engine | text MB | s | MB/s | peak RSS MiB | load 1 min | merges / tokens, shards |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    engines = ["local"] + (["ray"] if args.ray_address else [])
    shards = args.input / "shards"
    for engine in engines:
        for kind in KINDS:
            r = measure("train", args.input / f"c.{kind}", None, engine, args.ray_address)
            print(row(r), flush=True)
        r = measure("encode", args.input / "c.txt", shards, engine, args.ray_address)
        print(row(r), flush=True)


if __name__ == "__main__":
    main()
