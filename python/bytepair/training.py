"""Training: corpus -> BPE tokenizer.

Two steps, both in the Rust core:
1. count: read the corpus (files in blocks, cut only where pre-tokenization cannot
   change) and count the distinct pre-tokens, on ``workers`` threads;
2. merge: learn merges from those counts with incremental pair counts and a heap.

The result does not depend on ``workers``. Memory holds the table of distinct
pre-tokens, not the corpus.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bytepair import _core
from bytepair.patterns import resolve_pattern
from bytepair.tokenizer import Tokenizer, _block_kwargs

# Documents from an iterator are sent to the core in batches of about this many chars.
_BATCH_CHARS = 8 << 20


@dataclass
class TrainingStats:
    """What happened during training (``Tokenizer.training_stats`` after training)."""

    bytes_read: int
    distinct_pretokens: int
    merges_requested: int
    merges_done: int
    count_seconds: float
    merge_seconds: float

    @property
    def seconds(self) -> float:
        return self.count_seconds + self.merge_seconds


def _check_args(vocab_size: int, special_tokens: Iterable[str]) -> tuple[int, list[str]]:
    if isinstance(special_tokens, str):
        raise TypeError("special_tokens must be a list of strings, e.g. ['<|endoftext|>']")
    specials = list(dict.fromkeys(special_tokens))
    for t in specials:
        if not isinstance(t, str) or not t:
            raise ValueError(f"special tokens must be non-empty strings, got {t!r}")
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool):
        raise TypeError(f"vocab_size must be an int, not {type(vocab_size).__name__}")
    num_merges = vocab_size - 256 - len(specials)
    if num_merges < 0:
        raise ValueError(
            f"vocab_size {vocab_size} is too small: it must hold the 256 single bytes and the "
            f"{len(specials)} special token(s), so at least {256 + len(specials)}"
        )
    return num_merges, specials


def _progress_bar(enabled: bool, **kwargs):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(**kwargs)


class _closing:
    """Closes a progress bar; on an error, erases it so the error stands alone."""

    def __init__(self, bar):
        self.bar = bar

    def __enter__(self):
        return self.bar

    def __exit__(self, exc_type, exc, tb):
        if self.bar is not None:
            if exc_type is not None:
                self.bar.leave = False
            self.bar.close()


def _learn(
    counter: _core.PreTokenCounter,
    num_merges: int,
    specials: list[str],
    pattern: str | None,
    progress: bool,
    stats: dict,
) -> Tokenizer:
    bar = _progress_bar(progress, total=num_merges, desc="merging", unit=" merges")
    start = time.perf_counter()
    with _closing(bar):
        merges, vocab_bytes = counter.train(num_merges, None if bar is None else _ByteBar(bar))
    stats["merge_seconds"] = time.perf_counter() - start
    if len(merges) < num_merges:
        warnings.warn(
            f"training stopped early after {len(merges)} of {num_merges} merges: every "
            f"pre-token is a single token already. The vocabulary has "
            f"{256 + len(merges) + len(specials)} tokens instead of {256 + num_merges + len(specials)}.",
            stacklevel=3,
        )
    byte_merges = [(vocab_bytes[a], vocab_bytes[b]) for a, b in merges]
    vocab = dict(enumerate(vocab_bytes))
    tok = Tokenizer(vocab, byte_merges, specials, pattern)
    tok.training_stats = TrainingStats(
        bytes_read=stats["bytes_read"],
        distinct_pretokens=len(counter),
        merges_requested=num_merges,
        merges_done=len(merges),
        count_seconds=stats["count_seconds"],
        merge_seconds=stats["merge_seconds"],
    )
    return tok


class _ByteBar:
    """A tqdm bar fed with absolute counts (bytes read, merges done) from the core."""

    def __init__(self, bar, base: int = 0):
        self.bar, self.base = bar, base

    def __call__(self, done: int) -> None:
        self.bar.update(self.base + done - self.bar.n)


def train(
    files: str | os.PathLike | Iterable[str | os.PathLike],
    vocab_size: int,
    *,
    special_tokens: Iterable[str] = (),
    pattern: str | None = "gpt2",
    workers: int | None = None,
    progress: bool = True,
    errors: str = "strict",
) -> Tokenizer:
    """Trains a byte-level BPE tokenizer on one or more UTF-8 text files.

    Each file is one text: special tokens in it are hard boundaries (and are added to
    the vocabulary after the merges); ``pattern`` ("gpt2", "cl100k", "o200k", a regex,
    or None) splits the rest into pre-tokens. ``vocab_size`` counts everything: 256
    bytes + merges + special tokens. Invalid UTF-8 is an error naming the byte offset,
    unless ``errors="replace"``.

    >>> tok = train("corpus.txt", 10_000, special_tokens=["<|endoftext|>"])  # doctest: +SKIP
    """
    paths = [files] if isinstance(files, (str, os.PathLike)) else list(files)
    if not paths:
        raise ValueError("no training files given")
    num_merges, specials = _check_args(vocab_size, special_tokens)
    regex = resolve_pattern(pattern)
    if errors not in ("strict", "replace"):
        raise ValueError(f"errors must be 'strict' or 'replace', not {errors!r}")
    sizes = []
    for p in paths:
        p = Path(p)
        if not p.is_file():
            raise FileNotFoundError(f"{p}: no such file" if not p.exists() else f"{p}: not a file")
        sizes.append(p.stat().st_size)
    counter = _core.PreTokenCounter(regex, specials, workers or os.cpu_count() or 1)
    bar = _progress_bar(
        progress, total=sum(sizes), desc="counting", unit="B", unit_scale=True, unit_divisor=1024
    )
    start = time.perf_counter()
    with _closing(bar):
        done = 0
        for p, size in zip(paths, sizes):
            counter.add_file(
                str(p), errors, None if bar is None else _ByteBar(bar, done), **_block_kwargs()
            )
            done += size
    stats = {"bytes_read": sum(sizes), "count_seconds": time.perf_counter() - start}
    return _learn(counter, num_merges, specials, regex, progress, stats)


def train_from_iterator(
    texts: str | Iterable[str],
    vocab_size: int,
    *,
    special_tokens: Iterable[str] = (),
    pattern: str | None = "gpt2",
    workers: int | None = None,
    progress: bool = True,
) -> Tokenizer:
    """Trains on in-memory text: one string, or any iterable of strings (a list, a
    generator over a dataset, ...). Each string is a separate document: no pair
    crosses from one to the next.

    >>> tok = train_from_iterator(["low lower", "lowest"], 258, pattern=None, progress=False)
    >>> tok.merges
    [(b'o', b'w'), (b'l', b'ow')]
    """
    num_merges, specials = _check_args(vocab_size, special_tokens)
    regex = resolve_pattern(pattern)
    counter = _core.PreTokenCounter(regex, specials, workers or os.cpu_count() or 1)
    if isinstance(texts, str):
        texts = [texts]
    bar = _progress_bar(progress, desc="counting", unit="B", unit_scale=True, unit_divisor=1024)
    start = time.perf_counter()
    total = 0
    with _closing(bar):
        batch: list[str] = []
        size = 0
        for n, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"document #{n} is a {type(text).__name__}, not a str")
            batch.append(text)
            size += len(text)
            if size >= _BATCH_CHARS:
                counter.add_documents(batch)
                total += size
                if bar is not None:
                    bar.update(size)
                batch, size = [], 0
        counter.add_documents(batch)
        total += size
        if bar is not None:
            bar.update(size)
    stats = {"bytes_read": total, "count_seconds": time.perf_counter() - start}
    return _learn(counter, num_merges, specials, regex, progress, stats)


def train_bpe(
    input_path: str | os.PathLike,
    vocab_size: int,
    special_tokens: list[str],
    **kwargs,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """The Stanford CS336 assignment-1 contract: returns ``(vocab, merges)`` with
    ``vocab: dict[int, bytes]`` and ``merges: list[tuple[bytes, bytes]]``.

    Extra keyword arguments go to :func:`train` (``pattern``, ``workers``, ...).
    """
    kwargs.setdefault("progress", False)
    tok = train(input_path, vocab_size, special_tokens=special_tokens, **kwargs)
    return tok.vocab, tok.merges
