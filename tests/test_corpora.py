"""Checks over the real corpora in ../shared (set BYTEPAIR_SHARED=path/to/shared).

A user's clone has no ../shared, so these skip, saying why, when it is not set.
"""

from __future__ import annotations

import lzma
import os
from pathlib import Path

import pytest

import bytepair

from conftest import EOT, gpt2_tiktoken

SHARED = os.environ.get("BYTEPAIR_SHARED")
pytestmark = pytest.mark.skipif(
    not SHARED, reason="BYTEPAIR_SHARED is not set: no path to the shared corpora"
)


def corpora() -> list[Path]:
    root = Path(SHARED or ".") / "corpora"
    return sorted(root.glob("multilingual/*.txt.xz")) + sorted(root.glob("code/*.txt.xz"))


def read_xz(path: Path, limit: int | None = None) -> str:
    with lzma.open(path, "rt", encoding="utf-8", newline="") as f:
        return f.read() if limit is None else f.read(limit)


@pytest.mark.parametrize("path", corpora(), ids=lambda p: p.name)
def test_gpt2_encodes_every_corpus_like_tiktoken(gpt2, path):
    enc = gpt2_tiktoken()
    text = read_xz(path, 4_000_000)
    ours = gpt2.encode(text, allowed_special="all")
    assert ours == enc.encode(text, allowed_special="all")
    assert gpt2.decode(ours) == text


def test_training_on_20mb_of_books_does_not_depend_on_workers(tmp_path):
    path = tmp_path / "books.txt"
    path.write_text(
        read_xz(Path(SHARED) / "corpora" / "english_gutenberg.txt.xz", 20_000_000),
        encoding="utf-8",
        newline="",
    )
    one = bytepair.train(path, 2000, special_tokens=[EOT], num_threads=1, progress=False)
    two = bytepair.train(path, 2000, special_tokens=[EOT], num_threads=2, progress=False)
    assert one.merges == two.merges and len(one.merges) == 2000 - 257
    text = path.read_text(encoding="utf-8")[:2_000_000]
    streamed = list(one.encode_iterable(text.splitlines(keepends=True), allowed_special="all"))
    assert streamed == one.encode(text, allowed_special="all")
