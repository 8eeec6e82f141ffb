"""Training: corpus -> BPE tokenizer.

Two steps, both in the Rust core:
1. count: read the corpus (files in blocks, cut only where pre-tokenization cannot
   change) and count the distinct pre-tokens, on ``num_threads`` threads;
2. merge: learn merges from those counts with incremental pair counts and a heap.

The result does not depend on ``num_threads``. Memory holds the table of distinct
pre-tokens, not the corpus. Counting is a map-reduce: :func:`train_from_counts` takes
counts made elsewhere (your own Spark/Dask/SQL pipeline).
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping
from contextlib import nullcontext
from dataclasses import dataclass

from bytepair import _core, _read_ahead
from bytepair._progress import Progress, check_progress
from bytepair.options import threads, without_surrogates
from bytepair.patterns import resolve_pattern
from bytepair.runners import check_engine
from bytepair.shards.one_file import block_kwargs
from bytepair.sources import is_dataset, open_sources
from bytepair.sources.jsonl import JsonlSource
from bytepair.tokenizer import Tokenizer, TrainingStats

# Documents from an iterator are sent to the core in batches of about this many chars.
_BATCH_CHARS = 8 << 20
# Text documents longer than this are streamed in parts (see sources/text.py).
_PART_CHARS = 1 << 20
# Token ids are 32-bit in the core.
MAX_VOCAB_SIZE = 1 << 32


@dataclass(frozen=True)
class _Options:
    """The checked arguments every training entry point shares."""

    num_merges: int
    specials: list[str]
    pattern: str | None
    num_threads: int
    min_frequency: int
    max_token_length: int | None
    reserved: list[str]
    pad_to_multiple_of: int | None
    progress: object


def _options(
    vocab_size,
    special_tokens,
    pattern,
    num_threads,
    progress,
    min_frequency=0,
    max_token_length=None,
    reserved_special_tokens=0,
    pad_to_multiple_of=None,
) -> _Options:
    if isinstance(special_tokens, str):
        raise TypeError("special_tokens must be a list of strings, not a single string")
    specials = list(dict.fromkeys(special_tokens))
    for t in specials:
        if not isinstance(t, str) or not t:
            raise ValueError(f"special tokens must be non-empty strings, got {t!r}")
    for name, value in (
        ("vocab_size", vocab_size),
        ("min_frequency", min_frequency),
        ("reserved_special_tokens", reserved_special_tokens),
    ):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        if value < 0:
            raise ValueError(f"{name} must not be negative, got {value}")
    if vocab_size > MAX_VOCAB_SIZE:
        raise ValueError(
            f"vocab_size {vocab_size:,} is too large: token ids are 32-bit, so at most "
            f"{MAX_VOCAB_SIZE:,} tokens (real vocabularies have 10^4 to 10^6)"
        )
    if max_token_length is not None and (
        not isinstance(max_token_length, int)
        or isinstance(max_token_length, bool)
        or max_token_length < 2
    ):
        raise ValueError(f"max_token_length must be an int of at least 2, not {max_token_length!r}")
    if pad_to_multiple_of is not None and (
        not isinstance(pad_to_multiple_of, int) or pad_to_multiple_of < 1
    ):
        raise ValueError(f"pad_to_multiple_of must be a positive int, not {pad_to_multiple_of!r}")
    reserved = [f"<|reserved_{i}|>" for i in range(reserved_special_tokens)]
    clash = set(reserved) & set(specials)
    if clash:
        raise ValueError(f"special token {sorted(clash)[0]!r} is also a reserved token name")
    num_merges = vocab_size - 256 - len(specials) - len(reserved)
    if num_merges < 0:
        raise ValueError(
            f"vocab_size {vocab_size} is too small: it must hold the 256 single bytes and the "
            f"{len(specials) + len(reserved)} special token(s), so at least "
            f"{256 + len(specials) + len(reserved)}"
        )
    check_progress(progress)
    return _Options(
        num_merges=num_merges,
        specials=specials,
        pattern=resolve_pattern(pattern),
        num_threads=threads(num_threads),
        min_frequency=min_frequency,
        max_token_length=max_token_length,
        reserved=reserved,
        pad_to_multiple_of=pad_to_multiple_of,
        progress=progress,
    )


def _options_of(args: dict) -> _Options:
    """:func:`_options` from an entry point's ``locals()`` (they share these names)."""
    names = (
        "vocab_size", "special_tokens", "pattern", "num_threads", "progress", "min_frequency",
        "max_token_length", "reserved_special_tokens", "pad_to_multiple_of",
    )  # fmt: skip
    return _options(*(args[name] for name in names))


