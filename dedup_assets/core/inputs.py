"""Reading and validating the document input (CSV or Parquet with the six base columns).

The input is streamed in Arrow batches, so memory follows the batch size, not the file. Each
batch is validated as it passes; a repeated ``doc_id`` is found in the batch that repeats it
(``doc_ids.FirstSeen`` remembers every id so far, as UTF-8 bytes).
Rows are numbered ``input_row`` (1-based data rows, header not counted) so every error and every
output row can be traced back to the file.
"""

from __future__ import annotations

import csv
import glob
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from .columns import REQUIRED_COLUMNS, Reject
from .doc_ids import FirstSeen
from .settings import DEFAULT_BATCH_SIZE, SOURCE_FORMATS, InputPolicy
from .jsonl import JSONL_SCHEMA, count_jsonl_records, is_jsonl, jsonl_batches
from .warc import WARC_SCHEMA, count_warc_records, is_warc, warc_batches

TEXT_COLUMNS = ["doc_id", "source", "domain", "title", "body"]
SUPPORTED_NAMES = ".csv, .parquet, .jsonl, .jsonl.gz, .json.gz, .warc or .warc.gz"
_EXAMPLES_SHOWN = 5



class InputError(ValueError):
    """The input cannot be used as it is; the message says where and what to fix."""


@dataclass(frozen=True)
class InputFile:
    path: str
    byte_size: int
    sha256: str


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
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def describe_input(source: Path, source_format: str | None = None) -> InputFile:
    """Size and sha256 of the input; for a folder or glob, a sha256 over each file's name and
    sha256, so any change to any file changes it. Checks every file first."""
    paths = input_files(source, source_format)
    for path in paths:
        check_file(path, source_format)
    if paths == [source]:
        return InputFile(str(source), source.stat().st_size, file_sha256(source))
    digest = hashlib.sha256()
    for path in paths:
        digest.update(f"{path}\0{file_sha256(path)}\n".encode("utf-8"))
    return InputFile(str(source), sum(path.stat().st_size for path in paths), digest.hexdigest())


def _rows_list(rows: np.ndarray) -> str:
    shown = ", ".join(str(int(row)) for row in rows[:_EXAMPLES_SHOWN])
    more = len(rows) - min(len(rows), _EXAMPLES_SHOWN)
    return f"row{'s' if len(rows) > 1 else ''} {shown}" + (f" and {more} more" if more else "")




def input_kind(path: Path, source_format: str | None = None) -> str | None:
    """The reader for a file: ``source_format`` when set, else from the file name."""
    if source_format:
        if source_format not in SOURCE_FORMATS:
            raise InputError(
                f"source_format must be one of {', '.join(SOURCE_FORMATS)} (or unset to use the "
                f"file extension), got {source_format!r}"
            )
        return source_format
    if is_warc(path):
        return "warc"
    if is_jsonl(path):
        return "jsonl"
    return {".csv": "csv", ".parquet": "parquet"}.get(path.suffix.lower())


def input_files(source: Path, source_format: str | None = None) -> list[Path]:
    """The files of an input: one file, every supported file under a folder, or a glob's
    matches, in sorted order."""
    if any(character in str(source) for character in "*?["):
        files = sorted(Path(match) for match in glob.glob(str(source), recursive=True))
        files = [path for path in files if path.is_file()]
        if not files:
            raise InputError(f"{source}: the pattern matches no file. Check DEDUP_INPUT.")
        return files
    if source.is_dir():
        files = sorted(
            path for path in source.rglob("*") if path.is_file() and input_kind(path, source_format)
        )
        if not files:
            raise InputError(f"{source}: the folder has no {SUPPORTED_NAMES} file. Check DEDUP_INPUT.")
        return files
    return [source]


