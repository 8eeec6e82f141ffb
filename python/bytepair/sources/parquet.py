"""Parquet: one document per row, the string column ``text_field`` (a dotted path
reaches into a struct column). Read in record batches, row group after row group,
so memory holds one batch, not the file. Needs pyarrow (``bytepair[corpora]``)."""

from __future__ import annotations

from collections.abc import Iterator

from bytepair.sources._extras import require
from bytepair.sources._records import BadRecord, text_of
from bytepair.sources.base import FileSource

SUFFIXES = (".parquet", ".pq")
_BATCH_ROWS = 4096


class ParquetSource(FileSource):
    def documents(self) -> Iterator[str]:
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
        row = 0
        for batch in pf.iter_batches(batch_size=_BATCH_ROWS, columns=[path[0]]):
            for value in batch.column(0).to_pylist():
                row += 1
                try:
                    yield text_of({path[0]: value}, path)
                except BadRecord as e:
                    skips.bad(self.name, f"row {row}", str(e))
            # Progress: the file's size times the share of its rows read so far.
            self._done = self.size * row // max(pf.metadata.num_rows, 1)
