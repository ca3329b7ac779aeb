"""The documents of an input: every file's records through its reader, validated batch by batch,
each record counted once as a document or a reject.

The input is streamed in Arrow batches, so memory follows the batch size, not the file. A
repeated ``doc_id`` is found in the batch that repeats it (``FirstSeen`` remembers every id so
far, as UTF-8 bytes). Each record is numbered ``input_row`` (its 1-based CSV data row, header not
counted, JSONL line, WARC record or Parquet row) so every error and every output row can be
traced back to its file.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..settings.choices import DEFAULT_BATCH_SIZE

from ..settings.input import InputPolicy
from ..storage.tables import duckdb_file
from .columns import extra_columns, mapped_schema
from .doc_ids import CONTROL_CHARACTERS, FirstSeen, escaped
from .files import check_file, input_files
from .protocol import INPUT_SETTING, InputError
from .registry import reader_for
from .standardize import standardize

_EXAMPLES_SHOWN = 5
# sees each batch's doc_ids and validated bodies, and which of them became documents
Tap = Callable[[pa.Array, pa.Array, np.ndarray], None]
# the column of document_rows that says whether an input record became a document
KEPT = "kept_as_document"

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
    """Filled in while the stream is read: every input record is counted once (in ``rows``),
    either as a document or in ``rejected``."""

    rows: int = 0
    documents: int = 0
    empty_bodies: int = 0
    extra_columns: list[str] = field(default_factory=list)
    rejected: list[dict] = field(default_factory=list)
    rejected_by_reason: dict[str, int] = field(default_factory=dict)
    # [path, bytes, mtime_ns] of the files whose bodies documents reads in place (none: copied)
    read_in_place: list[list] = field(default_factory=list)
    # file -> [documents, characters]: the documents with characters that decoding replaced by
    # U+FFFD (bytes that are not UTF-8), which their replaced_characters column counts
    replaced: dict[str, list[int]] = field(default_factory=dict)
    # what the pipeline wrote inside the input folder, not read (input_files)
    left_out: list[Path] = field(default_factory=list)
    # the files of an input folder that no reader reads, not read either (input_files)
    skipped: list[Path] = field(default_factory=list)

    def reject_document(self, source_file: str, row: int, doc_id: str, reason: str, detail: str) -> None:
        """Turn a record read as a document into a rejected one (a check that needs more than
        the record itself, such as a doc_id an earlier batch holds)."""
        self.documents -= 1
        self.rejected.append(
            {"source_file": source_file, "input_row": row, "doc_id": doc_id, "reason": reason, "detail": detail}
        )
        self.rejected_by_reason[reason] = self.rejected_by_reason.get(reason, 0) + 1

    def rejected_table(self) -> pa.Table:
        return pa.Table.from_pylist(self.rejected, schema=REJECTED_SCHEMA)


def document_batches(
    source: Path,
    stats: InputStats,
    batch_size: int = DEFAULT_BATCH_SIZE,
    policy: InputPolicy | None = None,
    tap: Tap | None = None,
) -> Iterator[pa.RecordBatch]:
    """Validated batches of every input file: ``doc_id, source, domain, crawled_at, title,
    body``, the extra columns of all files, ``source_file`` and ``input_row`` (the data row, line
    or record number within its file).

    A record with a problem is left out and recorded in ``stats.rejected`` with its reason
    (``missing_field``, ``invalid_doc_id`` — a control character in it —, ``invalid_crawled_at``,
    ``too_large``, ``duplicate_doc_id`` — the first record with a doc_id is kept — and the
    readers' reasons), unless ``policy.fail_on_reject``,
    which raises :class:`InputError` instead. A problem with the whole input (no such file, a
    missing column, a column named like one the pipeline adds, an unreadable file) always
    raises; what the files' names and headers show, before any record is read. ``tap`` is
    handed each batch's records (doc_ids, validated bodies, which became documents) as they pass."""
    return _validated(source, stats, batch_size, policy or InputPolicy(), _accepted, tap=tap)


def document_rows(
    source: Path,
    files: list[Path],
    stats: InputStats,
    batch_size: int = DEFAULT_BATCH_SIZE,
    policy: InputPolicy | None = None,
    tap: Tap | None = None,
) -> Iterator[pa.RecordBatch]:
    """For an input whose bodies are read in place, ``files`` as :func:`bodies_in_place` listed
    them: one row per input record, in file order, with the columns of
    :func:`document_batches`, then ``KEPT`` (whether the record became a document). ``body`` is null where the validated body is the file's own,
    so the text is not copied, and the validated body where it is not. Validated and counted as
    that stream is, and ``tap`` sees them with their validated bodies."""
    return _validated(source, stats, batch_size, policy or InputPolicy(), _all_rows, files, tap)


def bodies_in_place(
    source: Path, policy: InputPolicy | None = None, left_out: list[Path] | None = None,
    skipped: list[Path] | None = None,
) -> list[tuple[Path, str]] | None:
    """Each input file (as an absolute path) and its body column, when every file is Parquet
    with a text body, which can be read again from the file instead of being copied; None
    otherwise, and for a file whose path DuckDB would read as a pattern (:func:`duckdb_file`)
    or that has a column named like ``KEPT``. Reads names and footers only. What the pipeline
    wrote inside the input folder is added to ``left_out``, the files no reader reads to
    ``skipped``."""
    policy = policy or InputPolicy()
    column = policy.fields.get("body", "body")
    found = []
    try:
        for path in input_files(source, policy.source_format, left_out, skipped):
            reader = reader_for(path, policy.source_format, policy.fields)
            resolved = path.resolve()
            # the view would name it escaped, and DuckDB then lists the file's folder on every
            # query (300 such files of a folder of 600: 1.1 s a query, against 0.03 s)
            if reader.name != "parquet" or duckdb_file(resolved) != str(resolved):
                return None
            schema = reader.schema(path)
            if column not in schema.names or schema.field(column).type not in (pa.string(), pa.large_string()):
                return None
            if KEPT in (name.lower() for name in schema.names):
                return None
            found.append((resolved, column))
    except InputError:  # the validating stream says what is wrong, where it reads the input
        return None
    return found


def footer_records(source: Path, policy: InputPolicy) -> int | None:
    """The input's records where every file's footer counts them (Parquet), which costs no read
    of the rows; None for other formats, whose records are known only once read, and for an
    input the validating stream will refuse (it says why)."""
    try:
        files = input_files(source, policy.source_format)
        readers = [(file, reader_for(file, policy.source_format, policy.fields)) for file in files]
    except InputError:
        return None
    if any(reader.name != "parquet" for _, reader in readers):
        return None
    try:
        return sum(reader.count(file) for file, reader in readers)
    except (OSError, pa.ArrowException):  # unreadable: the validating stream says so, with what to do
        return None


def _validated(
    source: Path,
    stats: InputStats,
    batch_size: int,
    policy: InputPolicy,
    shape: Callable[[_Screened], pa.RecordBatch],
    paths: list[Path] | None = None,
    tap: Tap | None = None,
) -> Iterator[pa.RecordBatch]:
    paths = input_files(source, policy.source_format, stats.left_out, stats.skipped) if paths is None else paths
    for path in paths:
        check_file(path, policy.source_format)
    extra = extra_columns(paths, policy)
    stats.extra_columns = list(extra)
    first_seen = FirstSeen()
    for path in paths:
        for screened in _screened_batches(path, stats, batch_size, policy, extra, first_seen):
            if tap is not None:
                tap(screened.standard.column("doc_id"), screened.standard.column("body"), screened.keep)
            yield shape(screened)
    if stats.rows == 0:
        raise InputError(f"{source}: has no document rows or records.")
    if stats.documents == 0:
        reasons = ", ".join(f"{reason} {rows:,}" for reason, rows in sorted(stats.rejected_by_reason.items()))
        first = stats.rejected[0]
        raise InputError(
            f"{source}: all {stats.rows:,} records were rejected ({reasons}), so nothing is left to "
            f"deduplicate. The first: {first['source_file']} record {first['input_row']}: "
            f"{first['reason']}: {first['detail']}. Fix the input, or point {INPUT_SETTING} at another one."
        )


@dataclass(frozen=True)
class _Screened:
    """One batch of a file's records as read (``raw_body``: the file's own body column, as
    text), standardized, and which of its rows became documents (``keep``)."""

    standard: pa.RecordBatch
    keep: np.ndarray
    raw_body: pa.Array


def _screened_batches(
    path: Path,
    stats: InputStats,
    batch_size: int,
    policy: InputPolicy,
    extra: dict[str, pa.DataType],
    first_seen: FirstSeen,
) -> Iterator[_Screened]:
    reader = reader_for(path, policy.source_format, policy.fields)
    _, names = mapped_schema(path, reader, policy.fields)
    records_read = 0

    def reject_record(number: int, doc_id: str, reason: str, detail: str) -> None:
        nonlocal records_read
        records_read += 1
        stats.rows += 1
        if policy.fail_on_reject:
            raise InputError(f"{path}: record {number} (doc_id '{doc_id}'): {reason}: {detail}.")
        _record_reject(stats, path, number, doc_id, reason, detail)

    try:
        for batch in reader.batches(path, batch_size, policy, reject_record):
            if batch.num_rows == 0:
                continue
            if batch.schema.names != names:
                batch = batch.rename_columns(names)
            standard, bad_dates = standardize(path, batch, records_read + 1, extra)
            records_read += batch.num_rows
            stats.rows += batch.num_rows
            keep = _screen(path, standard, bad_dates, policy, first_seen, stats)
            kept = int(keep.sum())
            stats.documents += kept
            bodies = standard.column("body") if kept == batch.num_rows else standard.column("body").filter(keep)
            # utf8_is_space stops at the first other character; trimming would copy every body
            stats.empty_bodies += pc.sum(pc.equal(bodies, "")).as_py() or 0
            stats.empty_bodies += pc.sum(pc.utf8_is_space(bodies)).as_py() or 0
            _count_replaced(stats, path, standard, keep, kept)
            yield _Screened(standard, keep, batch.column("body"))
    except (pa.ArrowInvalid, OSError, duckdb.Error) as error:
        detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        if "utf8" in detail.lower():
            raise InputError(f"{path}: has bytes that are not valid UTF-8 ({detail}). Re-encode the file as UTF-8.") from None
        raise InputError(f"{path}: cannot be read as {reader.label}: {detail}") from None


def _count_replaced(stats: InputStats, path: Path, standard: pa.RecordBatch, keep: np.ndarray, kept: int) -> None:
    if "replaced_characters" not in standard.schema.names:
        return
    replaced = standard.column("replaced_characters")
    replaced = replaced if kept == len(keep) else replaced.filter(keep)
    rows = pc.sum(pc.greater(replaced, 0)).as_py() or 0
    if rows:
        tally = stats.replaced.setdefault(str(path), [0, 0])
        tally[0] += rows
        tally[1] += pc.sum(replaced).as_py()


def _accepted(screened: _Screened) -> pa.RecordBatch:
    return screened.standard.filter(screened.keep)


def _all_rows(screened: _Screened) -> pa.RecordBatch:
    standard = screened.standard
    at = standard.schema.get_field_index("body")
    overrides = _body_overrides(screened.raw_body, standard.column(at))
    return standard.set_column(at, "body", overrides).append_column(KEPT, pa.array(screened.keep))


def _body_overrides(raw: pa.Array, body: pa.Array) -> pa.Array:
    """The validated body where it is not the file's own (NFC applied, a null made empty), null
    where it is. Only a null or non-ASCII body can differ, so only those are compared."""
    overrides = pa.nulls(len(body), body.type)
    suspect = pc.fill_null(pc.invert(pc.string_is_ascii(raw)), True)
    if not pc.any(suspect).as_py():
        return overrides
    validated = body.filter(suspect)
    differs = pc.fill_null(pc.not_equal(raw.filter(suspect).cast(body.type), validated), True)
    return pc.replace_with_mask(overrides, suspect, pc.if_else(differs, validated, pa.nulls(len(validated), body.type)))


_DETAILS = {
    "missing_field": "doc_id is empty",
    "invalid_crawled_at": (
        "crawled_at is not ISO 8601 (for example 2026-01-31 or 2026-01-31T12:00:00Z); leave it empty where the date is unknown"
    ),
}


def _screen(
    path: Path,
    batch: pa.RecordBatch,
    bad_dates: np.ndarray,
    policy: InputPolicy,
    first_seen: FirstSeen,
    stats: InputStats,
) -> np.ndarray:
    """Which rows to keep; the others are recorded as rejected (or raise, when strict).
    ``bad_dates``: the rows whose crawled_at does not parse (an empty one is null, and kept)."""
    doc_ids = batch.column("doc_id")
    input_rows = batch.column("input_row").to_numpy()
    body_bytes = pc.binary_length(batch.column("body").cast(pa.large_binary())).to_numpy()
    # the first problem of each row, in this order; checked in C, then only flagged rows in Python
    problems = [
        # blank: nothing but spaces is no id, though ids are otherwise kept byte for byte
        (pc.match_substring_regex(doc_ids, r"^ *$").to_numpy(zero_copy_only=False), "missing_field"),
        (pc.match_substring_regex(doc_ids, CONTROL_CHARACTERS).to_numpy(zero_copy_only=False), "invalid_doc_id"),
        (bad_dates, "invalid_crawled_at"),
        (body_bytes > policy.max_body_bytes, "too_large"),
    ]
    flagged = np.logical_or.reduce([mask for mask, _ in problems])
    rejects: list[tuple[int, str, str, str]] = []
    keep = np.ones(batch.num_rows, dtype=bool)
    for index in np.flatnonzero(flagged).tolist():
        reason = next(reason for mask, reason in problems if mask[index])
        doc_id = doc_ids[index].as_py()
        if reason == "invalid_doc_id":
            detail = _control_detail(doc_id)
        elif reason == "too_large":
            detail = f"body has {int(body_bytes[index]):,} bytes, above max_body_bytes={policy.max_body_bytes:,}"
        else:
            detail = _DETAILS[reason]
        rejects.append((int(input_rows[index]), escaped(doc_id), reason, detail))
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


def _control_detail(doc_id: str) -> str:
    found = re.search(CONTROL_CHARACTERS, doc_id)
    return (
        f"doc_id has the control character U+{ord(found.group()):04X} at character {found.start() + 1} "
        "(shown as \\xNN); an id must be printable text: remove it, or map doc_id to another column "
        "with the fields setting"
    )


def _record_reject(stats: InputStats, path: Path, row: int, doc_id: str, reason: str, detail: str) -> None:
    stats.rejected.append(
        {"source_file": str(path), "input_row": row, "doc_id": doc_id, "reason": reason, "detail": detail}
    )
    stats.rejected_by_reason[reason] = stats.rejected_by_reason.get(reason, 0) + 1


def _rows_list(rows: np.ndarray) -> str:
    shown = ", ".join(str(int(row)) for row in rows[:_EXAMPLES_SHOWN])
    more = len(rows) - min(len(rows), _EXAMPLES_SHOWN)
    return f"row{'s' if len(rows) > 1 else ''} {shown}" + (f" and {more} more" if more else "")


def _strict_message(path: Path, rejects: list[tuple[int, str, str, str]]) -> str:
    row, doc_id, reason, detail = rejects[0]
    rows = np.array([r for r, _, why, _ in rejects if why == reason])
    if reason == "missing_field":
        return f"{path}: column doc_id is empty at {_rows_list(rows)}. Every document needs a unique, non-empty doc_id."
    if reason == "invalid_crawled_at":
        return (
            f"{path}: column crawled_at cannot be parsed at {_rows_list(rows)} (doc_id '{doc_id}'). "
            "Use ISO 8601, for example 2026-01-31 or 2026-01-31T12:00:00Z, or leave it empty where the date is unknown."
        )
    if reason == "invalid_doc_id":
        return f"{path}: column doc_id has a control character at {_rows_list(rows)} (doc_id '{doc_id}'): {detail}."
    if reason == "too_large":
        return f"{path}: row {row} (doc_id '{doc_id}'): {detail}. Raise max_body_bytes or remove the row."
    return f"{path}: row {row}: column doc_id repeats '{doc_id}' ({detail}). Give each document a unique doc_id."


def read_documents(path: Path, batch_size: int = DEFAULT_BATCH_SIZE, policy: InputPolicy | None = None) -> pa.Table:
    """The whole validated input as one Arrow table (for small inputs and tests)."""
    stats = InputStats()
    batches = list(document_batches(path, stats, batch_size, policy))
    return pa.Table.from_batches(batches)


def count_input_records(source: Path, source_format: str | None = None) -> int:
    """The input records (CSV data rows, JSONL lines, WARC records, Parquet rows) of every input
    file, each file counted by its reader's ``count``, independently of the validating stream."""
    return sum(reader_for(path, source_format).count(path) for path in input_files(source, source_format))
