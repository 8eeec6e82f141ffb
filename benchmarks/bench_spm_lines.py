"""SentencePiece one call per line: bytepair's ``encode`` (the safe default) and
``encode_ordinary`` side by side with ``SentencePieceProcessor.encode``, each line its
own call — how a data loader or a chat server uses a tokenizer. Best of 3 passes in one
process; ids checked equal on the first 3,000 lines.

    python benchmarks/bench_spm_lines.py --model ../shared/vocab/hf/mistral-7b-instruct-v0.3/tokenizer.model \\
        /tmp/corpora/english_gutenberg.txt /tmp/corpora/multilingual_all.txt --lines 80000
"""

from __future__ import annotations

import argparse
import time

import bytepair


def best_seconds(fn, lines: list[str], rounds: int = 3) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for line in lines:
            fn(line)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a SentencePiece .model")
    parser.add_argument("corpora", nargs="+", help="text files; their non-empty lines")
    parser.add_argument("--lines", type=int, default=80_000, help="lines per corpus")
    args = parser.parse_args()
    import sentencepiece

    ours = bytepair.load(args.model)
    theirs = sentencepiece.SentencePieceProcessor(model_file=args.model)
    print(
        "| corpus | lines | sentencepiece s | bytepair encode s | ratio | encode_ordinary s | ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for path in args.corpora:
        with open(path, encoding="utf-8") as f:
            lines = [line for line in f.read(64 << 20).split("\n") if line][: args.lines]
        for line in lines[:3000]:
            assert ours.encode(line, disallowed_special=()) == theirs.encode(line), line
        spm = best_seconds(theirs.encode, lines)
        default = best_seconds(ours.encode, lines)
        ordinary = best_seconds(ours.encode_ordinary, lines)
        print(
            f"| {path.rsplit('/', 1)[-1]} | {len(lines):,} | {spm:.3f} | {default:.3f} | "
            f"{spm / default:.2f}x | {ordinary:.3f} | {spm / ordinary:.2f}x |"
        )


if __name__ == "__main__":
    main()
