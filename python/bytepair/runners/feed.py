"""Feeding a :class:`bytepair.shards.writer.ShardWriter`: documents numbered in
order, those already in finished shards skipped (never encoded), the rest gathered
into batches of about ``BATCH_CHARS`` characters, each encoded by the engine's
``encode`` and handed to the writer. The same loop for every engine, so the folder
does not depend on which one encoded it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from bytepair._progress import Progress

#: Characters of text per encode call: what bounds the writer's memory (a single
#: longer document is encoded alone).
BATCH_CHARS = 1_000_000


def utf8_len(text: str) -> int:
    """The UTF-8 size of ``text`` (what progress counts), without encoding ASCII.

    >>> utf8_len("naïve")
    6
    """
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def feed(
    writer,
    items: Iterable[tuple],
    encode: Callable,
    size_of: Callable = utf8_len,
    *,
    progress=None,
    total: int | None = None,
) -> int:
    """Writes ``items`` (``(document, last)``: documents, or parts of one) through
    ``writer``, ``encode(batch) -> (ids, offsets)`` encoding each batch; returns the
    number of documents. ``progress`` gets the input bytes done (``size_of`` each)."""
    batch_chars = BATCH_CHARS
    texts: list = []
    index: list[int] = []
    firsts: list[bool] = []
    lasts: list[bool] = []
    chars = done_bytes = n_docs = 0
    first = True
    with Progress(progress, total=total, desc="sharding") as bar:
        for text, last in items:
            if first:
                n_docs += 1
            i, first_part, first = n_docs - 1, first, last
            done_bytes += size_of(text)
            if writer.skips(i):
                continue  # its split holds it already: not even encoded
            texts.append(text)
            index.append(i)
            firsts.append(first_part)
            lasts.append(last)
            chars += len(text)
            if chars >= batch_chars:
                writer.add(*encode(texts), index, firsts, lasts)
                texts, index, firsts, lasts, chars = [], [], [], [], 0
                bar(done_bytes)
                if bar.bar is not None:
                    bar.bar.set_postfix_str(
                        f"{n_docs:,} docs, {writer.tokens:,} tokens", refresh=False
                    )
        if texts:
            writer.add(*encode(texts), index, firsts, lasts)
        bar(total if total is not None else done_bytes)
    return n_docs
