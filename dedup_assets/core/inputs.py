"""Reading and validating the document input (CSV or Parquet with the six base columns).

The input is streamed in Arrow batches, so memory follows the batch size, not the file. Each
batch is validated as it passes; a repeated ``doc_id`` is found once the last batch is read.
Rows are numbered ``input_row`` (1-based data rows, header not counted) so every error and every
output row can be traced back to the file.
"""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from .warc import WARC_COLUMNS, count_warc_records, is_warc, warc_batches

REQUIRED_COLUMNS = ["doc_id", "source", "domain", "crawled_at", "title", "body"]
TEXT_COLUMNS = ["doc_id", "source", "domain", "title", "body"]
SUPPORTED_SUFFIXES = (".csv", ".parquet")
_EXAMPLES_SHOWN = 5


class InputError(ValueError):
    """The input cannot be used as it is; the message says where and what to fix."""


@dataclass(frozen=True)
class InputFile:
    path: str
    byte_size: int
    sha256: str


@dataclass(frozen=True)
class InputPolicy:
    """What to do with a row that cannot be a document."""

    max_body_bytes: int = 10_000_000
    fail_on_reject: bool = False


REJECTED_SCHEMA = pa.schema(
    [
        ("source_file", pa.string()),
        ("input_row", pa.int64()),
        ("doc_id", pa.string()),
        ("reason", pa.string()),
        ("detail", pa.string()),
    ]
)


@dataclass
class InputStats:
    """Filled in while the stream is read: every input row is counted once, either as a
    document or in ``rejected``."""

    rows: int = 0
    documents: int = 0
    empty_bodies: int = 0
    extra_columns: list[str] = field(default_factory=list)
    rejected: list[dict] = field(default_factory=list)
    rejected_by_reason: dict[str, int] = field(default_factory=dict)

    def rejected_table(self) -> pa.Table:
        return pa.Table.from_pylist(self.rejected, schema=REJECTED_SCHEMA)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def describe_input(path: Path) -> InputFile:
    return InputFile(str(path), path.stat().st_size, file_sha256(path))


def _rows_list(rows: np.ndarray) -> str:
    shown = ", ".join(str(int(row)) for row in rows[:_EXAMPLES_SHOWN])
    more = len(rows) - min(len(rows), _EXAMPLES_SHOWN)
    return f"row{'s' if len(rows) > 1 else ''} {shown}" + (f" and {more} more" if more else "")


def check_file(path: Path) -> None:
    """Fail early, with what to do, when the path cannot be an input file."""
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES and not is_warc(path):
        raise InputError(
            f"{path}: unsupported file type '{path.suffix or '(none)'}'. Give a .csv or .parquet "
            "file with the columns " + ", ".join(REQUIRED_COLUMNS) + ", or a .warc/.warc.gz "
            "crawl (set DEDUP_INPUT)."
        )
    if not path.exists():
        raise InputError(f"{path}: no such file. Set DEDUP_INPUT to a CSV or Parquet file.")
    if not path.is_file():
        raise InputError(f"{path}: not a file. Set DEDUP_INPUT to a CSV or Parquet file.")
    if path.stat().st_size == 0:
        raise InputError(
            f"{path}: the file is empty. Expected a header row with the columns "
            + ", ".join(REQUIRED_COLUMNS)
            + " and one row per document."
        )


def _csv_header(path: Path) -> list[str]:
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            return next(csv.reader(handle), [])
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not valid UTF-8 at byte {error.start}. Re-encode the file as UTF-8.") from None


