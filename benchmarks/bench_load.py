"""Loading and saving a tokenizer file: bytepair's load, save to ``.bytepair`` and to
``tokenizer.json``, and (for a ``tokenizer.json``) Hugging Face tokenizers' own load, each
the best of ``--repeat`` in one process.

    python benchmarks/bench_load.py tokenizer.json [--repeat 3]

Llama 3's file, as transformers converts llama-models' ``tokenizer.model``::

    python - <<'PY'
    from importlib import resources
    from transformers.convert_slow_tokenizer import TikTokenConverter
    from bytepair.patterns import PATTERNS
    model = resources.files("llama_models") / "llama3" / "tokenizer.model"
    TikTokenConverter(vocab_file=str(model), pattern=PATTERNS["llama3"]).converted().save("/tmp/l3.json")
    PY
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def best(run, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("path")
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    import bytepair

    tok = bytepair.load(a.path)
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        out = Path(tmp)
        rows = {
            f"bytepair load {Path(a.path).name}": lambda: bytepair.load(a.path),
            "bytepair save .bytepair": lambda: tok.save(out / "t.bytepair"),
            "bytepair load .bytepair": lambda: bytepair.load(out / "t.bytepair"),
            "bytepair save tokenizer.json": lambda: tok.save(out / "t.json"),
        }
        if a.path.endswith(".json"):
            import tokenizers

            rows["tokenizers Tokenizer.from_file"] = lambda: tokenizers.Tokenizer.from_file(a.path)
        tok.save(out / "t.bytepair")
        for name, run in rows.items():
            print(f"{name}: {best(run, a.repeat):.2f} s (best of {a.repeat})")


if __name__ == "__main__":
    main()
