"""bytepair side by side with gigatoken (and tiktoken) on the rows of the second
performance round: load, encode (single thread, cold and warm), batch on all cores,
file -> ids on disk, training, worst cases. Ids are checked against tiktoken's.

    pip install ".[bench]"        # the peers, gigatoken 0.10 among them
    python ../shared/corpora/unpack.py /tmp/corpora english code/ multilingual/
    cat /tmp/corpora/multilingual/*.txt > /tmp/corpora/multilingual_all.txt
    python ../shared/tools/make_scale_corpus.py /tmp/scale.txt      # 2.2 GB
    python benchmarks/bench_gigatoken.py --english /tmp/corpora/english_gutenberg.txt \\
        --other /tmp/corpora/code/code_python.txt /tmp/corpora/multilingual_all.txt \\
        --scale /tmp/scale.txt --repeat 3 > results.md
    # [--only load encode batch file train worst] [--encode-mb 20] [--vocab 10000]

Every measurement runs in a fresh process and prints one JSON line (wall seconds of
the measured call, peak RSS of that process, a hash of the ids or merges). "cold" is
the first pass over the documents in a fresh process, "warm" the fastest of passes 3
to 5 (tiktoken: the third; it is here for its ids). The libraries of a row run in
turn, ``--repeat`` times, and each cell is the median of its runs. Encoding reads
the first ``--encode-mb`` MB as its documents (about 50 books of the English corpus). The
table (markdown, with the ratio bytepair / gigatoken; above 1 means bytepair is faster or leaner) goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

EOT = "<|endoftext|>"
HERE = Path(__file__).resolve().parent
TIKTOKEN_DIR = HERE.parent / "python" / "bytepair" / "data"

CHILD = r"""
import hashlib, json, os, resource, sys, time
import numpy as np
task, lib, enc, path, arg = sys.argv[1:6]
EOT = "<|endoftext|>"

def digest(arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.asarray(a, dtype="<u4").tobytes())
    return h.hexdigest()[:16]

def spec(name):
    from bytepair.formats import bundled
    return bundled.ENCODINGS[name]  # (rank file, pattern, special tokens)

def tiktoken_file(name):
    return os.path.join(os.environ["BENCH_VOCAB"], spec(name)[0] + ".tiktoken")

def load():
    if lib == "bytepair":
        import bytepair
        return bytepair.get_encoding(enc)
    if lib == "gigatoken":
        import gigatoken
        return gigatoken.Tokenizer.from_tiktoken(tiktoken_file(enc))
    import tiktoken, tiktoken.load
    _, pattern, specials = spec(enc)
    ranks = tiktoken.load.load_tiktoken_bpe(tiktoken_file(enc))
    return tiktoken.Encoding(enc, pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials)

def documents(mb):
    # The first mb MB of the corpus as its documents (the books between the
    # <|endoftext|> separators; code and multilingual files: 50 equal slices).
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read(int(mb * 1e6))
    if EOT in text:
        return [d for d in text.split(EOT) if d]
    step = len(text) // 50 + 1
    return [text[i:i + step] for i in range(0, len(text), step)]

out = {}
if task == "load":
    __import__({"tiktoken": "tiktoken.load"}.get(lib, lib))  # imports are not the load
    spec(enc)
    t = time.perf_counter(); tok = load(); out["seconds"] = time.perf_counter() - t
elif task in ("encode", "batch"):
    docs = documents(float(arg)); tok = load()
    if task == "encode":
        if lib == "bytepair":
            run = lambda: [tok.encode_to_numpy(d) for d in docs]
        elif lib == "gigatoken":
            run = lambda: [tok.encode(d) for d in docs]
        else:
            run = lambda: [tok.encode_ordinary(d) for d in docs]
    else:
        if lib == "bytepair":
            run = lambda: np.split(*(lambda r: (r[0], r[1][1:-1]))(tok.encode_batch_to_numpy(docs, num_threads=os.cpu_count())))
        elif lib == "gigatoken":
            run = lambda: tok.encode_batch(docs)
        else:
            run = lambda: tok.encode_ordinary_batch(docs, num_threads=os.cpu_count())
    times = []
    for _ in range(3 if lib == "tiktoken" else 5):
        t = time.perf_counter(); ids = run(); times.append(time.perf_counter() - t)
    if lib == "gigatoken" and task == "batch":
        import awkward as ak
        ids = [ak.to_numpy(x) for x in ids]
    out.update(cold=times[0], warm=min(times[2:]), ids=digest(ids), bytes=sum(len(d.encode()) for d in docs))
