"""The documents step: the validated input streamed into ``documents``, the rows that cannot be
documents into ``rejected_documents``, and the input's identity (size and sha256) taken while
it is read.

A Parquet input's bodies are not copied: ``documents`` is then a view that joins the validated
rows, stored without their bodies, position by position with the files' own body column. The
files must then stay as they were: their size and modification time are recorded, and
:func:`changed_in_place_files` tells a later step that one has changed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..util.errors import InconsistentTables, listed
from ..settings.input import InputPolicy
from . import (
    InputError,
    InputFile,
    InputStats,
    bodies_in_place,
    describe_input,
    document_batches,
    document_rows,
    footer_records,
    skipped_files_line,
)
from .files import STAMP_FIELDS, input_changes
from ..pipeline.step_assets import rerun_from
from .documents import KEPT, Tap
from ..storage.store import (
    TableBuild,
    in_id_order,
    read_lineage,
    rows_with_ids,
    table_exists,
    with_large_offsets,
)
from ..util.streams import Progress, ThroughputLog, prefetched
from ..storage.tables import DOCUMENT_ROWS, IN_PLACE_FILES, READ_IN_PLACE, beside, sql_string


def document_stream(
    batches: Iterator[pa.RecordBatch], stats: InputStats, log: Progress, records: int | None = None
) -> Iterator[pa.RecordBatch]:
    """The validated input, its progress logged in input records (of ``records``, where known)
    as it streams; the next batch is read and validated while the caller stores the previous
    one. What the pipeline wrote inside the input folder, and so left out of it, and the
    folder's files that no reader reads, are said once the files are listed."""
    progress = ThroughputLog(log, "documents", records, "input records read")
    read = 0
    for number, batch in enumerate(prefetched(batches)):
        if number == 0 and stats.left_out:
            log(
                "documents: not read, as the pipeline wrote them (an output folder, a release or a "
                f"database inside the input folder): {', '.join(map(str, stats.left_out))}"
            )
        if number == 0 and stats.skipped:
            log(f"documents: {skipped_files_line(stats.skipped)}")
        # read once: the next batch is being read (and counted) in another thread meanwhile
        counted = stats.rows
        progress.advance(counted - read)
        read = counted
        yield batch
    progress.advance(stats.rows - read)  # the rows counted while the last batch was stored
    progress.finish("storing them (documents, rejected_documents)")


def build_documents(
    path: Path,
    batch_size: int,
    policy: InputPolicy,
    log: Progress,
    rows_table: str | None = None,
    tap: Tap | None = None,
) -> tuple[TableBuild, InputStats]:
    """The accepted documents as a stream; ``stats`` fills in (rejected rows included) as it is
    written, for :func:`build_rejected_documents`.

    With ``rows_table``, an input whose bodies can be read in place (every file Parquet, with a
    text body) gives a view instead: ``rows_table`` holds every input record's validated row,
    its body left out where it is the file's own, and the view joins it, position by
    position, with the files' body column (``stats.read_in_place`` names the files). ``tap``
    sees every batch of records as it is read (:data:`.readers.documents.Tap`)."""
    stats = InputStats()
    left_out: list[Path] = []  # the copying stream lists the files again, and says so itself
    skipped: list[Path] = []
    files = bodies_in_place(path, policy, left_out, skipped) if rows_table else None
    records = footer_records(path, policy)
    if not files:
        batches = document_batches(path, stats, batch_size, policy, tap)
        return TableBuild(batches=document_stream(batches, stats, log, records)), stats
    stats.left_out, stats.skipped = left_out, skipped
    paths = [file for file, _ in files]
    stats.read_in_place = file_identities(paths)
    rows = TableBuild(batches=document_stream(document_rows(path, paths, stats, batch_size, policy, tap), stats, log, records))
    prepare = ((rows_table, rows), (beside(rows_table, IN_PLACE_FILES), _in_place_files(files)))
    return TableBuild(sql=_in_place_view(files, rows_table), view=True, prepare=prepare), stats


# the columns read_parquet adds to find a row by its number; a file with a column of either name
# (in any case) cannot be read so, and its bodies are read the plain way
ROW_NUMBER_COLUMNS = frozenset({"filename", "file_row_number"})


