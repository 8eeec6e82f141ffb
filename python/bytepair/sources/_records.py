"""What record sources (JSON Lines, Parquet, datasets) share: finding the text field
in a record, and bad records — an error naming the input and the record, or, with
``skip_bad_records=True``, counted and reported when the corpus has been read."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field


class BadRecord(ValueError):
    """A record without usable text; the message says why, the caller says where."""


def text_of(record: object, path: list[str]) -> str:
    """The string at a dotted path (``["meta", "body"]``) of a record.

    >>> text_of({"meta": {"body": "hi"}}, ["meta", "body"])
    'hi'
    >>> text_of({"text": 3}, ["text"])
    Traceback (most recent call last):
    ...
    bytepair.sources._records.BadRecord: field 'text' is of type int, not a string
    """
    value = record
    for n, key in enumerate(path):
        if not isinstance(value, dict) or key not in value:
            where = ".".join(path[:n]) or "the record"
            keys = ", ".join(map(str, value)) if isinstance(value, dict) else type(value).__name__
            raise BadRecord(f"no field {'.'.join(path)!r} ({where} has: {keys})")
        value = value[key]
    if not isinstance(value, str):
        what = "null" if value is None else f"of type {type(value).__name__}"
        raise BadRecord(f"field {'.'.join(path)!r} is {what}, not a string")
    return value


@dataclass
class Skips:
    """Bad records: raised at once, or (``skip=True``) counted per input and reported."""

    skip: bool
    counts: dict[str, int] = field(default_factory=dict)
    first: list[str] = field(default_factory=list)

    def bad(self, name: str, where: str, why: str) -> None:
        message = f"{name}: {where}: {why}"
        if not self.skip:
            raise ValueError(message + " (skip_bad_records=True / --skip-bad-records skips it)")
        self.counts[name] = self.counts.get(name, 0) + 1
        if len(self.first) < 3:
            self.first.append(message)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def report(self) -> None:
        """A warning saying how many records were skipped, where, and the first few why."""
        if not self.total:
            return
        per_input = ", ".join(f"{name} ({n:,})" for name, n in self.counts.items())
        warnings.warn(
            f"skipped {self.total:,} bad record(s): {per_input}; first: " + "; ".join(self.first),
            stacklevel=2,
        )
