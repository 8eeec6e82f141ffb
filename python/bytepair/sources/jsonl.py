"""JSON Lines (``.jsonl``, ``.json``, ``.ndjson``; compressed too): one document per line,
the string at ``text_field`` (a dotted path reaches into nested objects: ``meta.body``).

Blank lines are not records. A line that is not JSON, or has no string at the field,
is an error naming the file and line — or, with ``skip_bad_records``, counted and
reported at the end.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

from bytepair.options import without_surrogates
from bytepair.sources._records import BadRecord, text_of
from bytepair.sources._stream import ByteStream
from bytepair.sources.base import FileSource
from bytepair.sources.text import in_parts

SUFFIXES = (".jsonl", ".json", ".ndjson")


def _lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The lines of bytes in pieces. A long line is held as a list of its pieces and
    joined once: adding each piece to a growing bytes object made a 200 MB line cost
    minutes (every piece copied all of the line so far).

    >>> list(_lines(iter([b"a", b"b\\nc", b"d", b"", b"e\\n", b"f"])))
    [b'ab', b'cde', b'f']
    """
    held: list[bytes] = []
    for chunk in chunks:
        if b"\n" not in chunk:
            held.append(chunk)
            continue
        lines = chunk.split(b"\n")
        held.append(lines[0])
        lines[0] = b"".join(held)
        held = [lines.pop()]
        yield from lines
    rest = b"".join(held)
    if rest:
        yield rest


class JsonlSource(FileSource):
    core_kind = True

    def parts(self) -> Iterator[tuple[str, bool]]:
        with open(self.path, "rb") as f:
            self._stream = ByteStream(f, self.name)
            yield from self._records(_lines(self._stream.chunks()), 0)

    def parts_between(self, start: int, end: int) -> Iterator[tuple[str, bool]]:
        """The records of the lines in bytes ``[start, end)`` of an uncompressed file,
        ``start`` at the beginning of a line (a part read by one Ray task)."""
        with open(self.path, "rb") as f:
            f.seek(start)
            data = f.read(end - start)
        yield from self._records(iter(data.split(b"\n")), lambda: _newlines(self.path, start))

    def _records(self, lines: Iterator[bytes], lines_before) -> Iterator[tuple[str, bool]]:
        """The documents of ``lines``; ``lines_before`` (a number, or a function
        computing it only when an error needs it) numbers them in the file."""

        def where(n: int) -> str:
            return f"line {n + (lines_before if isinstance(lines_before, int) else lines_before())}"

        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            text = self._text(line, lambda n=n: where(n))
            if text is not None:
                yield from in_parts(text, self.options.part_chars)

    def _text(self, line: bytes, where: Callable[[], str]) -> str | None:
        """The text of a record that is not blank, or None for a bad record skipped;
        ``where()`` names its line."""
        try:
            record = json.loads(line)
        except (ValueError, UnicodeDecodeError) as e:
            why = "not UTF-8" if isinstance(e, UnicodeDecodeError) else f"not JSON ({e})"
            if where() == "line 1" and line.lstrip().startswith(b"["):
                why += "; a JSON array is not JSON Lines (one object per line)"
            self.options.skips.bad(self.name, where(), why)
            return None
        try:
            return text_of(record, self.options.field_path)
        except BadRecord as e:
            self.options.skips.bad(self.name, where(), str(e))
            return None

    def read_line(self, line: bytes, number: int) -> str | None:
        """Line ``number`` (from 1) as this source reads it, its lone surrogates made
        U+FFFD as encoding does: for the core's road, which reads the lines it can be
        sure of itself and hands the others (not JSON, ``NaN``, no string at the field,
        ...) here."""
        text = self._text(line, lambda: f"line {number}")
        if text is None:
            return None
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = without_surrogates(text)
        return text


def _newlines(path, end: int) -> int:
    """How many lines end before byte ``end`` of a file."""
    n = 0
    with open(path, "rb") as f:
        while end > 0 and (data := f.read(min(end, 1 << 24))):
            n += data.count(b"\n")
            end -= len(data)
    return n