def check_file(path: Path, source_format: str | None = None) -> None:
    """Fail early, with what to do, when the path cannot be an input file."""
    if input_kind(path, source_format) is None:
        raise InputError(
            f"{path}: unsupported file type '{path.suffix or '(none)'}'. Give a .csv or .parquet "
            "file with the columns " + ", ".join(REQUIRED_COLUMNS) + f", or any {SUPPORTED_NAMES} "
            "file, folder or glob (set DEDUP_INPUT), or set source_format."
        )
    if not path.exists():
        raise InputError(f"{path}: no such file. Set DEDUP_INPUT to an input file, folder or glob.")
    if not path.is_file():
        raise InputError(f"{path}: not a file. Set DEDUP_INPUT to an input file, folder or glob.")
    if path.stat().st_size == 0:
        raise InputError(
            f"{path}: the file is empty. Expected a header row with the columns "
            + ", ".join(REQUIRED_COLUMNS)
            + " and one row per document."
        )


def _csv_header(path: Path) -> list[str]:
    with path.open(encoding="utf-8-sig", errors="replace", newline="") as handle:
        return next(csv.reader(handle), [])


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


def _source_schema(path: Path, kind: str) -> pa.Schema:
    """The columns a file brings, read from its header or metadata only."""
    if kind == "csv":
        return pa.schema(
            [(name, pa.large_string()) for name in _csv_header(path)] + [("replaced_characters", pa.int64())]
        )
    if kind == "parquet":
        try:
            return pq.read_schema(path)
        except (pa.ArrowInvalid, OSError) as error:
            raise InputError(f"{path}: cannot be read as Parquet: {str(error).strip().splitlines()[0]}") from None
    return WARC_SCHEMA if kind == "warc" else JSONL_SCHEMA


def _raw_batches(
    path: Path, batch_size: int, policy: InputPolicy, reject: Reject | None
) -> Iterator[pa.RecordBatch]:
    kind = input_kind(path, policy.source_format)
    if kind == "warc":
        return warc_batches(path, batch_size, policy.max_body_bytes, reject)
    if kind == "jsonl":
        return jsonl_batches(path, batch_size, policy.jsonl_fields, reject)
    if kind == "csv":
        header = _csv_header(path)
        return _decoded_csv(
            pa_csv.open_csv(
                path,
                read_options=pa_csv.ReadOptions(block_size=max(1 << 20, batch_size * 2048)),
                parse_options=pa_csv.ParseOptions(newlines_in_values=True),
                convert_options=pa_csv.ConvertOptions(
                    column_types={name: pa.large_binary() for name in header},
                    strings_can_be_null=False,
                    quoted_strings_can_be_null=False,
                ),
            )
        )
    # DuckDB decodes Parquet on all cores, several times faster than a single-threaded
    # iter_batches, and keeps the file's row order.
    reader_db = duckdb.connect(config={"memory_limit": "512MB"})
    reader_db.execute("set enable_progress_bar = false")
    return reader_db.read_parquet(str(path)).to_arrow_reader(batch_size)


def _extra_columns(paths: list[Path], source_format: str | None) -> dict[str, pa.DataType]:
    """Columns beyond the six, across all files; a column typed differently by two files is text."""
    extra: dict[str, pa.DataType] = {}
    for path in paths:
        schema = _source_schema(path, input_kind(path, source_format))
        missing = [column for column in REQUIRED_COLUMNS if column not in schema.names]
        if missing:
            raise InputError(
                f"{path}: missing required column(s) {', '.join(missing)}. Found: "
                f"{', '.join(schema.names) or '(none)'}. Every input needs "
                + ", ".join(REQUIRED_COLUMNS)
                + " (for JSONL, map them with jsonl_fields)."
            )
        for field_ in schema:
            if field_.name in REQUIRED_COLUMNS or field_.name == "input_row":
                continue
            known = extra.setdefault(field_.name, field_.type)
            if known != field_.type:
                extra[field_.name] = pa.large_string()
    return extra


def _text(column: pa.Array) -> pa.Array:
    return pc.fill_null(column.cast(pa.large_string()), "")


