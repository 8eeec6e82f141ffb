"""Feeding the Rust core: inputs gathered into batches of about so many characters
(``batched``), and read ahead on a thread (``read_ahead``) — what training and the
shard writer use to overlap reading their inputs with the work in the core."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def batched(items: Iterable[T], chars: int, size: Callable[[T], int] = len) -> Iterator[list[T]]:
    """``items`` in lists of about ``chars`` characters (``size`` of each): a list
    closes as soon as it reaches ``chars``; none is empty.

    >>> list(batched(iter([("ab", True), ("c", True), ("d", True)]), 2, lambda i: len(i[0])))
    [[('ab', True)], [('c', True), ('d', True)]]
    """
    batch: list[T] = []
    total = 0
    for item in items:
        batch.append(item)
        total += size(item)
        if total >= chars:
            yield batch
            batch, total = [], 0
    if batch:
        yield batch


def read_ahead(batches: Iterator[T], depth: int = 2) -> Iterator[T]:
    """The batches, read by a thread up to ``depth`` ahead: reading a file (parsing
    JSON, decoding Parquet, decompressing, splitting documents) overlaps the counting
    or encoding, which releases the GIL. An error while reading is raised here;
    stopping early (an exception, Ctrl-C) stops the thread. Only for iterators of our
    own sources: a caller's iterator may not be safe to run on another thread.

    >>> list(read_ahead(iter([[1, 2], [3]])))
    [[1, 2], [3]]
    """
    q: queue.Queue = queue.Queue(depth)
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def read() -> None:
        try:
            for batch in batches:
                if not put(("batch", batch)):
                    return
        except BaseException as e:  # handed to the consumer, raised there
            put(("error", e))
            return
        put(("end", None))

    thread = threading.Thread(target=read, name="bytepair-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            kind, item = q.get()
            if kind == "end":
                return
            if kind == "error":
                raise item
            yield item
    finally:
        stop.set()
        thread.join()
