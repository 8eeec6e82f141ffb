"""Cutting text files into parts that can be counted independently.

A part is ``(path, start, end)``: a byte range of one file. Ranges end at safe cut
points: right after a newline that follows a visible character (not whitespace, not a
control) and precedes a letter or digit, or right before a space that follows a
visible character, in any script (``_core.pattern_cuts``; see ``src/io/chunking.rs``
for why no pre-token of the built-in patterns crosses them). Such a point is never
inside a special token unless the token holds a newline or a space, so with a custom
pattern, or such a special token, each file is one part.

>>> import bytepair.runners.plan as plan
>>> plan.first_cut(b"end.\\nNext line", 0)
5
"""

from __future__ import annotations

import os
from pathlib import Path

from bytepair import _core

# A cut is looked for in this much text after each nominal boundary.
WINDOW = 1 << 20


def can_cut(pattern: str | None, special_tokens: list[str]) -> bool:
    """True if files may be cut at the pattern's cuts (newlines, spaces) for this
    pattern and these special tokens."""
    return pattern in _core.BUILTIN_PATTERNS and not any(
        "\n" in t or " " in t for t in special_tokens
    )


def first_cut(window: bytes, offset: int) -> int | None:
    """The first safe cut in ``window`` (which starts at file offset ``offset``), as a
    file offset; None if there is none."""
    cuts = _core.pattern_cuts(window)
    return offset + cuts[0] if cuts else None


def parts(
    paths: list[str | os.PathLike],
    pattern: str | None,
    special_tokens: list[str],
    part_bytes: int,
) -> list[tuple[str, int, int]]:
    """Byte ranges covering every file, about ``part_bytes`` each, cut at safe points."""
    out: list[tuple[str, int, int]] = []
    cutting = can_cut(pattern, special_tokens)
    for path in paths:
        path = Path(path)
        size = path.stat().st_size
        start = 0
        if cutting:
            with open(path, "rb") as f:
                nominal = part_bytes
                while nominal < size:
                    f.seek(nominal)
                    cut = first_cut(f.read(WINDOW), nominal)
                    if cut is not None and cut > start:
                        out.append((str(path), start, cut))
                        start = cut
                    nominal = max(nominal + part_bytes, start + part_bytes)
        out.append((str(path), start, size))
    return out


def has_border(separator: str) -> bool:
    """True if a proper prefix of ``separator`` is also a suffix: then two occurrences
    can overlap, and one found by a search may not be one the document split takes.

    >>> has_border("<|endoftext|>"), has_border("\\n\\n")
    (False, True)
    """
    return any(separator[:k] == separator[-k:] for k in range(1, len(separator)))


def document_parts(path: str | os.PathLike, separator: str | None, part_bytes: int):
    """Byte ranges covering a text file, about ``part_bytes`` each, each ending right
    after an occurrence of ``separator``: every range holds whole documents, the same
    ones reading the whole file gives. One range when the separator could overlap
    itself (or there is none)."""
    path = Path(path)
    size = path.stat().st_size
    out: list[tuple[str, int, int]] = []
    start = 0
    if separator and not has_border(separator):
        sep = separator.encode("utf-8")
        with open(path, "rb") as f:
            nominal = part_bytes
            while nominal < size:
                f.seek(nominal)
                window = f.read(WINDOW)
                found = window.find(sep)
                if found >= 0:
                    out.append((str(path), start, nominal + found + len(sep)))
                    start = out[-1][2]
                nominal = max(nominal + part_bytes, start + part_bytes)
    out.append((str(path), start, size))
    return out


def row_group_parts(metadata, part_bytes: int) -> list[range]:
    """A Parquet file's row groups in consecutive runs of about ``part_bytes``
    (uncompressed), at least one row group each."""
    out: list[range] = []
    start = size = 0
    for i in range(metadata.num_row_groups):
        size += metadata.row_group(i).total_byte_size
        if size >= part_bytes:
            out.append(range(start, i + 1))
            start, size = i + 1, 0
    if start < metadata.num_row_groups or not out:
        out.append(range(start, metadata.num_row_groups))
    return out


def record_parts(src, part_bytes: int) -> list[tuple[str, object]]:
    """How a record file is cut into tasks: ``("jsonl", (start, end))`` byte ranges of
    whole lines of an uncompressed JSON Lines file, ``("parquet", range)`` runs of row
    groups, else ``("file", None)``: the whole file (compressed, unreadable...)."""
    from bytepair.sources.jsonl import JsonlSource
    from bytepair.sources.parquet import ParquetSource

    if isinstance(src, JsonlSource) and not src.compressed:
        return [("jsonl", (s, e)) for _, s, e in document_parts(src.path, "\n", part_bytes)]
    if isinstance(src, ParquetSource) and (meta := _parquet_metadata(src)) is not None:
        return [("parquet", r) for r in row_group_parts(meta, part_bytes)]
    return [("file", None)]


def _parquet_metadata(src):
    """The file's metadata, or None if it is not readable (the task will say why)."""
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(src.path).metadata
    except Exception:  # pyarrow's own ArrowInvalid: reported by the source when read
        return None
