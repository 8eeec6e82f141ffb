"""Per-call cost of encoding one short sentence: bytepair's ``encode_ordinary`` and its
safe default ``encode`` (special tokens refused) side by side with gigatoken's and
tiktoken's ``encode``, for tokenizers with few and many special tokens. Each row is
the best of several timed loops in this one process (microseconds per call); the two
calls of a row, and bytepair's ``encode_ordinary`` and gigatoken's ``encode``, are timed
in turn, round by round.

    python benchmarks/bench_percall.py                        # cl100k, cl100k + 256 / 2,048
    python benchmarks/bench_percall.py --spm ../shared/vocab/hf/mistral-7b-instruct-v0.3/tokenizer.model

The target (issue 25): ``encode`` <= 1.3x ``encode_ordinary`` whatever the number of
special tokens, and ``encode_ordinary`` no slower than gigatoken's ``encode``.
"""

from __future__ import annotations

import argparse
import lzma
import tempfile
import time
from importlib import resources
from pathlib import Path

import bytepair

SENTENCE = "The quick brown fox jumps over the lazy dog."  # 44 bytes


def best_us(fn, text: str, calls: int = 200_000, rounds: int = 5) -> float:
    return in_turn_us([fn], text, calls, rounds)[0]


def in_turn_us(fns, text: str, calls: int = 200_000, rounds: int = 10) -> list[float]:
    """The best microseconds a call of each of `fns`, timed in turn round by round
    (``calls`` each in all): a noisy machine's slow stretch falls on all of them alike,
    not on whichever ran then."""
    for fn in fns:
        fn(text)
    best = [float("inf")] * len(fns)
    per_round = calls // rounds
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            for _ in range(per_round):
                fn(text)
            best[i] = min(best[i], (time.perf_counter() - start) / per_round)
    return [b * 1e6 for b in best]


def peers(text: str, cl) -> list[tuple[str, float]]:
    """gigatoken's and tiktoken's encode of cl100k_base, if installed (gigatoken's
    timed in turn with `cl`'s encode_ordinary, whose time is returned too)."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-percall-") as tmp:
        folder = Path(tmp)
        packed = resources.files("bytepair").joinpath("data", "cl100k_base.tiktoken.xz")
        path = folder / "cl100k_base.tiktoken"
        path.write_bytes(lzma.decompress(packed.read_bytes()))
        try:
            import gigatoken

            g = gigatoken.Tokenizer.from_tiktoken(str(path))
            ours, theirs = in_turn_us([cl.encode_ordinary, g.encode], text)
            rows.append(("gigatoken encode (cl100k_base)", theirs))
            rows.append(("bytepair encode_ordinary (cl100k_base), in turn with it", ours))
        except ImportError:
            pass
        try:
            import tiktoken
            import tiktoken.load

            from bytepair.formats import bundled

            _, pattern, specials = bundled.ENCODINGS["cl100k_base"]
            enc = tiktoken.Encoding(
                "cl100k_base",
                pat_str=pattern,
                mergeable_ranks=tiktoken.load.load_tiktoken_bpe(str(path)),
                special_tokens=specials,
            )
            rows.append(("tiktoken encode (cl100k_base)", best_us(enc.encode, text)))
            rows.append(
                ("tiktoken encode_ordinary (cl100k_base)", best_us(enc.encode_ordinary, text))
            )
        except ImportError:
            pass
    return rows


def llama_models_tokenizers() -> dict:
    """Llama 3 and 4 (their rank files and special tokens, from the llama-models
    package), when it is installed."""
    import importlib
    from importlib import resources as res

    found = {}
    for version in ("llama3", "llama4"):
        try:
            module = importlib.import_module(f"llama_models.{version}.tokenizer")
        except ImportError:
            continue
        path = Path(str(res.files("llama_models") / version / "tokenizer.model"))
        specials = module.Tokenizer(path).special_tokens
        found[f"{version} tokenizer.model"] = bytepair.load(
            path, pattern=version, special_tokens=specials
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spm", help="a SentencePiece .model to add (e.g. Mistral v0.3)")
    args = parser.parse_args()
    cl = bytepair.get_encoding("cl100k_base")
    tokenizers = {
        "cl100k_base (5 specials)": cl,
        "cl100k_base + 256 reserved": cl.with_special_tokens(
            [f"<|reserved_special_token_{i}|>" for i in range(256)]
        ),
        "cl100k_base + 2,048 reserved": cl.with_special_tokens(
            [f"<|reserved_special_token_{i}|>" for i in range(2048)]
        ),
    }
    if args.spm:
        tokenizers[f"{Path(args.spm).name} (SentencePiece)"] = bytepair.load(args.spm)
    tokenizers.update(llama_models_tokenizers())
    print("| tokenizer | specials | encode_ordinary µs | encode (default) µs | ratio |")
    print("|---|---:|---:|---:|---:|")
    for name, tok in tokenizers.items():
        ordinary, default = in_turn_us([tok.encode_ordinary, tok.encode], SENTENCE)
        n = len(tok.special_tokens)
        print(f"| {name} | {n:,} | {ordinary:.3f} | {default:.3f} | {default / ordinary:.2f} |")
    for name, us in peers(SENTENCE, cl):
        print(f"| {name} | | | {us:.3f} | |")


if __name__ == "__main__":
    main()
