"""Single-thread encoding speed of a SentencePiece BPE model: bytepair vs the
`sentencepiece` library vs Hugging Face `tokenizers` (same model, its tokenizer.json).

    python benchmarks/bench_spm.py --model path/to/tokenizer.model \\
        [--hf path/to/tokenizer.json] [--max-mb 20] [--rounds 3] CORPUS.txt[.xz] ...

Each corpus (its first --max-mb MB) is cut into lines and every tool encodes the
same list of lines on one thread; the best of --rounds rounds (in CPU time, tools
taking turns) is reported in MB/s of UTF-8 input. Before timing, bytepair's ids are checked against sentencepiece's.
"""

from __future__ import annotations

import os

# One thread for everyone: set before the libraries start their pools.
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import gc  # noqa: E402
import lzma  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402


def read_lines(path: Path, max_bytes: int) -> list[str]:
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        text = f.read(max_bytes)
    if len(text) == max_bytes:
        text = text.rsplit("\n", 1)[0]
    return text.split("\n")


def best_times(tools: dict, lines: list[str], rounds: int) -> dict[str, float]:
    """The best CPU time of each tool over `rounds` rounds, each tool once per round.

    CPU time of this process (not wall time): every tool runs on one thread here, and
    on a shared machine wall time measures the neighbours as much as the tool."""
    best = dict.fromkeys(tools, float("inf"))
    for _ in range(rounds):
        for name, fresh in tools.items():
            encode = fresh()  # untimed: a cold start every round (no cache from the last)
            gc.collect()
            gc.disable()  # as timeit does: the lists of ids are not garbage
            start = time.process_time()
            encode(lines)
            best[name] = min(best[name], time.process_time() - start)
            gc.enable()
    return best


def encoders(model: Path, hf_json: Path | None):
    """{name: function() -> (function(lines) -> list of id lists)}: each call loads
    the tool afresh, so no round profits from a cache the previous one warmed."""
    import sentencepiece as spm

    from bytepair._core import SentencePieceModel

    data = model.read_bytes()

    def bytepair():
        ours = SentencePieceModel.from_bytes(data, str(model))
        return lambda lines: ours.encode_batch(lines, num_threads=1)

    def sentencepiece():
        theirs = spm.SentencePieceProcessor(model_proto=data)
        return lambda lines: theirs.encode(lines, num_threads=1)

    tools = {"bytepair": bytepair, "sentencepiece": sentencepiece}
    if hf_json is not None:
        from tokenizers import Tokenizer

        def hf_tokenizers():
            hf = Tokenizer.from_file(str(hf_json))
            return lambda lines: [e.ids for e in hf.encode_batch(lines, add_special_tokens=False)]

        tools["hf-tokenizers"] = hf_tokenizers
    return tools


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="+", type=Path)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--hf", type=Path, help="the same model's tokenizer.json")
    parser.add_argument("--max-mb", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    tools = encoders(args.model, args.hf)
    names = list(tools)
    print(f"{'corpus':32} {'MB':>6} " + " ".join(f"{n:>14}" for n in names) + "  (MB/s)")
    for path in args.corpora:
        lines = read_lines(path, int(args.max_mb * 1e6))
        mb = sum(len(line.encode()) + 1 for line in lines) / 1e6
        if tools["bytepair"]()(lines) != tools["sentencepiece"]()(lines):
            raise SystemExit(f"{path}: bytepair's ids differ from sentencepiece's")
        best = best_times(tools, lines, args.rounds)
        speeds = [mb / best[n] for n in names]
        print(f"{path.name:32} {mb:6.1f} " + " ".join(f"{s:14.2f}" for s in speeds), flush=True)


if __name__ == "__main__":
    main()
