"""A whole file with a SentencePiece `.model`: bytepair's `encode_file` (ids to a
.bin), `count` and shard folder against `sentencepiece` and gigatoken (its
`encode_files` of the file as one document, in memory, on all cores; the same ids:
checked), each in a fresh process, side by side. sentencepiece encodes the file's text as one text (the same ids:
checked; its merge over one huge string is slow and holds gigabytes) and, as
`spm_encode` does, line by line on --threads threads (`encode(lines, num_threads=)`:
not the same ids, each line gets the dummy prefix and loses its newline; a speed
reference only). `--no-whole` skips the one-text run (200 MB of English took
sentencepiece minutes and ~9 GB): bytepair's three roads are then checked against
each other only.

    python benchmarks/bench_spm_file.py --model path/to/tokenizer.model CORPUS.txt \\
        [--threads 2] [--repeat 3] [--no-whole]

Reported: wall time (reading the file included, importing not) and peak RSS of each
child, best of --repeat runs taken in turn, and bytepair's speed over sentencepiece's.
A model that cuts words (`tok.model.core.cuts_words`: Llama 2's, Mistral's) is read a
block at a time and encoded on --threads threads; another is encoded whole.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

CHILD = r"""
import json, resource, sys, time
a = json.loads(sys.argv[1])
if a["task"] == "sentencepiece":
    import numpy as np
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=a["model"])
    start = time.perf_counter()
    with open(a["corpus"], encoding="utf-8", newline="") as f:
        ids = sp.encode(f.read())
    seconds = time.perf_counter() - start
    np.asarray(ids, dtype=np.uint32).tofile(a["out"])
    n = len(ids)
elif a["task"] == "gigatoken":
    import awkward as ak
    import gigatoken
    import numpy as np
    giga = gigatoken.Tokenizer.from_sentencepiece(a["model"])
    start = time.perf_counter()
    arr = giga.encode_files(gigatoken.TextFileSource([a["corpus"]]))
    n = int(ak.sum(ak.num(arr)))
    seconds = time.perf_counter() - start
    np.asarray(ak.flatten(arr), dtype=np.uint32).tofile(a["out"])
elif a["task"] == "sentencepiece lines":
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=a["model"])
    start = time.perf_counter()
    with open(a["corpus"], encoding="utf-8", newline="") as f:
        ids = sp.encode(f.read().split("\n"), num_threads=a["threads"])
    seconds = time.perf_counter() - start
    n = sum(map(len, ids))
else:
    import bytepair
    tok = bytepair.load(a["model"])
    start = time.perf_counter()
    if a["task"] == "encode_file":
        n = tok.encode_file(a["corpus"], a["out"], num_threads=a["threads"])
    elif a["task"] == "count":
        from bytepair.shards.one_file import text_tokens
        from bytepair.sources import open_sources
        src = open_sources([a["corpus"]]).sources[0]
        n = text_tokens(tok, src, None, 4, a["threads"], {}, None)
    else:
        from bytepair.sources import open_sources
        summary = bytepair.write_shards(
            tok, open_sources([a["corpus"]]), a["out"], eot=None, num_threads=a["threads"],
            progress=False,
        )
        n = summary["splits"]["train"]["tokens"]
    seconds = time.perf_counter() - start
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "rss_mb": rss, "tokens": n, "cuts": a["task"] in ("encode_file", "count", "shards") and tok.model.core.cuts_words}))
"""

TASKS = ["sentencepiece", "sentencepiece lines", "gigatoken", "encode_file", "count", "shards"]


def run(task: str, model: str, corpus: str, threads: int, folder: str) -> dict:
    out = os.path.join(folder, task.replace(" ", "_") + (".bin" if task != "shards" else ""))
    args = {"task": task, "model": model, "corpus": corpus, "threads": threads, "out": out}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(args)], capture_output=True, text=True
    )
    if done.returncode:
        sys.exit(f"{task} failed:\n{done.stderr}")
    return json.loads(done.stdout)


def same_ids(folder: str, width: int, peer: str) -> bool:
    import numpy as np

    theirs = np.fromfile(os.path.join(folder, f"{peer}.bin"), dtype=np.uint32)
    ours = np.fromfile(os.path.join(folder, "encode_file.bin"), dtype=f"<u{width}")
    return bool(np.array_equal(theirs, ours))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("corpus")
    p.add_argument("--model", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--no-whole", action="store_true", help="skip sentencepiece's one-text run")
    a = p.parse_args()
    tasks = [t for t in TASKS if not (a.no_whole and t == "sentencepiece")]
    try:
        import gigatoken  # noqa: F401
    except ImportError:
        print("gigatoken is not installed: its row is left out")
        tasks.remove("gigatoken")
    mb = os.path.getsize(a.corpus) / 1e6
    best: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(a.repeat):
            for task in tasks:
                if task == "shards":
                    shutil.rmtree(os.path.join(folder, "shards"), ignore_errors=True)
                r = run(task, a.model, a.corpus, a.threads, folder)
                if task not in best or r["seconds"] < best[task]["seconds"]:
                    best[task] = r
        ours = os.path.join(folder, "encode_file.bin")
        width = os.path.getsize(ours) // max(best["encode_file"]["tokens"], 1)  # 2 or 4
        peers = [t for t in ("sentencepiece", "gigatoken") if t in tasks]
        identical = {peer: same_ids(folder, width, peer) for peer in peers}
    counts = {t: best[t]["tokens"] for t in tasks if t != "sentencepiece lines"}
    print(
        f"{os.path.basename(a.corpus)}: {mb:.0f} MB, {os.path.basename(a.model)} "
        f"(cuts words: {best['encode_file']['cuts']}), {a.threads} threads, best of {a.repeat}"
    )

    def seconds(task: str) -> float:
        return best[task]["seconds"] if task in best else float("nan")

    peers = {p: seconds(p) for p in ("sentencepiece", "sentencepiece lines", "gigatoken")}
    print(
        "| task | seconds | MB/s | peak RSS MB | vs sentencepiece whole | vs its lines "
        "| vs gigatoken |\n|---|---:|---:|---:|---:|---:|---:|"
    )
    for task in tasks:
        r = best[task]
        ratios = " | ".join(f"{t / r['seconds']:.2f}x" for t in peers.values())
        print(
            f"| {task} | {r['seconds']:.2f} | {mb / r['seconds']:.0f} | {r['rss_mb']:.0f} | "
            f"{ratios} |"
        )
    print(f"tokens {counts}; encode_file's ids equal to: {identical}")
    if not all(identical.values()) or len(set(counts.values())) != 1:
        sys.exit("the ids differ")


if __name__ == "__main__":
    main()
