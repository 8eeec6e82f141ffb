"""Encoding shard documents in this process: the core's batch encoding on all cores,
while a thread reads and splits our own sources ahead (``read_ahead``).

Text and JSON Lines files take a shorter road (``encode_files_into``): the core reads
them, splits them into documents (JSON Lines: takes each record's text) and encodes
them a block at a time (``DocumentBatches``), and Python only hands each block's ids
to the writer — no string is made per document. (A compressed file's bytes, and
stdin's, are handed over by Python, a piece per call, on the core's reading thread:
``FileSource.core_input``. A JSON line the core cannot be sure to read as Python does
is read by Python: ``JsonlSource.read_line``.)"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing, contextmanager, nullcontext

from bytepair._progress import Progress
from bytepair._read_ahead import batched, read_ahead
from bytepair.runners.feed import feed, utf8_len

#: Bytes of a text file the core reads, splits and encodes per block. The pipeline
#: holds a few blocks' text and ids at once: 4 MB blocks peaked at 181 MiB on a 200 MB
#: file (cl100k), 3 MB ones at 168 MiB, as fast; 2 MB ones were 5% slower.
BLOCK_BYTES = 3 << 20


def encode_into(writer, tok, documents, *, num_threads: int, progress=None, total=None) -> int:
    """Encodes ``documents`` (an iterable of str, or our sources' ``Corpus``) into
    ``writer``; returns the number of documents."""
    files = plain_files(writer, tok, documents)
    if files is not None:
        n_docs = encode_files_into(
            writer, tok, files, num_threads=num_threads, progress=progress, total=total
        )
        documents.skips.report()  # as reading the corpus to its end does
        return n_docs
    items = writer.order(documents)
    if hasattr(documents, "parts"):
        # Our own sources: read and split on a thread while the core encodes. A
        # caller's iterable may not be safe to run on another thread.
        chunks = batched(items, 1 << 18, lambda item: len(item[0]))
        items = (item for chunk in read_ahead(chunks) for item in chunk)

    def encode(texts: list[str]):
        return tok._encode_batch_flat(texts, num_threads, writer.allowed, writer.disallowed)

    return feed(
        writer, items, encode, utf8_len, progress=progress, total=total, ahead=writer.gathers_ahead
    )


def plain_files(writer, tok, documents) -> list | None:
    """The sources of ``documents`` when the core can read them itself: all text or
    JSON Lines files, compressed or not, or stdin, on a fresh run (a resumed one
    skips the documents finished shards hold, by number and split, which the Python
    road does), in file order (no ``shuffle_docs``), and for text files a tokenizer
    whose ids do not change where a file is cut into blocks (JSON Lines blocks end
    between records): one Python may cut documents for, or a SentencePiece model
    that cuts words (``cuts_words``: the core encodes a later part of a document
    without the dummy prefix, which Python's parts would get). Else None."""
    from bytepair.sources import part_chars_for
    from bytepair.sources.jsonl import JsonlSource
    from bytepair.sources.text import TextSource

    sources = getattr(documents, "sources", None)
    if not sources or writer.resumed or writer.shuffle_docs is not None:
        return None
    if not all(type(s) in (JsonlSource, TextSource) and s.core_reads for s in sources):
        return None
    if not hasattr(tok.model.core, "jsonl_batches"):
        return None
    cuts = part_chars_for(tok) is not None or getattr(tok.model.core, "cuts_words", False)
    if not cuts and any(type(s) is TextSource for s in sources):
        return None
    return sources


def encode_files_into(writer, tok, sources, *, num_threads: int, progress=None, total=None) -> int:
    """Encodes text and JSON Lines files' documents into ``writer`` (see the
    module docstring): the core reads, splits and encodes each block on a thread of its
    own while this one writes the block before it. Returns the number of documents.
    (No numpy: its import was a tenth of a 200 MB folder's time.)"""
    from bytepair.shards.writer import ID_FORMATS, int64_list

    core = tok.model.core
    n_docs = done = 0
    with Progress(progress, total=total, desc="sharding") as bar:
        for source in sources:
            specials = (list(writer.allowed), list(writer.disallowed))
            blocks = {"block_bytes": BLOCK_BYTES, "first_doc": n_docs, "width": writer.width}
            with core_batches(core, source, *specials, num_threads, **blocks) as batches:
                # The core's thread encodes the next block while this one is written.
                for ids, offsets, docs, firsts, lasts, end in batches:
                    ids = memoryview(ids).cast(ID_FORMATS[writer.width])
                    writer.add(ids, offsets, int64_list(docs), firsts, lasts)
                    bar(done + source.core_progress(end))
                n_docs = batches.next_doc
            done += source.size or source.consumed  # stdin has no size
    return n_docs


@contextmanager
def core_batches(
    core, source, allowed: list, disallowed: list, num_threads: int, **blocks
) -> Iterator:
    """The core's ``DocumentBatches`` of a text or JSON Lines file's documents
    (``blocks``: ``block_bytes``, ``first_doc``, ``width``), a compressed file's bytes
    decompressed here (``FileSource.core_input``). On leaving, the core's threads are
    stopped before the file they read is closed."""
    from bytepair.sources.jsonl import JsonlSource

    opts, path = source.options, source.name
    with source.core_input() or nullcontext() as chunks:
        if isinstance(source, JsonlSource):
            field, read_line = opts.field_path, source.read_line
            batches = core.jsonl_batches(
                path, field, read_line, allowed, disallowed, num_threads, chunks=chunks, **blocks
            )
        else:
            seps = [opts.doc_separator] if opts.doc_separator else list(opts.special_tokens)
            batches = core.document_batches(
                path, seps, allowed, disallowed, opts.errors, num_threads, chunks=chunks, **blocks
            )
        with closing(batches):
            yield batches
