"""CSV input (``.csv``): a header row naming the columns, then one data row per record."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv

from ..settings import InputPolicy
from .protocol import Reject

_COUNT_BATCH_SIZE = 50_000  # larger than reading uses: fewer batches to sum, and none is kept


def _header(path: Path) -> list[str]:
    with path.open(encoding="utf-8-sig", errors="replace", newline="") as handle:
        return next(csv.reader(handle), [])


def _undecoded(path: Path, batch_size: int) -> pa.RecordBatchReader:
    """Every cell as bytes, so a byte that is not UTF-8 cannot stop the file."""
    return pa_csv.open_csv(
        path,
        read_options=pa_csv.ReadOptions(block_size=max(1 << 20, batch_size * 2048)),
        parse_options=pa_csv.ParseOptions(newlines_in_values=True),
        convert_options=pa_csv.ConvertOptions(
            column_types={name: pa.large_binary() for name in _header(path)},
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
    )


def _decoded_csv(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """CSV cells arrive as bytes; decode them as UTF-8, replacing what is not, and count the
    replaced characters per row (``replaced_characters``) so nothing is dropped silently."""
    for batch in batches:
        columns, replaced = [], np.zeros(batch.num_rows, dtype=np.int64)
        for column in batch.columns:
            try:
                columns.append(column.cast(pa.large_string()))
            except pa.ArrowInvalid:
                text = [value.decode("utf-8", errors="replace") for value in column.to_pylist()]
                replaced += np.array([value.count("\ufffd") for value in text], dtype=np.int64)
                columns.append(pa.array(text, pa.large_string()))
        yield pa.RecordBatch.from_arrays(
            [*columns, pa.array(replaced)], names=[*batch.schema.names, "replaced_characters"]
        )


class CsvReader:
    name = "csv"
    label = "CSV"
    columns_from_file = True

    def matches(self, path: Path) -> bool:
        return path.suffix.lower() == ".csv"

    def schema(self, path: Path) -> pa.Schema:
        return pa.schema(
            [(name, pa.large_string()) for name in _header(path)] + [("replaced_characters", pa.int64())]
        )

    def batches(
        self, path: Path, batch_size: int, policy: InputPolicy, reject: Reject
    ) -> Iterator[pa.RecordBatch]:
        """Every data row becomes a row; nothing is rejected here (validation may reject it later)."""
        return _decoded_csv(_undecoded(path, batch_size))

    def count(self, path: Path) -> int:
        """Data rows as Arrow's CSV parser splits them (a quoted newline stays in its row)."""
        return sum(batch.num_rows for batch in _undecoded(path, _COUNT_BATCH_SIZE))


READER = CsvReader()
