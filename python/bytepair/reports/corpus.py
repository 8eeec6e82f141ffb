"""Counting tokens on text files, for the reports.

One pass of the core's parallel file encoder writes the ids to a temporary file; numpy
then counts them in blocks (``bincount``). Memory stays bounded whatever the corpus
size, and no Python object is made per token. Special tokens in the text count as
special tokens (``<|endoftext|>`` between documents is what corpora hold).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Ids and bytes are read back this many at a time.
BLOCK = 1 << 24

# ASCII whitespace: what separates words for the tokens/word figure.
_SPACE = np.zeros(256, dtype=bool)
_SPACE[list(b" \t\n\r\x0b\x0c")] = True


@dataclass
class CorpusCounts:
    """How often each token id occurs in one file (``counts[id]``), with its size."""

    path: str
    bytes: int
    words: int
    counts: np.ndarray

    @property
    def tokens(self) -> int:
        return int(self.counts.sum())


def count_tokens(tok, path: str | os.PathLike, num_threads: int | None = None) -> CorpusCounts:
    """Encodes a UTF-8 text file and counts each id; errors name the file (and offset)."""
    from bytepair.shards import id_width

    width = id_width(tok)
    counts = np.zeros(tok.n_vocab, dtype=np.int64)
    with tempfile.TemporaryDirectory(prefix="bytepair-report-") as tmp:
        ids_path = Path(tmp) / "ids.bin"
        n = tok.encode_file(
            path, ids_path, allowed_special="all", num_threads=num_threads, progress=False
        )
        if n:
            ids = np.memmap(ids_path, dtype="<u2" if width == 2 else "<u4", mode="r")
            for start in range(0, n, BLOCK):
                counts += np.bincount(ids[start : start + BLOCK], minlength=tok.n_vocab)
            del ids
    return CorpusCounts(str(path), Path(path).stat().st_size, count_words(path), counts)


def count_words(path: str | os.PathLike) -> int:
    """Runs of non-whitespace bytes (ASCII whitespace separates words).

    >>> import io, tempfile
    >>> with tempfile.NamedTemporaryFile("wb", delete=False) as f:
    ...     _ = f.write(b"two words\\n and three")
    >>> count_words(f.name)
    4
    """
    words = 0
    after_space = True  # the file's start counts as a word boundary
    with open(path, "rb") as f:
        while block := f.read(BLOCK):
            word = ~_SPACE[np.frombuffer(block, dtype=np.uint8)]
            words += int(word[0] and after_space) + int(np.count_nonzero(word[1:] & ~word[:-1]))
            after_space = not word[-1]
    return words
