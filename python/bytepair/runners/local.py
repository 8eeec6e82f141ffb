"""Encoding shard documents in this process: the core's ``encode_batch_to_numpy`` on
all cores, while a thread reads and splits our own sources ahead (``read_ahead``)."""

from __future__ import annotations

from bytepair._read_ahead import batched, read_ahead
from bytepair.runners.feed import feed, utf8_len


def encode_into(writer, tok, documents, *, num_threads: int, progress=None, total=None) -> int:
    """Encodes ``documents`` (an iterable of str, or our sources' ``Corpus``) into
    ``writer``; returns the number of documents."""
    items = writer.order(documents)
    if hasattr(documents, "parts"):
        # Our own sources: read and split on a thread while the core encodes. A
        # caller's iterable may not be safe to run on another thread.
        chunks = batched(items, 1 << 18, lambda item: len(item[0]))
        items = (item for chunk in read_ahead(chunks) for item in chunk)

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
