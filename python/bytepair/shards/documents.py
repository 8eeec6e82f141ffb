"""Documents from text files split on ``<|endoftext|>`` — the stand-in the CLI uses until
``bytepair.sources`` (readers for text, compressed files, JSONL, Parquet, ...) lands;
then :func:`documents_of` is the one function to replace.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

SEPARATOR = "<|endoftext|>"


def split_documents(blocks: Iterable[str], separator: str = SEPARATOR) -> Iterator[str]:
    """Text arriving in blocks, split on ``separator`` (which may straddle blocks);
    documents that are empty or only whitespace are dropped.

    >>> list(split_documents(["a<|endo", "ftext|>b\\n<|endoftext|>", "\\n"]))
    ['a', 'b\\n']
    """
    keep = len(separator) - 1
    pending: list[str] = []  # the document so far, in pieces (no quadratic joins)
    edge = ""  # its last few characters, where a separator may begin
    for block in blocks:
        if separator not in edge + block:
            pending.append(block)
            edge = (edge + block)[-keep:]
            continue
        parts = ("".join(pending) + block).split(separator)
        last = parts.pop()
        pending, edge = [last], last[-keep:]
        yield from (p for p in parts if p.strip())
    last = "".join(pending)
    if last.strip():
        yield last


def documents_of(inputs: Iterable[str | os.PathLike], errors: str = "strict") -> Iterator[str]:
    """The documents of text files, one file after another, each split on ``<|endoftext|>``."""
    from bytepair._inputs import text_chunks

    for path in inputs:
        with open(path, "rb") as f:
            yield from split_documents(text_chunks(f, str(path), errors=errors))
