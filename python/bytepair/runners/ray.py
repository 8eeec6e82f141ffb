"""Counting pre-tokens on a Ray cluster (``bytepair.train(..., engine="ray")``).

Each part of the corpus (``plan.parts``: byte ranges cut at safe points) is counted by
one Ray task running the same Rust counter as local training; each task returns its
counts as compact bytes (``PreTokenCounter.to_bytes``: a versioned binary table, never
pickle); pairs of tables are merged by further tasks (a tree reduction), and the merge
loop runs once on the driver. A task whose worker dies is retried by Ray
(``max_retries``), and since a part's counts depend only on its bytes, the result is
the same. Install with ``pip install "bytepair[ray]"``.
"""

from __future__ import annotations

import contextlib

# Retries of a task whose worker process died (Ray's own fault tolerance).
MAX_RETRIES = 3
# Bytes of text per counting task.
PART_BYTES = 64 << 20


def _import_ray():
    try:
        import ray
    except ImportError:
        raise ImportError('engine="ray" needs Ray: pip install "bytepair[ray]"') from None
    return ray


def read_part(path: str, start: int, end: int, errors: str) -> str:
    """The text of ``path[start:end]``; invalid UTF-8 is an error naming the file offset."""
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(end - start)
    try:
        return data.decode("utf-8", errors="strict" if errors == "strict" else "replace")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{path}: invalid UTF-8 at byte offset {start + e.start} (byte 0x{data[e.start]:02x}); "
            'fix the file or pass errors="replace" (CLI: --errors replace)'
        ) from None


def _count_part(path: str, start: int, end: int, pattern, specials, errors) -> bytes:
    """One task: the pre-token counts of ``path[start:end]``, as bytes."""
    from bytepair import _core

    text = read_part(path, start, end, errors)
    counter = _core.PreTokenCounter(pattern, specials, 1)
    counter.add_documents([text])
    return counter.to_bytes()


def reading_options(options) -> dict:
    """``open_sources`` keyword arguments that read a file as ``options`` does."""
    return {
        "text_field": options.text_field,
        "doc_separator": options.doc_separator,
        "special_tokens": list(options.special_tokens),
        "skip_bad_records": options.skips.skip,
        "errors": options.errors,
        "part_chars": options.part_chars,
    }


def unit_documents(unit: tuple):
    """A unit's documents (``(kind, path, part, options)``: a text byte range, a JSON
    Lines byte range, a Parquet row-group range or a whole file), and the ``Skips``
    counting its bad records (None for text)."""
    from bytepair.sources import open_sources
    from bytepair.sources.base import texts_of
    from bytepair.sources.text import split_documents

    kind, path, part, kw = unit
    if kind == "text":
        text = read_part(path, *part, kw["errors"])
        seps = [kw["doc_separator"]] if kw["doc_separator"] else kw["special_tokens"]
        return texts_of(split_documents(iter([text]), seps)), None
    corpus = open_sources([path], **kw)
    (src,) = corpus.sources
    if kind == "jsonl":
        return texts_of(src.parts_between(*part)), corpus.skips
    if kind == "parquet":
        return texts_of(src.parts(row_groups=part)), corpus.skips
    return src.documents(), corpus.skips


def add_skips(skips, item: tuple | None) -> None:
    """Bad records a task skipped (``("skips", counts, first)``), counted for the report."""
    if item is not None:
        for name, n in item[1].items():
            skips.counts[name] = skips.counts.get(name, 0) + n
        skips.first.extend(item[2][: 3 - len(skips.first)])


def _count_unit(unit: tuple, pattern, specials) -> tuple[bytes, tuple]:
    """One task: the pre-token counts of a record file's unit (JSON Lines lines,
    Parquet row groups, a compressed file), read as training reads it locally, and its
    skipped bad records ``("skips", counts, first)``."""
    from bytepair import _core
    from bytepair.training import _count_documents

    counter = _core.PreTokenCounter(pattern, specials, 1)
    docs, skips = unit_documents(unit)
    _count_documents(counter, docs, lambda _: None)
    return counter.to_bytes(), ("skips", skips.counts, skips.first)


def _merge(pattern, specials, *tables: bytes) -> bytes:
    """One reduction task: several count tables added up."""
    from bytepair import _core

    total = _core.PreTokenCounter.from_bytes(tables[0], pattern, specials, 1)
    for table in tables[1:]:
        total.merge(_core.PreTokenCounter.from_bytes(table, pattern, specials, 1))
    return total.to_bytes()


def count(
    plain_paths,
    other_sources,
    pattern: str | None,
    specials: list[str],
    *,
    errors: str = "strict",
    address: str | None = None,
    part_bytes: int = PART_BYTES,
    progress=None,
    skips=None,
):
    """The pre-token counts of the files, counted on Ray: ``(counter, number of tasks)``.
    Plain text files are cut into byte ranges at safe cuts, uncompressed JSON Lines
    into ranges of lines, Parquet files into runs of row groups; other files (the
    ``Source`` objects of ``other_sources``) are one task each. Bad records the tasks
    skipped are added to ``skips``."""
    from bytepair import _core
    from bytepair.runners.plan import parts, record_parts

    with connected(address) as ray:
        options = task_options()
        count_task = ray.remote(**options)(_count_part)
        merge_task = ray.remote(**options)(_merge)
        unit_task = ray.remote(**options)(_count_unit).options(num_returns=2)
        todo = parts(plain_paths, pattern, specials, part_bytes)
        pending = [count_task.remote(p, s, e, pattern, specials, errors) for p, s, e in todo]
        skipped = []
        for src in other_sources:
            kw = {**reading_options(src.options), "errors": errors}
            for kind, part in record_parts(src, part_bytes):
                table, skip = unit_task.remote((kind, str(src.path), part, kw), pattern, specials)
                pending.append(table)
                skipped.append(skip)
        n_parts = len(pending)
        if not pending:
            return _core.PreTokenCounter(pattern, specials, 1), 0
        # Tree reduction: merge finished tables pairwise as they arrive.
        ready_tables = []
        while pending or len(ready_tables) > 1:
            if ready_tables and len(ready_tables) >= 2:
                a, b = ready_tables.pop(), ready_tables.pop()
                pending.append(merge_task.remote(pattern, specials, a, b))
                continue
            finished, pending = ray.wait(pending, num_returns=1)
            ready_tables.append(finished[0])
            if progress is not None:
                progress(n_parts - len(pending))
        try:
            table = ray.get(ready_tables[0])
            skipped = ray.get(skipped)
        except ray.exceptions.RayTaskError as e:
            raise _cause(e) from None
        if skips is not None:
            for item in skipped:
                add_skips(skips, item)
        return _core.PreTokenCounter.from_bytes(table, pattern, specials, 1), n_parts


@contextlib.contextmanager
def connected(address: str | None):
    """Ray, connected: to the cluster ``ray.init`` already joined, else to ``address``
    (or the one ``ray.init`` finds) until the block ends."""
    ray = _import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, log_to_driver=False, include_dashboard=False)
    try:
        yield ray
    finally:
        if started_here:
            ray.shutdown()


def task_options() -> dict:
    """``ray.remote`` options of every task: retries of a task whose worker died."""
    return {"max_retries": MAX_RETRIES}


def _cause(error: BaseException) -> BaseException:
    """The exception a task raised, unwrapped from Ray's wrappers (so errors read as
    they do locally: one line naming the file and offset)."""
    import ray

    while isinstance(error, ray.exceptions.RayTaskError) and error.cause is not None:
        error = error.cause
    return error
