"""Training a SentencePiece BPE model: bytepair vs `sentencepiece` (spm_train), side
by side, each in a fresh process, on the same corpus and options.

    python benchmarks/bench_spm_train.py CORPUS.txt [--vocab-size 8000] [--num-threads N]
        [--repeat R]

Both train with identity normalization, byte fallback and no sampling
(input_sentence_size=0), so the results must be identical: the script checks that
the pieces, scores and types agree (or prints the first difference). Reported: wall
time and peak RSS of each child process (its own getrusage), and the ratios. With
`--repeat R` the two tools take turns R times and the best wall time of each is
compared (every run is printed): on a shared, noisy machine the best of a few runs is
the one least disturbed by other work.

Both children start Python and import their package inside the wall time, so both
import as installed packages do: from bytecode. `pip install` compiles sentencepiece's
(and a wheel of bytepair's) at install time; an editable checkout under
PYTHONDONTWRITEBYTECODE=1 would compile bytepair's ~60 modules from source in every
run (about 40-80 ms here). So the children run with bytecode writing allowed, after
one untimed import of each package has written it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import io, json, resource, sys, time
args = json.loads(sys.argv[1])
start = time.perf_counter()
if args["tool"] == "sentencepiece":
    import sentencepiece as spm
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        input=args["corpus"], model_writer=out, model_type="bpe", vocab_size=args["vocab"],
        normalization_rule_name="identity", byte_fallback=True, input_sentence_size=0,
        num_threads=args["threads"], minloglevel=2,
    )
    seconds = time.perf_counter() - start
    open(args["output"], "wb").write(out.getvalue())
else:
    import bytepair
    bytepair.train_sentencepiece(
        args["corpus"], args["vocab"], output=args["output"], normalization="identity",
        byte_fallback=True, num_threads=args["threads"], progress=False,
    )
    seconds = time.perf_counter() - start
rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "rss_mb": rss_mb}))
"""


def child_env() -> dict:
    """The environment of the children: bytecode allowed (see the module's docstring)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def compile_imports() -> None:
    """Imports both packages once, untimed, so that their bytecode is written."""
    code = "import bytepair.training_spm, sentencepiece"
    subprocess.run([sys.executable, "-c", code], env=child_env(), check=True)


def run(tool: str, corpus: str, vocab: int, threads: int, output: str) -> dict:
    """Trains in a child process; its wall time and peak RSS (MB)."""
    args = {"tool": tool, "corpus": corpus, "vocab": vocab, "threads": threads, "output": output}
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(args)],
        capture_output=True,
        text=True,
        check=True,
        env=child_env(),
    )
    wall = time.perf_counter() - start
    child = json.loads(proc.stdout)
    return {"wall": wall, "train": child["seconds"], "rss_mb": child["rss_mb"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("corpus")
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--num-threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--repeat", type=int, default=1, help="runs of each tool, taking turns")
    a = p.parse_args()
    from bytepair._core import SentencePieceModel

    compile_imports()
    with tempfile.TemporaryDirectory() as tmp:
        runs, models = {"bytepair": [], "sentencepiece": []}, {}
        for _ in range(max(1, a.repeat)):
            for tool in runs:
                out = os.path.join(tmp, f"{tool}.model")
                runs[tool].append(run(tool, a.corpus, a.vocab_size, a.num_threads, out))
                with open(out, "rb") as f:
                    models[tool] = SentencePieceModel.from_bytes(f.read()).pieces()
    results = {tool: min(rs, key=lambda r: r["wall"]) for tool, rs in runs.items()}
    size_mb = os.path.getsize(a.corpus) / 1e6
    best = " (best of each)" if a.repeat > 1 else ""
    print(f"{a.corpus}: {size_mb:.0f} MB, vocab {a.vocab_size}, {a.num_threads} threads{best}")
    for tool, r in results.items():
        walls = ", ".join(f"{x['wall']:.2f}" for x in runs[tool])
        print(
            f"  {tool:14s} {r['wall']:8.2f} s wall ({r['train']:.2f} s training)"
            f"  peak RSS {r['rss_mb']:8.0f} MB   runs: {walls}"
        )
    ours, theirs = results["bytepair"], results["sentencepiece"]
    print(
        f"  bytepair is {theirs['wall'] / ours['wall']:.1f}x faster "
        f"at {ours['rss_mb'] / theirs['rss_mb']:.2f}x the peak RSS"
    )
    a_, b_ = models["bytepair"], models["sentencepiece"]
    first = next((i for i, (x, y) in enumerate(zip(a_, b_)) if x != y), None)
    common = len({x[0] for x in a_} & {x[0] for x in b_}) / len(b_)
    if first is None and len(a_) == len(b_):
        print("  pieces, scores and types: identical")
    else:
        print(
            f"  first difference at id {first}: {a_[first]} vs {b_[first]}; {common:.2%} in common"
        )


if __name__ == "__main__":
    main()
