"""Where the ``ray`` engine keeps its tables: one folder of Parquet files per table under a root
folder, and the DuckDB view that lets checks, metadata and the release read each one.

A table is written into a new folder beside the old one and swapped in when complete, so a
step that fails half way leaves the previous table readable. A view gives its rows in the
table's key order (input position, or the pair) as the DuckDB engine stores them. Daft
names and orders the files of a shuffled table as it likes, so a view sorts, unless the files show it need not: a per-document table whose files
each declare their rows sorted by position, named by their first position, each file's
positions before the next file's, is read in order as it lies (``in_position_order``). Sorting
the deduplicated corpus's bodies on every read is what that saves.
"""

from __future__ import annotations

import itertools
import os
import shutil
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..settings.model import SettingsError
from ..storage.store import TableBuild
from ..storage.tables import duckdb_file, sql_string

# Each document's place in input order: how the per-document tables are ordered, and which copy
# of a text is its first copy. Stored in the datasets, hidden from the views (the DuckDB
# engine's tables use their row order instead).
POSITION = "document_position"


def table_folder(root: str | Path, table: str) -> Path:
    return Path(root).expanduser() / table


def table_rows(root: str | Path, table: str) -> int:
    """The rows of a table's Parquet files, from their footers."""
    return folder_rows(table_folder(root, table))


def table_bytes(root: str | Path, table: str) -> int:
    """The size of a table's Parquet files; 0 before it is written."""
    return sum(path.stat().st_size for path in table_folder(root, table).glob("*.parquet"))


def view_build(
    root: str | Path, table: str, order: tuple[str, ...] = (), casts: Mapping[str, str] | None = None
) -> TableBuild:
    """A DuckDB view over table's folder, without ``POSITION``, in ``order`` (the DuckDB
    engine's row order: Daft does not keep a shuffled table's order in the files it writes), with
    ``casts`` (column -> DuckDB type) where Parquet cannot keep the type, such as fixed-size lists.
    Ordered by position, it sorts only when the files as written now are not in that order
    (``in_position_order``): a table written again gets its view built again."""
    folder = table_folder(root, table).resolve()
    first = min(folder.glob("*.parquet"))
    exclude = f" exclude ({POSITION})" if POSITION in pq.read_schema(first).names else ""
    replace = (
        " replace (" + ", ".join(f"{column}::{kind} as {column}" for column, kind in casts.items()) + ")"
        if casts
        else ""
    )
    named = duckdb_file(folder)
    if named is None:
        raise SettingsError(
            f"{folder}: DuckDB cannot read a folder whose path has a backslash and one of * ? [. "
            "Set the engine resource's dataset_root (DEDUP_DATASETS) to a path without them."
        )
    files = sql_string(f"{named}/*.parquet")  # every file of the folder, whatever it is named
    ordered = f" order by {', '.join(order)}" if order and not (order == (POSITION,) and in_position_order(folder)) else ""
    return TableBuild(sql=f"select *{exclude}{replace} from read_parquet({files}){ordered}", view=True)


def _swap_in(root: Path, table: str, written: Path) -> None:
    target = table_folder(root, table)
    retired = root / f".{table}.retired-{uuid.uuid4().hex}"
    if target.exists():
        target.rename(retired)
    written.rename(target)
    shutil.rmtree(retired, ignore_errors=True)


