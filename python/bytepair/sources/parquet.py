"""Parquet: one document per row, the string column ``text_field`` (a dotted path
reaches into a struct column). Read in record batches, row group after row group,
so memory holds one batch, not the file. Needs pyarrow (``bytepair[corpora]``).

A batch holds about ``_BATCH_BYTES`` of data (rows counted from each row group's metadata),
not a fixed number of rows: with long documents a batch of 4096 rows is gigabytes,
and a batch larger than a row group makes pyarrow concatenate row groups — that copy
made reading Parquet slower than the counting it feeds. Each row group is sized
apart, so a file of short rows with a few 200 MB ones reads the long ones one at a
time. Arrow's own threads are off: the core counts on every core meanwhile."""

from __future__ import annotations

from collections.abc import Iterator

from bytepair.sources._extras import require
from bytepair.sources._records import BadRecord, text_of
from bytepair.sources.base import FileSource
from bytepair.sources.text import in_parts

SUFFIXES = (".parquet", ".pq")
_BATCH_ROWS = 4096
_BATCH_BYTES = 16 << 20


def batch_rows(group) -> int:
    """Rows per batch of a row group (its metadata): about ``_BATCH_BYTES`` of
    uncompressed data, at most the group (and ``_BATCH_ROWS``)."""
    per_row = group.total_byte_size / max(group.num_rows, 1)
    return max(1, min(_BATCH_ROWS, group.num_rows, int(_BATCH_BYTES / max(per_row, 1))))


class ParquetSource(FileSource):
    def parts(self, row_groups: range | None = None) -> Iterator[tuple[str, bool]]:
        """The documents, of the whole file or of some row groups (a Ray task's part)."""
        pq = require("pyarrow.parquet", "reading Parquet files")
        try:
            pf = pq.ParquetFile(self.path)
        except Exception as e:  # pyarrow raises its own ArrowInvalid, an Exception
            raise ValueError(f"{self.name}: not a readable Parquet file ({e})") from None
        path, skips = self.options.field_path, self.options.skips
        columns = pf.schema_arrow.names
        if path[0] not in columns:
            raise ValueError(
                f"{self.name}: no column {path[0]!r}; its columns: {', '.join(columns)} "
                "(choose one with text_field= / --text-field)"
            )
        meta = pf.metadata
        groups = range(meta.num_row_groups) if row_groups is None else row_groups
        row = sum(meta.row_group(i).num_rows for i in range(groups.start))
        batches = (
            batch
            for i in groups
            for batch in pf.iter_batches(
                batch_size=batch_rows(meta.row_group(i)),
                row_groups=[i],
                columns=[path[0]],
                use_threads=False,
            )
        )
        for batch in batches:
            for value in batch.column(0).to_pylist():
                row += 1
                try:
                    text = text_of({path[0]: value}, path)
                except BadRecord as e:
                    skips.bad(self.name, f"row {row}", str(e))
                    continue
                yield from in_parts(text, self.options.part_chars)
            # Progress: the file's size times the share of its rows read so far.
            self._done = self.size * row // max(pf.metadata.num_rows, 1)
