"""The open models' pre-tokenization patterns (Llama 3's, Qwen2's, Qwen3.5's, Tekken's)
on bytepair's hand-written splitters, beside the same patterns on its regex engine and
beside gigatoken where it has the pattern: warm, one thread, in one process, pass for
pass in turn.

    python benchmarks/bench_model_patterns.py /tmp/corpora/english_gutenberg.txt \\
        /tmp/corpora/multilingual_all.txt [--mb 10] [--passes 8]

Rows:
- llama3: Llama 3's ``tokenizer.model`` (from the llama-models package) with
  ``pattern="llama3"``. gigatoken has no Llama 3 scheme; its cl100k one (the same
  pieces but where a run of whitespace ends a text) would be timed beside it, and the
  documents whose ids differ counted, but gigatoken 0.10 panics loading the file (an
  assertion in its ``src/bpe/tiktoken.rs``): the row has no peer then.
- qwen2, qwen3.5: cl100k_base's ranks with Qwen2's and Qwen3.5's patterns (no Qwen
  vocabulary is bundled; the pattern is the work measured), and gigatoken's "qwen2"
  and "qwen35" schemes on the same file.
- tekken: o200k_base's ranks with Tekken's pattern (gigatoken has none).

"regex engine" is bytepair with the same pattern wrapped in ``(?:...)``: the same
pieces, but not a string the splitters recognise, so the regex engine (fancy-regex)
runs it, as it did every one of these patterns before the splitters took them. Its
ids are checked equal to the splitter's. Documents as in ``bench_interleaved.py`` (the
first --mb MB, cut at <|endoftext|> or in 50 slices). Each cell: MB/s of the fastest
pass from the third on; the ratios are paired medians of the same passes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_interleaved import documents  # noqa: E402


def loaders(tmp: Path) -> dict:
    """name -> (bytepair on the splitter, bytepair on the regex engine, gigatoken or None)."""
    import gigatoken

    import bytepair
    from bytepair.formats import bundled
    from bytepair.patterns import resolve_pattern

    def rank_file(encoding: str) -> str:
        name = bundled.ENCODINGS[encoding][0]
        path = tmp / f"{name}.tiktoken"
        path.write_bytes(bundled.rank_file_text(name))
        return str(path)

    def pair(path: str, pattern: str, specials=None):
        fast = bytepair.load(path, pattern=pattern, special_tokens=specials)
        slow = bytepair.load(
            path, pattern=f"(?:{resolve_pattern(pattern)})", special_tokens=specials
        )
        return fast, slow

    out = {}
    try:
        from importlib import resources

        from llama_models.llama3.tokenizer import Tokenizer as Llama3

        llama = Path(str(resources.files("llama_models") / "llama3" / "tokenizer.model"))
        specials = Llama3(llama).special_tokens
        llama = str(llama)
        try:
            theirs = gigatoken.Tokenizer.from_tiktoken(llama, pretokenizer="cl100k")
        except BaseException as e:  # gigatoken 0.10 panics on this file (PanicException)
            if isinstance(e, KeyboardInterrupt):
                raise
            print(f"gigatoken does not load Llama 3's file: {e!r}", file=sys.stderr)
            theirs = None
        out["llama3"] = (*pair(llama, "llama3", specials), theirs)
    except ImportError:
        print("llama-models is not installed: no llama3 row", file=sys.stderr)
    cl100k = rank_file("cl100k_base")
    out["qwen2"] = (
        *pair(cl100k, "qwen2"),
        gigatoken.Tokenizer.from_tiktoken(cl100k, pretokenizer="qwen2"),
    )
    out["qwen3.5"] = (
        *pair(cl100k, "qwen3.5"),
        gigatoken.Tokenizer.from_tiktoken(cl100k, pretokenizer="qwen35"),
    )
    out["tekken"] = (*pair(rank_file("o200k_base"), "tekken"), None)
    return out


def row(name: str, toks, docs: list[str], passes: int) -> str:
    fast, slow, theirs = toks
    mb = sum(len(d.encode()) for d in docs) / 1e6
    # Arrays from both libraries, as bench_interleaved.py times them (a list of Python
    # ints would time its own making); compared as lists after the passes.
    runs = {
        "splitter": lambda: [fast.encode_to_numpy(d) for d in docs],
        "regex": lambda: [slow.encode_to_numpy(d) for d in docs],
    }
    if theirs is not None:
        runs["gigatoken"] = lambda: [theirs.encode(d) for d in docs]
    times: dict[str, list[float]] = {k: [] for k in runs}
    ids = {}
    for _ in range(passes):
        for k, run in runs.items():
            t = time.perf_counter()
            ids[k] = run()
            times[k].append(time.perf_counter() - t)
    ids = {k: [list(map(int, a)) for a in v] for k, v in ids.items()}
    assert ids["splitter"] == ids["regex"], f"{name}: the splitter and the regex differ"
    best = {k: mb / min(v[2:]) for k, v in times.items()}

    def paired(a: str, b: str) -> float:
        return statistics.median(x / y for x, y in zip(times[b][2:], times[a][2:]))

    cells = [
        f"{best['splitter']:.0f}",
        f"{best['regex']:.0f}",
        f"{paired('splitter', 'regex'):.2f}x",
    ]
    if theirs is not None:
        differ = sum(a != b for a, b in zip(ids["splitter"], ids["gigatoken"]))
        cells += [
            f"{best['gigatoken']:.0f}",
            f"{paired('splitter', 'gigatoken'):.2f}x",
            f"{differ} of {len(docs)}",
        ]
    else:
        cells += ["", "", ""]
    return f"| {name} | " + " | ".join(cells) + " |"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="+")
    p.add_argument("--mb", type=float, default=10)
    p.add_argument("--passes", type=int, default=8)
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-vocab-") as tmp:
        toks = loaders(Path(tmp))
    for path in a.paths:
        docs = documents(path, a.mb)
        print(f"\n{Path(path).name}, warm, one thread (MB/s; ratios: paired medians)\n")
        print(
            "| pattern | bytepair, splitter | bytepair, regex engine | splitter over regex "
            "| gigatoken | bytepair over gigatoken | documents whose ids differ |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, t in toks.items():
            print(row(name, t, docs, a.passes), flush=True)


if __name__ == "__main__":
    main()