def _nfc(text: pa.Array) -> pa.Array:
    """NFC on read; only rows with non-ASCII characters can change, so only those are touched."""
    non_ascii = pc.invert(pc.string_is_ascii(text))
    if not pc.any(non_ascii).as_py():
        return text
    return pc.replace_with_mask(text, non_ascii, pc.utf8_normalize(text.filter(non_ascii), form="NFC"))


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
    source: Path, stats: InputStats, batch_size: int = DEFAULT_BATCH_SIZE, policy: InputPolicy | None = None
) -> Iterator[pa.RecordBatch]:
    """Validated batches of every input file: ``doc_id, source, domain, crawled_at, title,
    body``, the extra columns of all files, ``source_file`` and ``input_row`` (the data row, line
    or record number within its file).

    A row or record with a problem is left out and recorded in ``stats.rejected`` with its
    reason (``missing_field``, ``invalid_crawled_at``, ``too_large``, ``duplicate_doc_id`` — the
    first row with a doc_id is kept — and the WARC/JSONL reasons), unless
    ``policy.fail_on_reject``, which raises :class:`InputError` instead. A problem with the whole
    input (no such file, a missing column, an unreadable file) always raises."""
    policy = policy or InputPolicy()
    paths = input_files(source, policy.source_format)
    for path in paths:
        check_file(path, policy.source_format)
    extra = _extra_columns(paths, policy.source_format)
    stats.extra_columns = list(extra)
    first_seen = FirstSeen()
    for path in paths:
        yield from _file_batches(path, stats, batch_size, policy, extra, first_seen)
    if stats.rows == 0:
        raise InputError(f"{source}: has no document rows or records.")


def _file_batches(path, stats, batch_size, policy, extra, first_seen) -> Iterator[pa.RecordBatch]:
    read = 0

    def reject_record(number: int, doc_id: str, reason: str, detail: str) -> None:
        nonlocal read
        read += 1
        stats.rows += 1
        if policy.fail_on_reject:
            raise InputError(f"{path}: record {number} (doc_id '{doc_id}'): {reason}: {detail}.")
        _record_reject(stats, path, number, doc_id, reason, detail)

    try:
        for batch in _raw_batches(path, batch_size, policy, reject_record):
            if batch.num_rows == 0:
                continue
            standard = _standardize(path, batch, read + 1, extra)
            read += batch.num_rows
            stats.rows += batch.num_rows
            keep = _screen(path, standard, policy, first_seen, stats)
            accepted = standard.filter(keep)
            stats.documents += accepted.num_rows
            bodies = accepted.column("body")
            # utf8_is_space stops at the first other character; trimming would copy every body
            stats.empty_bodies += pc.sum(pc.equal(bodies, "")).as_py() or 0
            stats.empty_bodies += pc.sum(pc.utf8_is_space(bodies)).as_py() or 0
            yield accepted
    except (pa.ArrowInvalid, OSError, duckdb.Error) as error:
        kind = {"csv": "CSV", "parquet": "Parquet", "jsonl": "JSONL", "warc": "WARC"}[
            input_kind(path, policy.source_format)
        ]
        detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        if "utf8" in detail.lower():
            raise InputError(f"{path}: has bytes that are not valid UTF-8 ({detail}). Re-encode the file as UTF-8.") from None
        raise InputError(f"{path}: cannot be read as {kind}: {detail}") from None


def _standardize(path: Path, batch: pa.RecordBatch, first_row: int, extra: dict[str, pa.DataType]) -> pa.RecordBatch:
    """The six columns as text (``crawled_at`` as a UTC timestamp, null where it does not
    parse), the extra columns (null where this file lacks one), ``source_file`` and ``input_row``."""
    arrays = {name: _text(batch.column(name)) for name in TEXT_COLUMNS}
    arrays["doc_id"] = pc.utf8_trim_whitespace(arrays["doc_id"])
    arrays["title"], arrays["body"] = _nfc(arrays["title"]), _nfc(arrays["body"])
    arrays["crawled_at"] = _timestamps(batch.column("crawled_at"))
    names = batch.schema.names
    extras = [
        batch.column(name).cast(kind) if name in names else pa.nulls(batch.num_rows, kind)
        for name, kind in extra.items()
    ]
    rows = (
        batch.column("input_row")  # record numbers, when the source skipped some records
        if "input_row" in names
        else pa.array(np.arange(first_row, first_row + batch.num_rows, dtype=np.int64))
    )
    files = pa.array([str(path)] * batch.num_rows, pa.large_string())
    return pa.RecordBatch.from_arrays(
        [arrays[name] for name in REQUIRED_COLUMNS] + extras + [files, rows],
        names=REQUIRED_COLUMNS + list(extra) + ["source_file", "input_row"],
    )