elif task == "file":
    tok = load()
    t = time.perf_counter()
    if lib == "bytepair" and arg in ("shards", "jsonl"):
        from bytepair.sources import open_sources, part_chars_for
        import bytepair
        corpus = open_sources([path], special_tokens=[EOT], part_chars=part_chars_for(tok))
        m = bytepair.write_shards(tok, corpus, os.environ["BENCH_OUT"], eot=None, progress=False)
        n = m["splits"]["train"]["tokens"]
    elif arg == "jsonl":
        import gigatoken
        arr = tok.encode_files(gigatoken.JsonlFileSource([path]))
        import awkward as ak
        n = int(ak.sum(ak.num(arr)))
    elif lib == "bytepair":
        n = tok.encode_file(path, os.environ["BENCH_OUT"] + ".bin", allowed_special="all", progress=False)
    else:
        import gigatoken
        arr = tok.encode_files(gigatoken.TextFileSource([path], separator=EOT))
        import awkward as ak
        n = int(ak.sum(ak.num(arr)))
    out.update(seconds=time.perf_counter() - t, tokens=n)
elif task == "train":
    t = time.perf_counter()
    if lib == "bytepair":
        import bytepair
        vocab, merges = bytepair.train_bpe(path, int(arg), [EOT])
    else:
        import gigatoken
        r = gigatoken.train_bpe(path, int(arg), [EOT])
        merges = r[1] if isinstance(r, tuple) else r.merges
    out["seconds"] = time.perf_counter() - t
    out["merges"] = hashlib.sha256(repr(list(merges)).encode()).hexdigest()[:16]
elif task == "worst":
    tok = load()
    text = {"a": "a" * 1_000_000, "space": " " * 1_000_000}[arg]
    enc_one = {"bytepair": lambda: tok.encode_to_numpy(text), "gigatoken": lambda: tok.encode(text),
               "tiktoken": lambda: tok.encode_ordinary(text)}[lib]
    t = time.perf_counter(); ids = enc_one(); out["seconds"] = time.perf_counter() - t
    out["ids"] = digest([ids])