def _in_place_files(files: list[tuple[Path, str]]) -> TableBuild:
    """The files the view reads, in its order, each with its body column and the place of its
    first row among all the files' rows (which is its place in the rows table); none when a
    file has a column named like :data:`ROW_NUMBER_COLUMNS`."""
    footers = [pq.read_metadata(path) for path, _ in files]
    clash = any(
        name.lower() in ROW_NUMBER_COLUMNS for footer in footers for name in footer.schema.to_arrow_schema().names
    )
    listed = [] if clash else files
    counts = [footer.num_rows for footer in footers[: len(listed)]]
    table = pa.table(
        {
            "path": pa.array([str(path) for path, _ in listed], pa.string()),
            "body_column": pa.array([column for _, column in listed], pa.string()),
            "first_row": pa.array(np.cumsum([0, *counts[:-1]])[: len(listed)], pa.int64()),
        }
    )
    return TableBuild(sql="select * from listed_files", arrow_inputs={"listed_files": table})


def _files_read_in_place(connection: duckdb.DuckDBPyConnection, documents: str, files_table: str) -> pa.Table | None:
    """The files ``files_table`` lists, where they are those the documents view reads now (its
    lineage names them: a view another engine made, or a copy, has none); else None."""
    if not (table_exists(connection, documents, "VIEW") and table_exists(connection, files_table)):
        return None
    named = [entry[0] for entry in read_lineage(connection, documents).get(READ_IN_PLACE, [])]
    files = connection.sql(f"select path, body_column, first_row from {files_table} order by first_row").to_arrow_table()
    return files if named and named == files.column("path").to_pylist() else None


def document_bodies(
    connection: duckdb.DuckDBPyConnection, documents: str, doc_ids: pa.Array | pa.ChunkedArray, in_order: bool = True
) -> pa.Table:
    """``doc_id`` and ``body`` of the documents ``doc_ids`` names, as :func:`.store.rows_with_ids`
    gives them; without ``in_order``, in any order (putting a verification's 127k bodies in
    order copied them, 1.4 s at 1M). Where documents is the view over Parquet files, the rows
    are found in the rows table and their bodies read from the files by row number: DuckDB then
    decodes the bodies of those rows only, where a scan of the view decodes every body (at 1M
    documents, 127k bodies in 1.0 s against 2.3 s)."""
    rows_table, files_table = beside(documents, DOCUMENT_ROWS), beside(documents, IN_PLACE_FILES)
    files = _files_read_in_place(connection, documents, files_table)
    if files is None:
        return rows_with_ids(connection, documents, doc_ids, ["body"])
    wanted = doc_ids.combine_chunks() if isinstance(doc_ids, pa.ChunkedArray) else doc_ids
    connection.register("wanted_doc_ids", pa.table({"doc_id": wanted}))
    try:
        # rowid is the place in the rows table, which was written in the files' row order
        rows = connection.sql(
            f"select r.rowid as place, r.doc_id, r.body as validated from {rows_table} r "
            f"semi join wanted_doc_ids w on r.doc_id = w.doc_id where r.{KEPT}"
        ).to_arrow_table()
    finally:
        connection.unregister("wanted_doc_ids")
    places, first_rows = rows.column("place").to_numpy(), files.column("first_row").to_numpy()
    file_of = np.searchsorted(first_rows, places, side="right") - 1
    located = pa.table(
        {
            "filename": files.column("path").take(pa.array(file_of)),
            "file_row_number": places - first_rows[file_of],
            "doc_id": rows.column("doc_id"),
            "validated": rows.column("validated"),
        }
    )
    names = ", ".join(sql_string(path) for path in files.column("path").to_pylist())
    column = '"' + files.column("body_column")[0].as_py().replace('"', '""') + '"'
    connection.register("wanted_rows", located)
    try:
        found = connection.sql(
            f"select w.doc_id, coalesce(w.validated, p.{column}) as body "
            f"from read_parquet([{names}], file_row_number = true, filename = true, union_by_name = true) p "
            "join wanted_rows w on p.filename = w.filename and p.file_row_number = w.file_row_number"
        ).to_arrow_table()
    finally:
        connection.unregister("wanted_rows")
    if found.num_rows != rows.num_rows:
        raise InconsistentTables(
            f"{rows.num_rows - found.num_rows} of the documents asked for are not where document_rows "
            "places them in the input's files: re-materialize documents and everything downstream"
        )
    return in_id_order(found, wanted, ["body"]) if in_order else with_large_offsets(found, ["body"])


