"""Parquet input (``.parquet``): one row per record, columns typed by the file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from ..settings.input import InputPolicy
from ..storage.tables import duckdb_file
from .protocol import BySuffix, InputError, Reject


class ParquetReader(BySuffix):
    name = "parquet"
    label = "Parquet"
    suffixes = (".parquet",)
    columns_from_file = True
    appended_columns = ()

    def schema(self, path: Path) -> pa.Schema:
        try:
            return pq.read_schema(path)
        except (pa.ArrowInvalid, OSError) as error:
            raise InputError(f"{path}: cannot be read as Parquet: {str(error).strip().splitlines()[0]}") from None

    def batches(
        self, path: Path, batch_size: int, policy: InputPolicy, reject: Reject
    ) -> Iterator[pa.RecordBatch]:
        """Every row of the file becomes a row; nothing is rejected here (validation may reject it
        later)."""
        # DuckDB decodes Parquet on all cores (pyarrow's iter_batches uses one) and keeps the
        # file's row order.
        reader_db = duckdb.connect(config={"memory_limit": "512MB"})
        reader_db.execute("set enable_progress_bar = false")
        name = duckdb_file(path)
        if name is None:  # a name DuckDB cannot give literally; it reads the open file instead
            return _batches_of_open_file(reader_db, path, batch_size)
        return reader_db.read_parquet(name).to_arrow_reader(batch_size)

    def count(self, path: Path) -> int:
        """The row count the file's footer records."""
        return pq.ParquetFile(path).metadata.num_rows


def _batches_of_open_file(reader_db: duckdb.DuckDBPyConnection, path: Path, batch_size: int) -> Iterator[pa.RecordBatch]:
    with path.open("rb") as handle:
        yield from reader_db.read_parquet(handle).to_arrow_reader(batch_size)


READER = ParquetReader()
