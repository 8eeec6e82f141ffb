"""Hugging Face ``datasets`` objects: a ``Dataset`` or ``IterableDataset``, or one split
of a ``DatasetDict`` (``dd["train"]`` or ``(dd, "train")``); one document per row, the
string at ``text_field``. Recognised without importing ``datasets`` (the caller has)."""

from __future__ import annotations

from collections.abc import Iterator

from bytepair.sources._records import BadRecord, text_of
from bytepair.sources.base import Options, texts_of
from bytepair.sources.text import in_parts

_ROWS = ("Dataset", "IterableDataset")
_SPLITS = ("DatasetDict", "IterableDatasetDict")
_BATCH_ROWS = 1000


def _kind(obj: object) -> str | None:
    cls = type(obj)
    if cls.__module__.split(".")[0] != "datasets":
        return None
    for base in cls.__mro__:
        if base.__name__ in _ROWS + _SPLITS:
            return base.__name__
    return None


def is_dataset(obj: object) -> bool:
    """A datasets object, or a ``(DatasetDict, split)`` pair."""
    if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[1], str):
        return _kind(obj[0]) in _SPLITS
    return _kind(obj) is not None


class DatasetSource:
    def __init__(self, obj: object, options: Options) -> None:
        split = None
        if isinstance(obj, tuple):
            obj, split = obj
        kind = _kind(obj)
        if kind in _SPLITS:
            splits = ", ".join(obj)
            if split is None:
                raise ValueError(
                    f"a {kind} holds splits ({splits}); pass one: dd['train'] or (dd, 'train')"
                )
            if split not in obj:
                raise ValueError(f"{kind} has no split {split!r}; its splits: {splits}")
            obj = obj[split]
        self.dataset = obj
        self.name = f"{type(obj).__name__}" + (f"[{split!r}]" if split else "")
        self.options = options
        self.size = None
        self.consumed = 0

    def _values(self) -> Iterator[object]:
        """The top-level field of each row, read in column batches."""
        key = self.options.field_path[0]
        for batch in self.dataset.iter(batch_size=_BATCH_ROWS):
            if key not in batch:
                raise ValueError(
                    f"{self.name}: no column {key!r}; its columns: {', '.join(batch)} "
                    "(choose one with text_field=)"
                )
            yield from batch[key]

    def documents(self) -> Iterator[str]:
        return texts_of(self.parts())

    def parts(self) -> Iterator[tuple[str, bool]]:
        path, skips = self.options.field_path, self.options.skips
        for row, value in enumerate(self._values(), 1):
            try:
                text = text_of({path[0]: value}, path)
            except BadRecord as e:
                skips.bad(self.name, f"row {row}", str(e))
                continue
            self.consumed += len(text)
            yield from in_parts(text, self.options.part_chars)