def _raw_batches(path: Path, batch_size: int) -> tuple[list[str], Iterator[pa.RecordBatch]]:
    if path.suffix.lower() == ".csv":
        header = _csv_header(path)
        reader = pa_csv.open_csv(
            path,
            read_options=pa_csv.ReadOptions(block_size=max(1 << 20, batch_size * 2048)),
            parse_options=pa_csv.ParseOptions(newlines_in_values=True),
            convert_options=pa_csv.ConvertOptions(
                column_types={name: pa.large_string() for name in header},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
        return header, iter(reader)
    # DuckDB decodes Parquet on all cores, several times faster than a single-threaded
    # iter_batches, and keeps the file's row order.
    reader_db = duckdb.connect(config={"memory_limit": "512MB"})
    reader_db.execute("set enable_progress_bar = false")
    reader = reader_db.read_parquet(str(path))
    return reader.columns, reader.to_arrow_reader(batch_size)


def _text(column: pa.Array) -> pa.Array:
    return pc.fill_null(column.cast(pa.large_string()), "")


def _timestamps(column: pa.Array) -> pa.Array:
    """``crawled_at`` as UTC microseconds without zone; null where it does not parse."""
    if pa.types.is_timestamp(column.type):
        utc = column if column.type.tz else pc.assume_timezone(column, "UTC")
        parsed = utc.cast(pa.timestamp("us", tz="UTC"))
    else:
        parsed = _parse_iso8601(pc.utf8_trim_whitespace(_text(column)))
    return parsed.cast(pa.timestamp("us", tz="UTC")).cast(pa.timestamp("us"))


_ISO_FORMATS = ("%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%d %H:%M:%S%z", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d")


def _parse_iso8601(text: pa.Array) -> pa.Array:
    """Arrow's ISO 8601 cast handles the common forms at C speed; values it rejects get a second
    chance per format, and what still fails stays null."""
    try:
        return text.cast(pa.timestamp("us", tz="UTC"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    normalized = pc.replace_substring_regex(text, r"Z$", "+0000")
    normalized = pc.replace_substring_regex(normalized, r"([+-]\d\d):(\d\d)$", r"\1\2")
    normalized = pc.replace_substring_regex(normalized, r"\.\d+", "")
    result = pa.nulls(len(text), pa.timestamp("us", tz="UTC"))
    for pattern in _ISO_FORMATS:
        attempt = pc.strptime(normalized, format=pattern, unit="us", error_is_null=True)
        if attempt.type.tz is None:
            attempt = pc.assume_timezone(attempt, "UTC")
        result = pc.coalesce(result, attempt.cast(pa.timestamp("us", tz="UTC")))
    return result


def document_batches(
    path: Path, stats: InputStats, batch_size: int = 20_000, policy: InputPolicy | None = None
) -> Iterator[pa.RecordBatch]:
    """Validated batches: ``doc_id, source, domain, crawled_at, title, body``, then the input's
    extra columns, then ``input_row``.

    A row with a problem is left out and recorded in ``stats.rejected`` with its reason
    (``missing_field``, ``invalid_crawled_at``, ``too_large``, ``duplicate_doc_id``; the first
    row with a given doc_id is kept), unless ``policy.fail_on_reject``, which raises
    :class:`InputError` instead. A problem with the whole input always raises."""
    policy = policy or InputPolicy()
    check_file(path)
    first_rows: dict[str, int] = {}

    def reject_record(number: int, doc_id: str, reason: str, detail: str) -> None:
        stats.rows += 1
        if policy.fail_on_reject:
            raise InputError(f"{path}: record {number} (doc_id '{doc_id}'): {reason}: {detail}.")
        _record_reject(stats, path, number, doc_id, reason, detail)

    try:
        if is_warc(path):
            columns = WARC_COLUMNS
            raw = warc_batches(path, batch_size, policy.max_body_bytes, reject_record)
        else:
            columns, raw = _raw_batches(path, batch_size)
        missing = [column for column in REQUIRED_COLUMNS if column not in columns]
        if missing:
            raise InputError(
                f"{path}: missing required column(s) {', '.join(missing)}. Found: "
                f"{', '.join(columns) or '(none)'}. Every input needs "
                + ", ".join(REQUIRED_COLUMNS)
                + "."
            )
        stats.extra_columns = [c for c in columns if c not in REQUIRED_COLUMNS and c != "input_row"]
        for batch in raw:
            if batch.num_rows == 0:
                continue
            first_row = stats.rows + 1
            stats.rows += batch.num_rows
            standard = _standardize(path, batch, first_row, stats.extra_columns)
            keep = _screen(path, standard, policy, first_rows, stats)
            accepted = standard.filter(keep)
            stats.documents += accepted.num_rows
            stats.empty_bodies += int(
                pc.sum(pc.equal(pc.utf8_trim_whitespace(accepted.column("body")), "")).as_py() or 0
            )
            yield accepted
    except (pa.ArrowInvalid, OSError, duckdb.Error) as error:
        kind = "CSV" if path.suffix.lower() == ".csv" else "WARC" if is_warc(path) else "Parquet"
        detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        if "utf8" in detail.lower():
            raise InputError(f"{path}: has bytes that are not valid UTF-8 ({detail}). Re-encode the file as UTF-8.") from None
        raise InputError(f"{path}: cannot be read as {kind}: {detail}") from None
    if stats.rows == 0:
        raise InputError(f"{path}: has no document rows or records.")


def _standardize(path: Path, batch: pa.RecordBatch, first_row: int, extra: list[str]) -> pa.RecordBatch:
    """The six columns as text (``crawled_at`` as a UTC timestamp, null where it does not
    parse), the extra columns as they are, and ``input_row``."""
    arrays = {name: _text(batch.column(name)) for name in TEXT_COLUMNS}
    arrays["doc_id"] = pc.utf8_trim_whitespace(arrays["doc_id"])
    arrays["crawled_at"] = _timestamps(batch.column("crawled_at"))
    rows = (
        batch.column("input_row")  # record numbers, when the source skipped some records
        if "input_row" in batch.schema.names
        else pa.array(np.arange(first_row, first_row + batch.num_rows, dtype=np.int64))
    )
    names = REQUIRED_COLUMNS + extra + ["input_row"]
    values = [arrays[name] for name in REQUIRED_COLUMNS] + [batch.column(name) for name in extra] + [rows]
    return pa.RecordBatch.from_arrays(values, names=names)


def _screen(
    path: Path, batch: pa.RecordBatch, policy: InputPolicy, first_rows: dict[str, int], stats: InputStats
) -> np.ndarray:
    """Which rows to keep; the others are recorded as rejected (or raise, when strict)."""
    doc_ids = batch.column("doc_id").to_pylist()
    input_rows = batch.column("input_row").to_numpy()
    empty_id = pc.equal(batch.column("doc_id"), "").to_numpy(zero_copy_only=False)
    bad_date = batch.column("crawled_at").is_null().to_numpy(zero_copy_only=False)
    body_bytes = pc.binary_length(batch.column("body").cast(pa.large_binary())).to_numpy()
    too_large = body_bytes > policy.max_body_bytes
    rejects: list[tuple[int, str, str, str]] = []
    keep = np.ones(batch.num_rows, dtype=bool)
    for index, doc_id in enumerate(doc_ids):
        row = int(input_rows[index])
        if empty_id[index]:
            rejects.append((row, doc_id, "missing_field", "doc_id is empty"))
        elif bad_date[index]:
            rejects.append((row, doc_id, "invalid_crawled_at", "crawled_at is missing or not ISO 8601 (for example 2026-01-31 or 2026-01-31T12:00:00Z)"))
        elif too_large[index]:
            rejects.append((row, doc_id, "too_large", f"body has {int(body_bytes[index]):,} bytes, above max_body_bytes={policy.max_body_bytes:,}"))
        elif doc_id in first_rows:
            rejects.append((row, doc_id, "duplicate_doc_id", f"doc_id first seen at row {first_rows[doc_id]}"))
        else:
            first_rows[doc_id] = row
            continue
        keep[index] = False
    if rejects and policy.fail_on_reject:
        raise InputError(_strict_message(path, rejects, first_rows))
    for row, doc_id, reason, detail in rejects:
        _record_reject(stats, path, row, doc_id, reason, detail)
    return keep


def _record_reject(stats: InputStats, path: Path, row: int, doc_id: str, reason: str, detail: str) -> None:
    stats.rejected.append(
        {"source_file": str(path), "input_row": row, "doc_id": doc_id, "reason": reason, "detail": detail}
    )
    stats.rejected_by_reason[reason] = stats.rejected_by_reason.get(reason, 0) + 1


def _strict_message(path: Path, rejects: list[tuple[int, str, str, str]], first_rows: dict[str, int]) -> str:
    row, doc_id, reason, detail = rejects[0]
    rows = np.array([r for r, _, why, _ in rejects if why == reason])
    if reason == "missing_field":
        return f"{path}: column doc_id is empty at {_rows_list(rows)}. Every document needs a unique, non-empty doc_id."
    if reason == "invalid_crawled_at":
        return (
            f"{path}: column crawled_at cannot be parsed at {_rows_list(rows)} (doc_id '{doc_id}'). "
            "Use ISO 8601, for example 2026-01-31 or 2026-01-31T12:00:00Z."
        )
    if reason == "too_large":
        return f"{path}: row {row} (doc_id '{doc_id}'): {detail}. Raise max_body_bytes or remove the row."
    return (
        f"{path}: column doc_id repeats '{doc_id}' at rows {first_rows[doc_id]}, {row}. "
        "Give each document a unique doc_id."
    )


def read_documents(path: Path, batch_size: int = 20_000, policy: InputPolicy | None = None) -> pa.Table:
    """The whole validated input as one Arrow table (for small inputs and tests)."""
    stats = InputStats()
    batches = list(document_batches(path, stats, batch_size, policy))
    return pa.Table.from_batches(batches)


def count_input_records(path: Path) -> int:
    """Data rows or records in the input, counted independently of the validating reader."""
    if is_warc(path):
        return count_warc_records(path)
    if path.suffix.lower() == ".csv":
        return sum(batch.num_rows for batch in _raw_batches(path, 50_000)[1])
    return int(duckdb.connect().execute("select count(*) from read_parquet(?)", [str(path)]).fetchall()[0][0])
