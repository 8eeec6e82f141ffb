"""JSON Lines (``.jsonl``, ``.json``, ``.ndjson``; compressed too): one document per line,
the string at ``text_field`` (a dotted path reaches into nested objects: ``meta.body``).

Blank lines are not records. A line that is not JSON, or has no string at the field,
is an error naming the file and line — or, with ``skip_bad_records``, counted and
reported at the end.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from bytepair.sources._records import BadRecord, text_of
from bytepair.sources._stream import ByteStream
from bytepair.sources.base import FileSource

SUFFIXES = (".jsonl", ".json", ".ndjson")


def _lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    rest = b""
    for chunk in chunks:
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        yield from lines
    if rest:
        yield rest


class JsonlSource(FileSource):
    def documents(self) -> Iterator[str]:
        path, skips = self.options.field_path, self.options.skips
        with open(self.path, "rb") as f:
            self._stream = ByteStream(f, self.name)
            for line_no, line in enumerate(_lines(self._stream.chunks()), 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except (ValueError, UnicodeDecodeError) as e:
                    why = "not UTF-8" if isinstance(e, UnicodeDecodeError) else f"not JSON ({e})"
                    if line_no == 1 and line.lstrip().startswith(b"["):
                        why += "; a JSON array is not JSON Lines (one object per line)"
                    skips.bad(self.name, f"line {line_no}", why)
                    continue
                try:
                    yield text_of(record, path)
                except BadRecord as e:
                    skips.bad(self.name, f"line {line_no}", str(e))
