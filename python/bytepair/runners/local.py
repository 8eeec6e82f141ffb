"""Encoding shard documents in this process: the core's ``encode_batch_to_numpy`` on
all cores, while a thread reads and splits our own sources ahead (``read_ahead``)."""

from __future__ import annotations

from collections.abc import Iterator

from bytepair._read_ahead import read_ahead
from bytepair.runners.feed import feed, utf8_len


def chunked(items: Iterator[tuple[str, bool]], chars: int = 1 << 18) -> Iterator[list]:
    """Items in lists of about ``chars`` characters (what a thread hands over at once).

    >>> list(chunked(iter([("ab", True), ("c", True), ("d", True)]), chars=2))
    [[('ab', True)], [('c', True), ('d', True)]]
    """
    chunk: list = []
    size = 0
    for item in items:
        chunk.append(item)
        size += len(item[0])
        if size >= chars:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def encode_into(writer, tok, documents, *, num_threads: int, progress=None, total=None) -> int:
    """Encodes ``documents`` (an iterable of str, or our sources' ``Corpus``) into
    ``writer``; returns the number of documents."""
    items = writer.order(documents)
    if hasattr(documents, "parts"):
        # Our own sources: read and split on a thread while the core encodes. A
        # caller's iterable may not be safe to run on another thread.
        items = (item for chunk in read_ahead(chunked(items)) for item in chunk)

    def encode(texts: list[str]):
        return tok.encode_batch_to_numpy(
            texts,
            num_threads=num_threads,
            allowed_special=writer.allowed,
            disallowed_special=writer.disallowed,
        )

    return feed(
        writer, items, encode, utf8_len, progress=progress, total=total, ahead=writer.gathers_ahead
    )