def _learn(counter, opts: _Options, stats: dict) -> Tokenizer:
    start = time.perf_counter()
    with Progress(opts.progress, total=opts.num_merges, desc="merging", unit="merges") as bar:
        merges, vocab_bytes = counter.train(
            opts.num_merges,
            bar.hook(),
            min_frequency=opts.min_frequency,
            max_token_length=opts.max_token_length,
        )
    stats["merge_seconds"] = time.perf_counter() - start
    if len(merges) < opts.num_merges:
        why = (
            f"no pair occurs at least min_frequency={opts.min_frequency} times"
            if opts.min_frequency > 1
            else "every pre-token is a single token already"
            + (" (or longer than max_token_length)" if opts.max_token_length else "")
        )
        warnings.warn(
            f"training stopped early after {len(merges):,} of {opts.num_merges:,} merges: {why}. "
            f"The vocabulary has {opts.num_merges - len(merges):,} fewer tokens than asked for.",
            stacklevel=3,
        )
    byte_merges = [(vocab_bytes[a], vocab_bytes[b]) for a, b in merges]
    vocab = dict(enumerate(vocab_bytes))
    specials = opts.specials + opts.reserved
    if opts.pad_to_multiple_of:
        # Reserved tokens until the vocabulary is a multiple (what GPU kernels like).
        n = len(opts.reserved)
        while (len(vocab) + len(specials)) % opts.pad_to_multiple_of:
            specials.append(f"<|reserved_{n}|>")
            n += 1
    tok = Tokenizer(vocab, byte_merges, specials, opts.pattern)
    tok.training_stats = TrainingStats(
        bytes_read=stats["bytes_read"],
        distinct_pretokens=len(counter),
        merges_requested=opts.num_merges,
        merges_done=len(merges),
        count_seconds=stats["count_seconds"],
        merge_seconds=stats["merge_seconds"],
        records_skipped=stats.get("records_skipped", 0),
    )
    return tok


def _batches(texts: Iterable[str]) -> Iterator[list[str]]:
    """Documents in batches of about ``_BATCH_CHARS`` characters; the last batch may
    be empty."""
    batch: list[str] = []
    size = 0
    for n, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"document #{n} is a {type(text).__name__}, not a str")
        batch.append(text)
        size += len(text)
        if size >= _BATCH_CHARS:
            yield batch
            batch, size = [], 0
    yield batch


def _part_chars(opts) -> int | None:
    """How long documents may grow before they are counted in parts: cut only where the
    built-in patterns allow, and never inside a special token (sources/text.py)."""
    from bytepair.runners.plan import can_cut

    return _PART_CHARS if can_cut(opts.pattern, opts.specials) else None


def _count_documents(counter, texts: Iterable[str], on_batch, read_ahead: bool = False) -> int:
    """Sends documents to the core in batches of about ``_BATCH_CHARS``; calls
    ``on_batch(text bytes so far)`` after each and returns the UTF-8 bytes counted.
    ``read_ahead``: the documents come from a thread (only for our own file sources:
    a caller's iterator may not be safe to run on another thread)."""
    done = 0
    batches = _batches(texts)
    for batch in _read_ahead.read_ahead(batches) if read_ahead else batches:
        try:
            counter.add_documents(batch)
        except UnicodeEncodeError:
            # Lone surrogates counted as U+FFFD: the bytes counted are those of the
            # text as it was counted (as the core's JSON Lines road counts them too).
            batch = [without_surrogates(t) for t in batch]
            counter.add_documents(batch)
        # len() is the UTF-8 length of ASCII text, and isascii() costs nothing.
        done += sum(len(t) if t.isascii() else len(t.encode("utf-8")) for t in batch)
        on_batch(done)
    return done


