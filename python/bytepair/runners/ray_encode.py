"""Encoding documents on a Ray cluster, for ``write_shards(..., engine="ray")`` and
``bytepair encode FILES -o OUT/ --engine ray``.

The corpus is cut into *units* of contiguous documents: a plain text file into byte
ranges that end right after a document separator (``plan.document_parts``: each range
holds the whole documents reading the whole file gives), an uncompressed JSON Lines
file into ranges of whole lines, a Parquet file into runs of row groups; a compressed
file is one unit. Each unit is encoded by one Ray task, a streaming
generator yielding batches: the ids of its documents (in the shard dtype) and, per
document, its number of tokens, characters and UTF-8 bytes.

The driver takes the units' results strictly in corpus order (a few tasks run ahead,
each holding at most ``BACKPRESSURE`` unread batches) and feeds the documents, already
encoded, to the same writer the local run feeds (``encode_into``, ``runners.feed``): global document indices, the shuffle
buffer, val choices, framing and the fixed-size shards are all decided there, so the
folder is byte-identical to the local run's whatever the number of tasks or nodes. A
task whose worker dies is re-run by Ray; its output depends only on its unit, so
nothing changes.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Iterator

import numpy as np

from bytepair._read_ahead import batched
from bytepair.runners import feed as feeding
from bytepair.runners.ray import (
    _cause,
    add_skips,
    connected,
    reading_options,
    task_options,
    unit_documents,
)

# Bytes of plain text per task.
PART_BYTES = 32 << 20
# Batches a task may yield before the driver has read them.
BACKPRESSURE = 2


class Encoded:
    """One document, encoded: its ids (framing comes later), and for the writer its
    length in characters (what the shuffle buffer and batches count: ``len``) and in
    UTF-8 bytes (progress)."""

    __slots__ = ("ids", "chars", "nbytes")

    def __init__(self, ids: np.ndarray, chars: int, nbytes: int) -> None:
        self.ids, self.chars, self.nbytes = ids, chars, nbytes

    def __len__(self) -> int:
        return self.chars


def joined(docs: list[Encoded]) -> tuple[np.ndarray, np.ndarray]:
    """Encoded documents as one batch: ``(ids, offsets)``, as ``encode_batch_to_numpy``
    returns them."""
    offsets = np.zeros(len(docs) + 1, dtype="<i8")
    np.cumsum([len(d.ids) for d in docs], out=offsets[1:])
    return np.concatenate([d.ids for d in docs]), offsets


def units(corpus, part_bytes: int) -> list[tuple]:
    """The corpus as units of contiguous documents, in order: ``(kind, path, part,
    options)``, kind "text" or "jsonl" with a byte range, "parquet" with a range of row
    groups, "file" with None (the whole file)."""
    from bytepair.runners.plan import document_parts, record_parts
    from bytepair.sources.text import TextSource

    out: list[tuple] = []
    for src in corpus.sources:
        path = getattr(src, "path", None)
        if path is None or str(path) == "-":
            raise ValueError(
                f'{src.name}: engine="ray" reads files (each task opens its part); '
                "pass file or folder paths"
            )
        # Tasks encode whole documents (the writer frames each item as one).
        kw = {**reading_options(src.options), "part_chars": None}
        seps = [kw["doc_separator"]] if kw["doc_separator"] else kw["special_tokens"]
        if isinstance(src, TextSource) and not src.compressed:
            sep = seps[0] if len(seps) == 1 else None
            parts = [("text", (s, e)) for _, s, e in document_parts(path, sep, part_bytes)]
        else:
            parts = record_parts(src, part_bytes)
        out += [(kind, str(path), part, kw) for kind, part in parts]
    return out


def _encode_unit(tok, unit: tuple, dtype: str, allowed, disallowed, batch_chars: int):
    """One task (a streaming generator): batches ``(ids, tokens, chars, bytes)`` of the
    unit's documents, then ``("skips", counts, first)``."""
    docs, skips = unit_documents(unit)

    def encoded(batch: list[str]):
        ids, offsets = tok.encode_batch_to_numpy(
            batch, num_threads=1, allowed_special=allowed, disallowed_special=disallowed
        )
        chars = np.fromiter(map(len, batch), np.int64, len(batch))
        nbytes = np.fromiter(map(feeding.utf8_len, batch), np.int64, len(batch))
        return ids.astype(dtype), np.diff(offsets), chars, nbytes

    for batch in batched(docs, batch_chars):
        yield encoded(batch)
    if skips is not None and skips.total:
        yield ("skips", skips.counts, skips.first)


