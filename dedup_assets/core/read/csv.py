"""CSV input (``.csv``): a header row naming the columns, then one data row per record.

A strict scan of the file (``csv_scan``) finds the records that cannot be rows: a quote never
closed, text after a closing quote, a field count other than the header's. Those are rejected
with their line; Arrow's C parser reads the others, given only their bytes and a block that holds
the largest row. The count is the scan's, while the rows come from what Arrow yields, so a row
that Arrow splits or joins differently from the scan shows as a difference in the accounting.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv

from ..settings.input import InputPolicy
from . import csv_scan
from .csv_scan import (
    BAD_FIELDS,
    BAD_LINE,
    BAD_PROBLEM,
    BAD_PROBLEM_LINE,
    BAD_RECORD,
    BAD_RESUME,
    BAD_START,
    FIELD_COUNT,
    TEXT_AFTER_QUOTE,
    TOO_LARGE,
    UNCLOSED_QUOTE,
    CsvScan,
    file_bytes,
)
from .encoding import ReplacedRows, replaced_characters
from .protocol import BySuffix, Reject


def _header(path: Path) -> list[str]:
    names, _ = csv_scan.header(path, file_bytes(path))
    return names


class _GoodBytes(io.RawIOBase):
    """The file's bytes from ``start`` on, without the byte ranges ``skips`` ([start, end) rows,
    in file order): the well-formed records, for Arrow to parse."""

    def __init__(self, path: Path, start: int, skips: np.ndarray):
        self._file = path.open("rb", buffering=0)
        self._position, self._end = start, path.stat().st_size
        self._skips = skips.tolist()
        self._next_skip = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        # Whole blocks, however many skipped ranges they span: Arrow takes a block that holds only
        # the "\n" of a "\r\n" split between blocks for the end of the file, and drops the rows
        # after it.
        wanted = self._end if size < 0 else size
        pieces = []
        while wanted > 0:
            skips, index = self._skips, self._next_skip
            while index < len(skips) and skips[index][0] <= self._position:
                self._position = max(self._position, skips[index][1])
                index += 1
            self._next_skip = index
            stop = skips[index][0] if index < len(skips) else self._end
            self._file.seek(self._position)
            piece = self._file.read(min(wanted, stop - self._position))
            if not piece:
                break
            pieces.append(piece)
            self._position += len(piece)
            wanted -= len(piece)
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def close(self) -> None:
        self._file.close()
        super().close()


def _rows(path: Path, scan: CsvScan, batch_size: int) -> Iterator[pa.RecordBatch]:
    """The well-formed records, every cell as bytes so that a byte that is not UTF-8 cannot stop
    the file."""
    skips = scan.bad[:, [BAD_START, BAD_RESUME]]
    good_bytes = path.stat().st_size - scan.data_start - int((skips[:, 1] - skips[:, 0]).sum())
    if good_bytes == 0:  # Arrow calls a file without bytes an error, not one without rows
        return
    if len(skips):
        source = _GoodBytes(path, scan.data_start, skips)
    else:  # the common case: Arrow reads the mapped file itself, with no copy through Python
        source = pa.memory_map(str(path))
        source.seek(scan.data_start)
    with source:
        yield from pa_csv.open_csv(
            source,
            read_options=pa_csv.ReadOptions(
                block_size=max(1 << 20, batch_size * 2048, scan.largest), column_names=scan.names
            ),
            parse_options=pa_csv.ParseOptions(newlines_in_values=True),
            convert_options=pa_csv.ConvertOptions(
                column_types={name: pa.large_binary() for name in scan.names},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )


def row_limit(max_body_bytes: int) -> int:
    """The bytes a row may have: a body within ``max_body_bytes``, with every quote doubled, and
    room for the other fields. A larger row is rejected unparsed, so a row takes memory bounded
    by the limit."""
    return 2 * max_body_bytes + (1 << 20)


def _decoded_csv(batch: pa.RecordBatch) -> tuple[list[pa.Array], np.ndarray, int]:
    """CSV cells arrive as bytes; decode them as UTF-8, replacing what is not, and count the
    replaced characters per row (``replaced_characters``) so nothing is dropped silently. Also
    the batch's bytes."""
    columns, replaced = [], np.zeros(batch.num_rows, dtype=np.int64)
    size = 0
    for column in batch.columns:
        size += column.nbytes
        try:
            columns.append(column.cast(pa.large_string()))
        except pa.ArrowInvalid:
            raw = column.to_pylist()
            text = [value.decode("utf-8", errors="replace") for value in raw]
            replaced += np.array([replaced_characters(*pair) for pair in zip(raw, text)], dtype=np.int64)
            columns.append(pa.array(text, pa.large_string()))
    return columns, replaced, size