def train(
    inputs,
    vocab_size: int,
    *,
    special_tokens: Iterable[str] = (),
    pattern: str | None = "gpt2",
    num_threads: int | None = None,
    progress=None,
    errors: str = "strict",
    min_frequency: int = 0,
    max_token_length: int | None = None,
    reserved_special_tokens: int = 0,
    pad_to_multiple_of: int | None = None,
    text_field: str = "text",
    glob: str | None = None,
    doc_separator: str | None = None,
    skip_bad_records: bool = False,
    engine: str = "local",
    ray_address: str | None = None,
) -> Tokenizer:
    """Trains a byte-level BPE tokenizer on a corpus: text files, compressed files,
    JSON Lines, Parquet, folders, ``-`` (stdin), ``datasets`` objects, or a list of
    these (``bytepair.sources``; JSON Lines, Parquet and datasets take the document
    from ``text_field``, folders are filtered by ``glob``).

    Documents are hard boundaries: in text, special tokens separate them (or
    ``doc_separator``), and each record is one. The same documents give the same
    merges whatever the source. Special tokens are added to the vocabulary after
    the merges; ``pattern`` ("gpt2", "cl100k", "o200k", a regex,
    or None) splits the rest into pre-tokens. ``vocab_size`` counts everything: 256
    bytes + merges + special tokens. Invalid UTF-8 is an error naming the byte offset,
    unless ``errors="replace"``.

    Plain text and JSON Lines files are read by the Rust core in blocks (a JSON line it
    cannot be sure to read as ``json.loads`` does is read by Python); everything else is
    streamed to it in batches of documents. A bad record (not JSON, no string at
    ``text_field``) is an error naming its file and line, unless
    ``skip_bad_records=True``: then it is counted (``training_stats.records_skipped``)
    and reported in a warning.

    Knobs: ``min_frequency`` (stop when the best pair occurs fewer times),
    ``max_token_length`` (in bytes: longer tokens are never made),
    ``reserved_special_tokens=N`` (``<|reserved_0|>`` ... counted in vocab_size) and
    ``pad_to_multiple_of=64`` (reserved tokens appended until the vocabulary size is a
    multiple, as GPU kernels like). ``progress`` is None (a bar on a terminal), a bool
    or a callable.

    ``engine="ray"`` counts on a Ray cluster (``ray_address``, or the one ``ray.init``
    finds): files are cut into parts at the same safe points, each part counted by a
    task, the counts added up by a tree of tasks, and the merge loop run here — the
    merges are identical to local training (``bytepair.runners``).

    >>> tok = train("corpus.txt", 10_000, special_tokens=["<|endoftext|>"])  # doctest: +SKIP
    """
    check_engine(engine)
    opts = _options_of(locals())
    corpus = open_sources(
        inputs,
        text_field=text_field,
        glob=glob,
        doc_separator=doc_separator,
        special_tokens=opts.specials,
        skip_bad_records=skip_bad_records,
        errors=errors,
        part_chars=_part_chars(opts),
    )
    if not corpus.sources:
        raise ValueError("no training inputs given")
    if engine == "ray":
        return _train_on_ray(corpus, opts, errors, ray_address)
    counter = _core.PreTokenCounter(opts.pattern, opts.specials, opts.num_threads)
    start = time.perf_counter()
    text_bytes = 0
    with Progress(progress, total=corpus.size, desc="counting") as bar:
        for src in corpus.sources:
            core_reads = getattr(src, "core_reads", False)
            if core_reads and (type(src) is JsonlSource or doc_separator is None):
                # The core reads the file (a compressed one's bytes, decompressed here).
                with src.core_input() or nullcontext() as chunks:
                    hook = bar.hook(at=src.core_progress)
                    if type(src) is JsonlSource:
                        text_bytes += counter.add_jsonl(
                            src.name,
                            src.options.field_path,
                            src.read_line,
                            hook,
                            chunks=chunks,
                            **block_kwargs(),
                        )
                    else:
                        read = counter.add_file(
                            src.name, errors, hook, chunks=chunks, **block_kwargs()
                        )
                        text_bytes += src.size if chunks is None else read
            else:
                text_bytes += _count_documents(
                    counter,
                    src.documents(),
                    lambda _, src=src: bar(src.consumed),
                    read_ahead=getattr(src, "path", "-") != "-",
                )
            bar.base += src.size or src.consumed
    corpus.skips.report()
    stats = {
        "bytes_read": text_bytes,
        "count_seconds": time.perf_counter() - start,
        "records_skipped": corpus.skips.total,
    }
    return _learn(counter, opts, stats)


def _train_on_ray(corpus, opts, errors, address):
    from bytepair.runners import ray as ray_runner

    plain, other = [], []
    for src in corpus.sources:
        path = getattr(src, "path", None)
        if path is None:
            raise ValueError(
                f'{src.name}: engine="ray" reads files (each task opens its part); '
                "pass file or folder paths"
            )
        if getattr(src, "is_plain_file", False):
            plain.append(path)
        else:
            other.append(src)
    start = time.perf_counter()
    with Progress(opts.progress, total=None, desc="counting on Ray", unit="parts") as bar:
        counter, _ = ray_runner.count(
            plain,
            other,
            opts.pattern,
            opts.specials,
            errors=errors,
            address=address,
            progress=bar.hook(),
            skips=corpus.skips,
        )
    corpus.skips.report()
    stats = {
        "bytes_read": sum(src.size or 0 for src in corpus.sources),
        "count_seconds": time.perf_counter() - start,
        "records_skipped": corpus.skips.total,
    }
    return _learn(counter, opts, stats)