def _count_unit(unit: tuple) -> tuple:
    """One task: a unit's number of documents and UTF-8 bytes, not encoded (what a
    resumed run needs of the units before its resume point), and its bad records."""
    docs, skips = unit_documents(unit)
    n = nbytes = 0
    for doc in docs:
        n += 1
        nbytes += feeding.utf8_len(doc)
    return n, nbytes, ("skips", skips.counts, skips.first) if skips is not None else None


def check_corpus(documents) -> None:
    """Ray tasks read files themselves: the documents must be a ``Corpus`` of files."""
    from bytepair.sources import Corpus

    if not isinstance(documents, Corpus):
        raise TypeError(
            'engine="ray" needs the documents as files, opened with '
            "bytepair.sources.open_sources(paths): each task reads its part"
        )


def encode_into(writer, tok, corpus, *, address=None, progress=None, total=None) -> int:
    """Encodes the corpus's documents on Ray and feeds them to ``writer``, in corpus
    order; returns the number of documents."""
    encoded = encoded_documents(
        tok,
        corpus,
        dtype=writer.dtype,
        allowed=writer.allowed,
        disallowed=writer.disallowed,
        batch_chars=feeding.BATCH_CHARS,
        address=address,
        # Shuffled, the documents before the resume point are not a prefix.
        skip_docs=writer.resume_doc if writer.shuffle_docs is None else 0,
    )
    with contextlib.closing(encoded):
        items = writer.order(encoded)
        return feeding.feed(
            writer, items, joined, lambda doc: doc.nbytes, progress=progress, total=total
        )


def encoded_documents(
    tok,
    corpus,
    *,
    dtype: str,
    allowed,
    disallowed,
    batch_chars: int,
    address: str | None = None,
    part_bytes: int | None = None,
    skip_docs: int = 0,
) -> Iterator[Encoded]:
    """The corpus's documents, encoded on Ray, in corpus order (bad records skipped in
    tasks are reported here once all are read).

    ``skip_docs``: the writer will drop the first documents (a resumed run, without
    shuffling): units lying wholly before that point are only counted, by tasks that
    do not encode, and their documents come as empty placeholders."""
    todo = units(corpus, part_bytes or PART_BYTES)
    with connected(address) as ray:
        counted: list = [None] * len(todo)
        if skip_docs:
            count_task = ray.remote(**task_options())(_count_unit)
            counts = _get(ray, [count_task.remote(unit) for unit in todo])
            first = 0
            for k, (n, nbytes, skips) in enumerate(counts):
                if first + n > skip_docs:
                    break
                counted[k] = (n, nbytes, skips)
                first += n
        task = ray.remote(**task_options())(_encode_unit).options(
            num_returns="streaming", _generator_backpressure_num_objects=BACKPRESSURE
        )
        tok_ref = ray.put(tok)
        running: deque = deque()
        pending = iter(range(len(todo)))

        def submit() -> None:
            k = next(pending, None)
            if k is not None and counted[k] is None:
                args = (tok_ref, todo[k], dtype, allowed, disallowed, batch_chars)
                running.append(task.remote(*args))
            elif k is not None:
                running.append(counted[k])

        for _ in range(int(ray.cluster_resources().get("CPU", 1)) + 1):
            submit()
        while running:
            results = running.popleft()
            submit()
            if isinstance(results, tuple):  # counted, not encoded: placeholders
                n, nbytes, skips = results
                add_skips(corpus.skips, skips)
                empty = np.zeros(0, dtype)
                yield from (Encoded(empty, 0, nbytes if j == 0 else 0) for j in range(n))
                continue
            for ref in results:
                item = _get(ray, ref)
                del ref
                if isinstance(item[0], str):  # ("skips", counts, first)
                    add_skips(corpus.skips, item)
                    continue
                ids, tokens, chars, nbytes = item
                ends = np.cumsum(tokens).tolist()
                starts = [0, *ends[:-1]]
                # Copies: a document held by the shuffle buffer must not pin its batch.
                for s, e, c, b in zip(starts, ends, chars.tolist(), nbytes.tolist()):
                    yield Encoded(ids[s:e].copy(), c, b)
    corpus.skips.report()


def _get(ray, refs):
    """``ray.get``, raising a task's error as it reads locally."""
    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError as e:
        raise _cause(e) from None