def _screen(
    path: Path,
    batch: pa.RecordBatch,
    policy: InputPolicy,
    first_seen: FirstSeen,
    stats: InputStats,
) -> np.ndarray:
    """Which rows to keep; the others are recorded as rejected (or raise, when strict)."""
    doc_ids = batch.column("doc_id")
    input_rows = batch.column("input_row").to_numpy()
    body_bytes = pc.binary_length(batch.column("body").cast(pa.large_binary())).to_numpy()
    # the first problem of each row, in this order; checked in C, then only flagged rows in Python
    problems = [
        (pc.equal(batch.column("doc_id"), "").to_numpy(zero_copy_only=False), "missing_field"),
        (batch.column("crawled_at").is_null().to_numpy(zero_copy_only=False), "invalid_crawled_at"),
        (body_bytes > policy.max_body_bytes, "too_large"),
    ]
    flagged = problems[0][0] | problems[1][0] | problems[2][0]
    rejects: list[tuple[int, str, str, str]] = []
    keep = np.ones(batch.num_rows, dtype=bool)
    for index in np.flatnonzero(flagged).tolist():
        reason = next(reason for mask, reason in problems if mask[index])
        detail = {
            "missing_field": "doc_id is empty",
            "invalid_crawled_at": "crawled_at is missing or not ISO 8601 (for example 2026-01-31 or 2026-01-31T12:00:00Z)",
            "too_large": f"body has {int(body_bytes[index]):,} bytes, above max_body_bytes={policy.max_body_bytes:,}",
        }[reason]
        rejects.append((int(input_rows[index]), doc_ids[index].as_py(), reason, detail))
        keep[index] = False
    source = str(path)
    earlier = first_seen.register(source, doc_ids, input_rows, ~flagged)
    for index in np.flatnonzero(earlier >= 0).tolist():
        file, row = first_seen.place(int(earlier[index]))
        where = f"row {row}" + ("" if file == source else f" of {file}")
        rejects.append(
            (int(input_rows[index]), doc_ids[index].as_py(), "duplicate_doc_id", f"doc_id first seen at {where}")
        )
        keep[index] = False
    rejects.sort(key=lambda reject: reject[0])
    if rejects and policy.fail_on_reject:
        raise InputError(_strict_message(path, rejects))
    for row, doc_id, reason, detail in rejects:
        _record_reject(stats, path, row, doc_id, reason, detail)
    return keep


def _record_reject(stats: InputStats, path: Path, row: int, doc_id: str, reason: str, detail: str) -> None:
    stats.rejected.append(
        {"source_file": str(path), "input_row": row, "doc_id": doc_id, "reason": reason, "detail": detail}
    )
    stats.rejected_by_reason[reason] = stats.rejected_by_reason.get(reason, 0) + 1


def _strict_message(path: Path, rejects: list[tuple[int, str, str, str]]) -> str:
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
    return f"{path}: row {row}: column doc_id repeats '{doc_id}' ({detail}). Give each document a unique doc_id."


def read_documents(path: Path, batch_size: int = DEFAULT_BATCH_SIZE, policy: InputPolicy | None = None) -> pa.Table:
    """The whole validated input as one Arrow table (for small inputs and tests)."""
    stats = InputStats()
    batches = list(document_batches(path, stats, batch_size, policy))
    return pa.Table.from_batches(batches)


def count_input_records(source: Path, source_format: str | None = None) -> int:
    """Data rows, lines or records in the input, counted independently of the validating reader."""
    return sum(_count_file_records(path, source_format) for path in input_files(source, source_format))


def _count_file_records(path: Path, source_format: str | None) -> int:
    kind = input_kind(path, source_format)
    if kind == "warc":
        return count_warc_records(path)
    if kind == "jsonl":
        return count_jsonl_records(path)
    if kind == "csv":
        return sum(batch.num_rows for batch in _raw_batches(path, 50_000, InputPolicy(source_format="csv"), None))
    return pq.ParquetFile(path).metadata.num_rows