def _new_folder(root: Path, table: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    folder = root / f".{table}.writing-{uuid.uuid4().hex}"
    folder.mkdir()
    return folder


def part_name(first_position: int) -> str:
    """A file named by its first row's position: name order is position order."""
    return f"part-{first_position:012d}.parquet"


def write_positioned(folder: Path, block: pa.Table) -> int:
    """Write a block of a per-document table as one file, sorted by position and saying so,
    named by its first position; its row count (an empty block writes nothing). The file
    appears whole (written aside, then renamed), as a retried task writes it again."""
    if not block.num_rows:
        return 0
    positions = block[POSITION]
    if len(positions) > 1 and not pc.all(pc.greater(positions[1:], positions[:-1])).as_py():
        block = block.sort_by(POSITION)  # blocks taken in place come sorted: no copy of their bodies
    sorting = pq.SortingColumn.from_ordering(block.schema, [(POSITION, "ascending")])
    target = folder / part_name(block[POSITION][0].as_py())
    aside = target.with_name(f"{target.name}.{uuid.uuid4().hex}.partial")  # not *.parquet: no reader sees it
    pq.write_table(block, aside, sorting_columns=sorting)
    os.replace(aside, target)
    return block.num_rows


def folder_rows(folder: Path) -> int:
    """The rows of a folder's Parquet files, from their footers."""
    return sum(pq.ParquetFile(path).metadata.num_rows for path in folder.glob("*.parquet"))


def in_position_order(folder: Path) -> bool:
    """Whether the folder's files, read in name order, give every row in position order: each
    row group declares its rows sorted by position, and its positions all come after the
    previous row group's."""
    last = -1
    for path in sorted(folder.glob("*.parquet")):
        metadata = pq.ParquetFile(path).metadata
        for index in range(metadata.num_row_groups):
            group = metadata.row_group(index)
            if not group.num_rows:
                continue
            columns = [group.column(i).path_in_schema for i in range(group.num_columns)]
            if POSITION not in columns or group.sorting_columns[:1] != pq.SortingColumn.from_ordering(
                metadata.schema.to_arrow_schema(), [(POSITION, "ascending")]
            ):
                return False
            statistics = group.column(columns.index(POSITION)).statistics
            # a null position would come first under the view's sort, wherever it lies
            if statistics is None or not statistics.has_min_max or not statistics.has_null_count:
                return False
            if statistics.null_count or statistics.min <= last:
                return False
            last = statistics.max
    return True


def replace_table(root: str | Path, table: str, write, schema: pa.Schema) -> None:
    """Write ``table`` with ``write(folder)`` into a new folder and swap it in. A table with no
    rows still gets one empty file of ``schema``, so that readers see its columns."""
    root = Path(root).expanduser()
    folder = _new_folder(root, table)
    try:
        write(folder)
        if not any(folder.glob("*.parquet")):
            pq.write_table(schema.empty_table(), folder / part_name(0))
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    _swap_in(root, table, folder)


# the most a file of ``write_batches`` holds, as Arrow data: each file is one row group, gathered
# here before it is written, so that the driver holds at most about this much of the stream
FILE_BYTES = 64 * 2**20


def write_batches(
    root: str | Path, table: str, batches: Iterable[pa.RecordBatch], rows_per_file: int, schema: pa.Schema | None = None
) -> int:
    """Write a stream of batches as ``table``, in stream order, with a ``POSITION`` column
    counting the rows from 0; its row count. The first batch gives the schema (else
    ``schema``); later batches are cast to it, as readers of several files may differ in string
    widths. Each file is one row group of ``rows_per_file`` rows or ``FILE_BYTES``, whichever
    comes first: Daft hands a step's functions a row group at a time, and every batch of
    ``fingerprinted`` and ``deduped_documents`` becomes a file of its own, so a file per batch
    of the stream (171 files at 100,000 documents in batches of 1,000) made the candidates'
    query one task per file (over 10 minutes where 2 files took 3.5 s)."""
    batches = iter(batches)
    first = next(batches, None)
    if first is None and schema is None:
        raise ValueError(f"{table}: the stream was empty and has no schema to create from")
    schema = (schema if first is None else first.schema).append(pa.field(POSITION, pa.int64()))
    sorting = pq.SortingColumn.from_ordering(schema, [(POSITION, "ascending")])
    rows = 0

    def write(folder: Path) -> None:
        nonlocal rows
        gathered: list[pa.RecordBatch] = []
        in_file = file_bytes = 0

        def flush() -> None:
            nonlocal gathered, in_file, file_bytes
            if gathered:
                pq.write_table(pa.Table.from_batches(gathered, schema), folder / part_name(rows - in_file), sorting_columns=sorting)
            gathered, in_file, file_bytes = [], 0, 0

        for batch in itertools.chain([first] if first is not None else [], batches):
            while batch.num_rows:
                # the rows that fill the file, by count or by their average bytes (at least one)
                fit = int((FILE_BYTES - file_bytes) * batch.num_rows // max(batch.nbytes, 1))
                taken = batch.slice(0, max(1, min(rows_per_file - in_file, fit)))
                batch = batch.slice(taken.num_rows)
                positions = pa.array(range(rows, rows + taken.num_rows), pa.int64())
                columns = taken.columns if taken.schema == first.schema else taken.cast(first.schema).columns
                gathered.append(pa.RecordBatch.from_arrays([*columns, positions], schema=schema))
                rows += taken.num_rows
                in_file += taken.num_rows
                file_bytes += taken.nbytes
                if in_file >= rows_per_file or file_bytes >= FILE_BYTES:
                    flush()
        flush()

    replace_table(root, table, write, schema)
    return rows


def read_table(root: str | Path, table: str, columns: list[str] | None = None) -> pa.Table:
    """A table read whole on this node, in file order: first_copies, and duplicate_pairs while
    their components are found here."""
    return pq.read_table(table_folder(root, table), columns=columns)