def train_from_iterator(
    texts,
    vocab_size: int,
    *,
    special_tokens: Iterable[str] = (),
    pattern: str | None = "gpt2",
    num_threads: int | None = None,
    progress=None,
    min_frequency: int = 0,
    max_token_length: int | None = None,
    reserved_special_tokens: int = 0,
    pad_to_multiple_of: int | None = None,
    text_field: str = "text",
) -> Tokenizer:
    """Trains on in-memory text: one string, or any iterable of strings (a list, a
    generator, ...), or a ``datasets`` object (``Dataset``, ``IterableDataset``,
    ``(DatasetDict, "train")``: the string at ``text_field`` of each row). Each string
    is a separate document: no pair crosses from one to the next. Lone surrogates
    become U+FFFD, as in ``encode``.

    >>> tok = train_from_iterator(["low lower", "lowest"], 258, pattern=None, progress=False)
    >>> tok.merges
    [(b'o', b'w'), (b'l', b'ow')]
    """
    opts = _options_of(locals())
    counter = _core.PreTokenCounter(opts.pattern, opts.specials, opts.num_threads)
    if isinstance(texts, str):
        texts = [texts]
    elif is_dataset(texts):
        texts = open_sources(texts, text_field=text_field, part_chars=_part_chars(opts))
    start = time.perf_counter()
    with Progress(progress, total=None, desc="counting") as bar:
        total = _count_documents(counter, texts, bar)
    stats = {"bytes_read": total, "count_seconds": time.perf_counter() - start}
    return _learn(counter, opts, stats)


def train_from_counts(
    counts: Mapping[str | bytes, int] | Iterable[tuple[str | bytes, int]],
    vocab_size: int,
    *,
    special_tokens: Iterable[str] = (),
    pattern: str | None = "gpt2",
    num_threads: int | None = None,
    progress=None,
    min_frequency: int = 0,
    max_token_length: int | None = None,
    reserved_special_tokens: int = 0,
    pad_to_multiple_of: int | None = None,
) -> Tokenizer:
    """Trains from pre-token counts made elsewhere: ``{pre-token: count}`` (or pairs),
    pre-tokens as str (UTF-8 encoded) or bytes — e.g. the output of your own
    Spark/Dask/SQL job. ``pattern`` is only recorded in the tokenizer (the counts are
    already split); it should be the one that made them.

    >>> tok = train_from_counts({"low": 5, "lower": 2, "lowest": 1}, 258, pattern=None)
    >>> tok.merges
    [(b'o', b'w'), (b'l', b'ow')]
    """
    opts = _options_of(locals())
    counter = _core.PreTokenCounter(opts.pattern, opts.specials, opts.num_threads)
    items = counts.items() if isinstance(counts, Mapping) else counts
    start = time.perf_counter()
    total = 0
    batch: list[tuple[bytes, int]] = []
    for n, (piece, count) in enumerate(items):
        if isinstance(piece, str):
            piece = piece.encode("utf-8", "surrogatepass")
        if not isinstance(piece, bytes) or not isinstance(count, int) or count < 0:
            raise TypeError(
                f"count #{n} is ({piece!r}, {count!r}); expected (str or bytes, a non-negative int)"
            )
        batch.append((piece, count))
        total += len(piece) * count
        if len(batch) >= 1 << 16:
            counter.add_counts(batch)
            batch = []
    counter.add_counts(batch)
    stats = {"bytes_read": total, "count_seconds": time.perf_counter() - start}
    return _learn(counter, opts, stats)


def train_bpe(
    input_path: str | os.PathLike,
    vocab_size: int,
    special_tokens: list[str],
    **kwargs,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """The Stanford CS336 assignment-1 contract: returns ``(vocab, merges)`` with
    ``vocab: dict[int, bytes]`` and ``merges: list[tuple[bytes, bytes]]``.

    Extra keyword arguments go to :func:`train` (``pattern``, ``num_threads``, ...).
    """
    kwargs.setdefault("progress", False)
    tok = train(input_path, vocab_size, special_tokens=special_tokens, **kwargs)
    return tok.vocab, tok.merges
