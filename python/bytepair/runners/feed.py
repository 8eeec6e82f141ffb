"""Feeding a :class:`bytepair.shards.writer.ShardWriter`: documents numbered in
order, those already in finished shards skipped (never encoded), the rest gathered
into batches of about ``BATCH_CHARS`` characters, each encoded by the engine's
``encode`` and handed to the writer. The same loop for every engine, so the folder
does not depend on which one encoded it.

With ``ahead=True`` (an ``encode`` that releases the GIL: the local engine's), each
batch is encoded on a thread while the writer takes the batch before it and the
next batch is gathered: the writer's work (framing, routing, hashing, writing) no
longer leaves the encoding cores idle. Batches still reach the writer one at a time,
in order; at most two are held.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor

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
    ahead: bool = False,
) -> int:
    """Writes ``items`` (``(document, last)``: documents, or parts of one) through
    ``writer``, ``encode(batch) -> (ids, offsets)`` encoding each batch; returns the
    number of documents. ``progress`` gets the input bytes done (``size_of`` each);
    ``ahead``: encode each batch on a thread (see the module docstring)."""
    with _Batches(writer, encode, ahead) as batches:
        return _feed_items(writer, items, batches.write, size_of, progress, total)


class _Batches:
    """Hands each gathered batch to the writer, encoded: at once, or (``ahead``) on a
    thread while the batch before it is written."""

    def __init__(self, writer, encode: Callable, ahead: bool) -> None:
        self.writer, self.encode = writer, encode
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="bytepair-encode") if ahead else None
        #: The batch being encoded on the thread: (its encoding, index, firsts, lasts).
        self.pending: tuple[Future, list, list, list] | None = None

    def write(self, texts: list, index: list, firsts: list, lasts: list) -> None:
        if self.pool is None:
            self.writer.add(*self.encode(texts), index, firsts, lasts)
            return
        submitted = (self.pool.submit(self.encode, texts), index, firsts, lasts)
        self._write_pending()
        self.pending = submitted

    def _write_pending(self) -> None:
        if self.pending is not None:
            done, *where = self.pending
            self.pending = None
            self.writer.add(*done.result(), *where)

    def __enter__(self) -> _Batches:
        return self

    def __exit__(self, kind, *_) -> None:
        try:
            if kind is None:
                self._write_pending()
        finally:
            if self.pool is not None:
                # On an error the batch on the thread is dropped (never written).
                self.pool.shutdown(wait=True, cancel_futures=True)


def _feed_items(writer, items, write, size_of, progress, total) -> int:
    """The loop of :func:`feed`: gathers batches and hands each to ``write``."""
    batch_chars = BATCH_CHARS
    texts: list = []
    index: list[int] = []
    firsts: list[bool] = []
    lasts: list[bool] = []
    chars = done_bytes = n_docs = 0
    first = True
    with Progress(progress, total=total, desc="sharding") as bar:
        # Counting UTF-8 bytes encodes each non-ASCII text once more: only for a bar.
        counting = bar.enabled
        for text, last in items:
            if first:
                n_docs += 1
            i, first_part, first = n_docs - 1, first, last
            if counting:
                done_bytes += size_of(text)
            if writer.skips(i):
                continue  # its split holds it already: not even encoded
            texts.append(text)
            index.append(i)
            firsts.append(first_part)
            lasts.append(last)
            chars += len(text)
            if chars >= batch_chars:
                write(texts, index, firsts, lasts)
                texts, index, firsts, lasts, chars = [], [], [], [], 0
                bar(done_bytes)
                if bar.bar is not None:
                    bar.bar.set_postfix_str(
                        f"{n_docs:,} docs, {writer.tokens:,} tokens", refresh=False
                    )
        if texts:
            write(texts, index, firsts, lasts)
        bar(total if total is not None else done_bytes)
    return n_docs