out["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(out))
"""


VOCAB = tempfile.mkdtemp(prefix="bench-vocab-")


def write_vocab() -> None:
    """The bundled rank files as plain .tiktoken files (what tiktoken and gigatoken read)."""
    from bytepair.formats import bundled

    for name in ("r50k_base", "cl100k_base", "o200k_base"):
        Path(VOCAB, f"{name}.tiktoken").write_bytes(bundled.rank_file_text(name))


def json_lines(corpus: str, mb: float, out: Path) -> Path:
    """The whole documents of the first ``mb`` MB of ``corpus`` (between EOTs), one JSON
    object a line, ``{"text": ...}``."""
    with open(corpus, "rb") as f:
        data = f.read(int(mb * 1e6)).decode("utf-8", errors="ignore")
    docs = [d for d in data.split(EOT)[:-1] if d] or [data]
    with open(out, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"text": d}) + "\n")
    return out


def child(task: str, lib: str, enc: str, path: str = "", arg: str = "", out: str = "") -> dict:
    # No measured call uses BLAS, but OpenBLAS's idle threads spin after `import numpy`.
    env = {**os.environ, "BENCH_OUT": out, "BENCH_VOCAB": VOCAB, "OPENBLAS_NUM_THREADS": "1"}
    r = subprocess.run(
        [sys.executable, "-c", CHILD, task, lib, enc, str(path), str(arg)],
        capture_output=True, text=True, env=env, timeout=3600,
    )  # fmt: skip
    if r.returncode:
        return {"error": r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"}
    return json.loads(r.stdout.strip().splitlines()[-1])


def merged(runs: list) -> dict:
    """Median of fresh-process runs (peak RSS: the largest)."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    out = dict(ok[0])
    for k in ("seconds", "cold", "warm"):
        if k in out:
            out[k] = statistics.median(r[k] for r in ok)
    out["peak_rss"] = max(r["peak_rss"] for r in ok)
    return out


def side_by_side(task: str, runs: dict, repeat: int = 1) -> dict:
    """``runs`` (name -> (lib, enc, path, arg)), each ``repeat`` times in fresh processes,
    taken in turn (a, b, a, b, ...): this machine's speed drifts over minutes, and runs
    in turn meet the same drift. The median of each."""
    out = {name: [] for name in runs}
    for _ in range(repeat):
        for name, (lib, enc, path, arg) in runs.items():
            with tempfile.TemporaryDirectory() as tmp:
                out[name].append(child(task, lib, enc, path, arg, str(Path(tmp) / "out")))
            print(f"  {task} {lib} {enc} {Path(path).name} {arg}: {out[name][-1]}", file=sys.stderr)
    return {name: merged(r) for name, r in out.items()}


def ratio(ours: float, theirs: float, higher_is_better=False) -> str:
    if not ours or not theirs:
        return "–"
    return f"{(ours / theirs if higher_is_better else theirs / ours):.2f}×"


def file_row(what: str, size: float, b: dict, g: dict) -> tuple:
    """A file row: MB/s and peak MiB of bytepair's run ``b`` and gigatoken's ``g``."""
    mib = lambda r: f"{r.get('peak_rss', 0) / 2**20:,.0f}"  # noqa: E731
    return (
        what,
        f"{size / b['seconds']:.0f}; {mib(b)}",
        f"{size / g['seconds']:.0f}; {mib(g)}",
        "",
        ratio(b["seconds"], g["seconds"]) + f"; RSS {g['peak_rss'] / b['peak_rss']:.1f}× less",
        "same tokens"
        if b.get("tokens") == g.get("tokens")
        else f"tokens {b.get('tokens')} vs {g.get('tokens')}",
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--english", required=True)
    ap.add_argument("--other", nargs="*", default=[], help="more corpora for the encode rows")
    ap.add_argument("--scale", help="the 2.2 GB corpus (make_scale_corpus.py) for training")
    ap.add_argument("--encode-mb", type=float, default=20)
    ap.add_argument("--vocab", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--jsonl-mb",
        type=float,
        default=50,
        help="the file rows also encode the first MB of --english's documents as JSON Lines (0: not)",
    )
    ap.add_argument(
        "--only", nargs="*", default=["load", "encode", "batch", "file", "train", "worst"]
    )
    a = ap.parse_args()
    libs = ("bytepair", "gigatoken", "tiktoken")
    write_vocab()
    rows = []
    mib = lambda r: f"{r.get('peak_rss', 0) / 2**20:,.0f}"  # noqa: E731

    if "load" in a.only:
        for enc in ("cl100k_base", "o200k_base"):
            r = side_by_side("load", {lib: (lib, enc, "", "") for lib in libs}, a.repeat)
            rows.append(
                (
                    f"load `{enc}` (fresh process, ms)",
                    *(f"{r[x].get('seconds', 0) * 1e3:.0f}" for x in libs),
                    ratio(r["bytepair"].get("seconds"), r["gigatoken"].get("seconds")),
                    "",
                )
            )
    for task in ("encode", "batch"):
        if task not in a.only:
            continue
        for path in [a.english, *a.other]:
            for enc in ("gpt2", "cl100k_base", "o200k_base"):
                r = side_by_side(
                    task, {lib: (lib, enc, path, a.encode_mb) for lib in libs}, a.repeat
                )
                same = all(r[x].get("ids") == r["tiktoken"].get("ids") for x in libs)
                for phase in ("cold", "warm"):
                    mbs = {
                        x: r[x]["bytes"] / 1e6 / r[x][phase] if phase in r[x] else 0 for x in libs
                    }
                    what = "1 thread" if task == "encode" else f"batch, {os.cpu_count()} threads"
                    rows.append(
                        (
                            f"{what}, {phase}, `{enc}`, {Path(path).name} (MB/s)",
                            *(f"{mbs[x]:.0f}" for x in libs),
                            ratio(mbs["bytepair"], mbs["gigatoken"], True),
                            "ids = tiktoken" if same else "**ids differ**",
                        )
                    )
    if "file" in a.only:
        enc = "cl100k_base"
        size = Path(a.english).stat().st_size / 1e6
        r = side_by_side(
            "file",
            {
                "gigatoken": ("gigatoken", enc, a.english, ""),
                "": ("bytepair", enc, a.english, ""),
                "shards": ("bytepair", enc, a.english, "shards"),
            },
            a.repeat,
        )
        g = r["gigatoken"]
        if a.jsonl_mb:
            with tempfile.TemporaryDirectory() as tmp:
                jsonl = json_lines(a.english, a.jsonl_mb, Path(tmp) / "c.jsonl")
                size_j = jsonl.stat().st_size / 1e6
                j = side_by_side(
                    "file",
                    {
                        "gigatoken": ("gigatoken", enc, jsonl, "jsonl"),
                        "bytepair": ("bytepair", enc, jsonl, "jsonl"),
                    },
                    a.repeat,
                )
                r["jsonl"], g_j = j["bytepair"], j["gigatoken"]
        for arg, what in (("", "encode_file → .bin"), ("shards", "write_shards → folder")):
            rows.append(
                file_row(
                    f"file → ids, {size:.0f} MB, {os.cpu_count()} threads: bytepair {what}, gigatoken encode_files in memory (MB/s; peak MiB)",
                    size,
                    r[arg],
                    g,
                )
            )
        if a.jsonl_mb:
            rows.append(
                file_row(
                    f"JSON Lines → ids, {size_j:.0f} MB ({a.jsonl_mb:g} MB of documents), {os.cpu_count()} threads: bytepair write_shards → folder, gigatoken encode_files(JsonlFileSource) in memory (MB/s; peak MiB)",
                    size_j,
                    r["jsonl"],
                    g_j,
                )
            )
    if "train" in a.only:
        for path in [a.english, *([a.scale] if a.scale else [])]:
            size = Path(path).stat().st_size / 1e6
            r = side_by_side(
                "train",
                {lib: (lib, "", path, a.vocab) for lib in ("bytepair", "gigatoken")},
                a.repeat if size < 1000 else 1,
            )
            rows.append(
                (
                    f"train {size:,.0f} MB, vocab {a.vocab:,} (s; peak MiB)",
                    *(
                        f"{r[x].get('seconds', 0):.2f}; {mib(r[x])}"
                        for x in ("bytepair", "gigatoken")
                    ),
                    "",
                    ratio(r["bytepair"].get("seconds"), r["gigatoken"].get("seconds"))
                    + f"; RSS {r['gigatoken']['peak_rss'] / r['bytepair']['peak_rss']:.1f}× less",
                    "merges: exact (CS336); gigatoken's tie-breaking differs",
                )
            )
    if "worst" in a.only:
        for arg in ("a", "space"):
            r = side_by_side(
                "worst", {lib: (lib, "cl100k_base", "", arg) for lib in libs}, a.repeat
            )
            rows.append(
                (
                    f"worst case `{'a' if arg == 'a' else ' '}` × 10⁶, cl100k (ms)",
                    *(f"{r[x].get('seconds', 0) * 1e3:.0f}" for x in libs),
                    ratio(r["bytepair"].get("seconds"), r["gigatoken"].get("seconds")),
                    "ids = tiktoken"
                    if r["bytepair"].get("ids") == r["tiktoken"].get("ids")
                    else "**ids differ**",
                )
            )
    print("| row | bytepair | gigatoken | tiktoken | bytepair vs gigatoken | check |")
    print("|---|---:|---:|---:|---:|---|")
    for row in rows:
        print("| " + " | ".join(map(str, row)) + " |")


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(VOCAB, ignore_errors=True)
