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
import os

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

    _fault_injection()
    text = read_part(path, start, end, errors)
    counter = _core.PreTokenCounter(pattern, specials, 1)
    counter.add_documents([text])
    return counter.to_bytes()


def _count_source(path: str, pattern, specials, source_options: dict) -> bytes:
    """One task: the pre-token counts of a whole non-plain file (compressed, JSON Lines,
    Parquet), read through ``bytepair.sources`` as training reads it locally."""
    from bytepair import _core
    from bytepair.sources import open_sources
    from bytepair.training import _count_documents

    _fault_injection()
    counter = _core.PreTokenCounter(pattern, specials, 1)
    corpus = open_sources([path], special_tokens=specials, **source_options)
    for src in corpus.sources:
        _count_documents(counter, src.documents(), lambda _: None)
    corpus.skips.report()
    return counter.to_bytes()


def _merge(pattern, specials, *tables: bytes) -> bytes:
    """One reduction task: several count tables added up."""
    from bytepair import _core

    total = _core.PreTokenCounter.from_bytes(tables[0], pattern, specials, 1)
    for table in tables[1:]:
        total.merge(_core.PreTokenCounter.from_bytes(table, pattern, specials, 1))
    return total.to_bytes()


def _fault_injection() -> None:
    # For the fault-tolerance test only: the first task to see this marker path
    # creates the file and kills its own worker process; Ray must retry the task.
    marker = os.environ.get("BYTEPAIR_TEST_KILL_ONE_TASK")
    if marker:
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.close(fd)
        os._exit(1)


def count(
    plain_paths,
    other_paths,
    pattern: str | None,
    specials: list[str],
    *,
    errors: str = "strict",
    source_options: dict | None = None,
    address: str | None = None,
    part_bytes: int = PART_BYTES,
    progress=None,
):
    """The pre-token counts of the files, counted on Ray: ``(counter, number of tasks)``.
    Plain text files are cut into byte ranges; other files are one task each."""
    from bytepair import _core
    from bytepair.runners.plan import parts

    with connected(address) as ray:
        options = task_options()
        count_task = ray.remote(**options)(_count_part)
        merge_task = ray.remote(**options)(_merge)
        source_task = ray.remote(**options)(_count_source)
        todo = parts(plain_paths, pattern, specials, part_bytes)
        pending = [count_task.remote(p, s, e, pattern, specials, errors) for p, s, e in todo]
        read_options = {**(source_options or {}), "errors": errors}
        pending += [
            source_task.remote(str(p), pattern, specials, read_options) for p in other_paths
        ]
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
        except ray.exceptions.RayTaskError as e:
            raise _cause(e) from None
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
    """``ray.remote`` options of every task: retries, and the test hooks' variables."""
    options: dict = {"max_retries": MAX_RETRIES}
    env = {k: v for k, v in os.environ.items() if k.startswith("BYTEPAIR_TEST_")}
    if env:
        options["runtime_env"] = {"env_vars": env}
    return options


def _cause(error: BaseException) -> BaseException:
    """The exception a task raised, unwrapped from Ray's wrappers (so errors read as
    they do locally: one line naming the file and offset)."""
    import ray

    while isinstance(error, ray.exceptions.RayTaskError) and error.cause is not None:
        error = error.cause
    return error