def _in_place_view(files: list[tuple[Path, str]], rows_table: str) -> str:
    """The documents view: each kept row with its body, the validated one where ``rows_table``
    holds it, else the file's. The files are scanned in the order listed, which is input order,
    and the rows were stored in it, so a positional join pairs them row for row. DuckDB reads
    each name as given: :func:`bodies_in_place` takes no name it would read as a pattern."""
    names = ", ".join(sql_string(str(path)) for path, _ in files)
    column = '"' + files[0][1].replace('"', '""') + '"'
    return (
        f"select r.* exclude ({KEPT}) replace (coalesce(r.body, p.{column}) as body) "
        f"from read_parquet([{names}], union_by_name = true) p positional join {rows_table} r where r.{KEPT}"
    )


def file_identities(paths: list[Path]) -> list[list]:
    """[path, bytes, modification time in ns] of each file: what tells that a file has changed."""
    return [[str(path), status.st_size, status.st_mtime_ns] for path in paths for status in [path.stat()]]


def changed_in_place_files(identities: list[list]) -> list[str]:
    """What has changed in the files whose bodies documents reads in place, each as a phrase
    naming the file; empty when each is as it was read."""
    changed = []
    for path, size, mtime_ns in identities:
        try:
            now = Path(path).stat()
        except OSError:
            changed.append(f"{path} is gone")
            continue
        if now.st_size != size:
            changed.append(f"{path} has {now.st_size:,} bytes, not {size:,}")
        elif now.st_mtime_ns != mtime_ns:
            changed.append(f"{path} was modified after documents read it")
    return changed


def build_rejected_documents(stats: InputStats) -> TableBuild:
    """The rejected rows ``stats`` collected, in input order (call after documents is written)."""
    return TableBuild(
        sql="select * from rejected order by source_file, input_row",
        arrow_inputs={"rejected": stats.rejected_table()},
    )


@contextmanager
def input_identity(path: Path, source_format: str | None) -> Iterator[Future[InputFile]]:
    """The input's identity, hashed in a second thread while the caller reads the input."""
    with ThreadPoolExecutor(max_workers=1) as hasher:
        yield hasher.submit(describe_input, path, source_format)


Written = TypeVar("Written")


def confirmed_input(
    input_file: InputFile, source_format: str | None, written: Written, log: Callable[[str], None]
) -> Written:
    """``written``, a finished release not yet switched in, if the input is still what documents
    read: each file's stamp (size, modification time, inode, change time) is as it was, or, where
    one differs, the file hashes as it did. Else :class:`InputError` naming the file and what
    changed, so that nothing is published. Only a file whose stamp differs is read again: the
    second hash of the whole input on every run cost 1.5 CPU s at 1M documents."""
    changes = input_changes(input_file, source_format)
    if not changes:
        files = len(input_file.stamps)
        log(
            f"the input's {files:,} file{'s are' if files > 1 else ' is'} as documents read "
            f"{'them' if files > 1 else 'it'} (same {listed(STAMP_FIELDS)}), so not hashed again"
        )
        return written
    edited = [change for change in changes if change.edited]
    if edited:
        first = edited[0]
        others = f" (and {len(edited) - 1:,} more: {', '.join(c.path for c in edited[1:4])})" if len(edited) > 1 else ""
        if first.fields == ("gone",):
            what = "is gone or can no longer be read"
        elif first.fields:
            what = f"its {listed(first.fields)} differ{'s' if len(first.fields) == 1 else ''}, and its bytes too (hashed again)"
        else:  # tables of an older version: the input as a whole
            what = "the input's sha256 differs (hashed again)"
        raise InputError(
            f"{first.path}: changed since documents read it{others}: {what}. The release was not "
            "written: the release folder holds the last whole one. Restore the file, or read the "
            "input as it is now: run documents and everything after it again.",
            select=rerun_from("documents"),
        )
    for change in changes:
        log(
            f"{change.path}: its {listed(change.fields)} changed since documents read it, but not its "
            "bytes (hashed again: the same sha256), so the release is published"
            if change.fields
            else f"{change.path}: hashed again, as tables of an older version keep no hash per file: the same sha256"
        )
    return written
