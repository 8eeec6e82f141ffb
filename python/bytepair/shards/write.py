"""``write_shards``: documents to a folder of training shards, in one call. It picks
the engine that encodes (``bytepair.runners.local`` in this process, or
``bytepair.runners.ray_encode`` on a Ray cluster) and feeds its encoded batches to a
:class:`bytepair.shards.writer.ShardWriter`, which owns the folder."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

from bytepair._progress import check_progress
from bytepair.shards.writer import ShardWriter


def write_shards(
    tok,
    documents: Iterable[str],
    out_dir: str | os.PathLike,
    *,
    shard_tokens: int = 100_000_000,
    val_tokens: int | None = None,
    val_fraction: float | None = None,
    format: str = "bin",
    eot: str | None = "<|endoftext|>",
    bos: str | None = None,
    shuffle_docs: int | None = None,
    num_threads: int | None = None,
    progress=None,
    inputs: list[dict] | None = None,
    allowed_special=frozenset(),
    disallowed_special=(),
    engine: str = "local",
    ray_address: str | None = None,
) -> dict:
    """Encodes ``documents`` (any iterable of ``str``) into a folder of training shards
    and returns the manifest written to ``out_dir/manifest.json`` (plus ``seconds``,
    ``resumed`` and ``complete``).

    - ``shard_tokens``: tokens per shard (the last of each split may hold fewer);
      documents may straddle shards.
    - ``val_tokens=N``: the first documents, until N tokens, go to ``val_*`` shards;
      ``val_fraction=F``: each document goes to val with probability F, by a seeded
      hash of its index (deterministic). Val holds whole documents.
    - ``eot`` / ``bos``: special tokens written after / before every document (None:
      none). ``shuffle_docs=SEED``: documents in a deterministic shuffled order (a
      bounded buffer of ``SHUFFLE_CHARS`` characters, not a global shuffle).
    - Text that spells a special token is encoded as plain text by default (as
      nanoGPT's ``encode_ordinary``): corpus text must not inject control tokens.
      ``allowed_special`` / ``disallowed_special`` as in ``Tokenizer.encode``.
    - ``documents`` from ``bytepair.sources.open_sources`` are read on a thread while
      the core encodes, and their long documents in parts (``part_chars``; framed
      once, at the document's start and end) when the tokenizer's ids cannot change
      at the cuts (``sources.part_chars_for``): memory stays bounded whatever the
      document size. A caller's own iterable is read on the calling thread.
    - ``inputs``: ``[{"path", "bytes"}]`` the documents came from, recorded in the
      manifest and compared when resuming.
    - ``engine="ray"``: documents are encoded by Ray tasks (``ray_address``, or the
      cluster ``ray.init`` finds); ``documents`` must then be files opened with
      ``bytepair.sources.open_sources(...)``, which the tasks read
      themselves (``bytepair.runners.ray_encode``). The folder is byte-identical to
      the local run's, and either engine resumes the other's interrupted run.

    Interrupted (an exception, Ctrl-C, SIGTERM, SIGKILL), the same call continues after
    the last finished shard and the finished folder is byte-identical to an
    uninterrupted run's; with different inputs, options or tokenizer it refuses,
    saying what differs. On a folder it already finished, the same call writes nothing
    and returns the manifest with ``complete`` True. While one call writes a folder,
    another on the same folder raises ``BlockingIOError`` naming it and the writer's pid.
    """
    from bytepair.options import threads as checked_threads
    from bytepair.runners import check_engine

    check_progress(progress)
    check_engine(engine)
    if engine == "ray":
        from bytepair.runners import ray_encode

        ray_encode.check_corpus(documents)
    start = time.perf_counter()
    writer = ShardWriter(
        tok,
        out_dir,
        shard_tokens=shard_tokens,
        val_tokens=val_tokens,
        val_fraction=val_fraction,
        format=format,
        eot=eot,
        bos=bos,
        shuffle_docs=shuffle_docs,
        allowed_special=allowed_special,
        disallowed_special=disallowed_special,
        inputs=inputs,
    )
    threads = checked_threads(num_threads)
    total = sum(x["bytes"] for x in inputs) if inputs else None
    with writer:
        if writer.finished is not None:
            seconds = time.perf_counter() - start
            return {**writer.finished, "seconds": seconds, "resumed": False, "complete": True}
        if engine == "ray":
            n_docs = ray_encode.encode_into(
                writer, writer.tok, documents, address=ray_address, progress=progress, total=total
            )
        else:
            from bytepair.runners import local

            n_docs = local.encode_into(
                writer, writer.tok, documents, num_threads=threads, progress=progress, total=total
            )
        manifest = writer.finish(n_docs)
    seconds = time.perf_counter() - start
    return {**manifest, "seconds": seconds, "resumed": writer.resumed, "complete": False}