def _detail(bad: np.ndarray, header_fields: int, max_body_bytes: int) -> str:
    line, problem_line = int(bad[BAD_LINE]), int(bad[BAD_PROBLEM_LINE])
    problem = int(bad[BAD_PROBLEM])
    there = "here" if problem_line == line else f"on line {problem_line}"
    if problem == UNCLOSED_QUOTE:
        return (
            f"line {line}: a quoted field opened {there} is never closed (rows are read on from "
            f'line {line + 1}); close the quote, and write a quote inside a quoted field as ""'
        )
    if problem == TEXT_AFTER_QUOTE:
        return (
            f"line {line}: a quoted field closed {there} is followed by text, not by a comma or "
            "the line's end; write a quote inside a quoted field as \"\""
        )
    if problem == FIELD_COUNT:
        runs_on = "" if problem_line == line else f" (the row runs to line {problem_line})"
        fields = int(bad[BAD_FIELDS])
        hint = "; quote a field that has a comma in it" if fields > header_fields else ""
        return f"line {line}: has {fields} fields, the header has {header_fields}{runs_on}{hint}"
    size = int(bad[BAD_RESUME] - bad[BAD_START])
    limit = min(row_limit(max_body_bytes), csv_scan.MAX_ROW_BYTES)
    return (
        f"line {line}: the row has {size:,} bytes, above the {limit:,} a CSV row may have with "
        f"max_body_bytes={max_body_bytes:,}; raise max_body_bytes or remove the row"
    )


def _reject_malformed(bad: np.ndarray, header_fields: int, max_body_bytes: int, reject: Reject) -> None:
    for row in bad:
        reason = "too_large" if row[BAD_PROBLEM] == TOO_LARGE else "malformed_row"
        reject(int(row[BAD_RECORD]), "", reason, _detail(row, header_fields, max_body_bytes))


class CsvReader(BySuffix):
    name = "csv"
    label = "CSV"
    suffixes = (".csv",)
    columns_from_file = True
    appended_columns = ("replaced_characters", "input_row")

    def schema(self, path: Path) -> pa.Schema:
        return pa.schema(
            [(name, pa.large_string()) for name in _header(path)]
            + [(name, pa.int64()) for name in self.appended_columns]
        )

    def batches(
        self, path: Path, batch_size: int, policy: InputPolicy, reject: Reject
    ) -> Iterator[pa.RecordBatch]:
        """Every well-formed data row becomes a row, numbered ``input_row`` (blank lines are not
        rows); a malformed one goes to ``reject`` as ``malformed_row`` with its line, or as
        ``too_large`` beyond :func:`row_limit`. A file whose rows are mostly not UTF-8 is refused
        (:class:`.encoding.ReplacedRows`). Validation may reject rows later."""
        max_body_bytes = policy.max_body_bytes
        scan = csv_scan.scan(path, file_bytes(path), row_limit(max_body_bytes))
        names, bad, reported, rows_read = scan.names, scan.bad, 0, 0
        replaced_rows = ReplacedRows(path)
        # the n-th good record is record n plus the malformed ones before it; this is how many
        # good records come before each malformed one
        good_before = bad[:, BAD_RECORD] - 1 - np.arange(len(bad))
        for batch in _rows(path, scan, batch_size):
            if batch.num_rows == 0:
                continue
            ordinals = np.arange(rows_read + 1, rows_read + batch.num_rows + 1, dtype=np.int64)
            numbers = ordinals + np.searchsorted(good_before, ordinals - 1, side="right")
            rows_read += batch.num_rows
            # the malformed records before this batch's last row first, so that the first
            # problem a strict run meets is roughly the first in the file
            until = int(np.searchsorted(bad[:, BAD_RECORD], numbers[-1]))
            _reject_malformed(bad[reported:until], len(names), max_body_bytes, reject)
            reported = until
            columns, replaced, size = _decoded_csv(batch)
            replaced_rows.add(batch.num_rows, int(np.count_nonzero(replaced)), size)
            yield pa.RecordBatch.from_arrays(
                [*columns, pa.array(replaced), pa.array(numbers)],
                names=[*names, "replaced_characters", "input_row"],
            )
        _reject_malformed(bad[reported:], len(names), max_body_bytes, reject)
        replaced_rows.finish()

    def count(self, path: Path) -> int:
        """Data records as the strict scan sees them: a quoted line end stays in its row, and a
        malformed record counts once however many lines it ran over."""
        return csv_scan.scan(path, file_bytes(path)).records


READER = CsvReader()
