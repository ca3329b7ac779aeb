"""The release's Parquet: a query streamed into one file, or into a folder of parts written
several at a time. Written by Arrow without dictionary pages (for unique text such as bodies,
DuckDB's writer spends much of its time building dictionaries it then discards); hash and body
columns have no statistics.

Where a row group or a part ends depends on the rows alone, never on which thread is faster or
on how the reader cut its batches, so the same rows give the same bytes in every file.
"""

from __future__ import annotations

import io
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..settings.choices import DEFAULT_BATCH_SIZE, DEFAULT_COMPRESSION
from .sinks import BackgroundFile
from ..util.streams import prefetched


@dataclass(frozen=True)
class Layout:
    """Where row groups and parts end. DuckDB hands over batches of ``batch_rows`` rows, which
    are gathered without a copy into row groups that end at the batch that reaches
    ``group_rows`` rows or ``group_bytes`` of Arrow data (long pages reach the second first). A
    folder of parts starts a new part after the row group that brings the part to
    ``part_bytes`` of Arrow data (about the uncompressed size), so less than that is one part."""

    batch_rows: int = DEFAULT_BATCH_SIZE
    group_rows: int = 49_152
    group_bytes: int = 32 << 20
    part_bytes: int = 128 << 20


LAYOUT = Layout()
# parts encoded at once: pyarrow's encoder releases the GIL
PART_WRITERS = 2
PART_NAME = "part-{:05d}.parquet"
# told the rows of each row group once it is written (from the writing thread)
Written = Callable[[int], None]
# page text, whose min/max statistics prune nothing, and cost a comparison of every body
NO_STATISTICS_TEXT = frozenset({"body"})


def hash_columns(schema: pa.Schema) -> set[str]:
    """The 64-bit hash columns (and lists of them): random bits, which no codec shrinks and
    whose min/max statistics prune nothing, so neither is spent on them."""

    def is_hash(kind: pa.DataType) -> bool:
        while pa.types.is_list(kind) or pa.types.is_fixed_size_list(kind):
            kind = kind.value_type
        return pa.types.is_uint64(kind)

    return {field.name for field in schema if is_hash(field.type)}


# zstd's fastest level: on page text about a third smaller than snappy, and 5-20% slower to write
ZSTD_LEVEL = 1


def leaf_paths(schema: pa.Schema) -> list[str]:
    """The Parquet column of each leaf of ``schema`` (a list column's is ``name.list.element``),
    which the per-column codecs are keyed by: a nested column named by its top level alone would
    be left uncompressed."""
    empty = io.BytesIO()
    pq.write_table(schema.empty_table(), empty)
    written = pq.ParquetFile(io.BytesIO(empty.getvalue())).schema
    return [written.column(index).path for index in range(len(written))]


def _writer(sink: io.RawIOBase, schema: pa.Schema, compression: str) -> pq.ParquetWriter:
    hashes = hash_columns(schema)
    leaves = leaf_paths(schema)
    compressed = [leaf for leaf in leaves if leaf.split(".")[0] not in hashes]
    return pq.ParquetWriter(
        sink,
        schema,
        compression={leaf: compression if leaf in compressed else "none" for leaf in leaves},
        compression_level={leaf: ZSTD_LEVEL for leaf in compressed} if compression == "zstd" else None,
        write_statistics=[name for name in schema.names if name not in hashes | NO_STATISTICS_TEXT],
        use_dictionary=False,
    )


def content_bytes(rows: pa.Table | pa.RecordBatch) -> int:
    """The bytes of ``rows``' values: each string or binary value's length and 4 for its offset,
    other columns' width. A function of the rows alone (``nbytes`` also counts validity bitmaps,
    which a reader may or may not hand over), so the same rows end a group at the same place."""
    size = 0
    for column in rows.columns:
        kind = column.type
        if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
            size += (pc.sum(pc.binary_length(column)).as_py() or 0) + 4 * len(column)
        else:
            size += column.nbytes
    return size


def even_batches(reader: pa.RecordBatchReader, rows: int) -> Iterator[pa.RecordBatch]:
    """The reader's rows in batches of exactly ``rows`` (the last may have fewer). DuckDB's reader
    ends a batch early where a view's files end (the ray engine's tables), and a row group is
    gathered from whole batches: cut otherwise, the same rows gave other row groups and bytes.
    A batch that spans a cut is copied; the others are slices."""
    pending: list[pa.RecordBatch] = []
    count = 0

    def joined() -> pa.RecordBatch:
        return pending[0] if len(pending) == 1 else pa.Table.from_batches(pending, reader.schema).combine_chunks().to_batches()[0]

    for batch in reader:
        while batch.num_rows:
            taken = batch.slice(0, rows - count)
            batch = batch.slice(taken.num_rows)
            pending.append(taken)
            count += taken.num_rows
            if count == rows:
                yield joined()
                pending, count = [], 0
    if pending:
        yield joined()


def row_groups(reader: pa.RecordBatchReader, layout: Layout) -> Iterator[pa.Table]:
    """The reader's rows, in batches of ``layout.batch_rows``, as the row groups of ``layout``,
    each with the batches as chunks."""
    group: list[pa.RecordBatch] = []
    rows = size = 0
    for batch in even_batches(reader, layout.batch_rows):
        group.append(batch)
        rows += batch.num_rows
        size += content_bytes(batch)
        if rows >= layout.group_rows or size >= layout.group_bytes:
            yield pa.Table.from_batches(group, reader.schema)
            group, rows, size = [], 0, 0
    if group:
        yield pa.Table.from_batches(group, reader.schema)


def write_parquet(
    relation: duckdb.DuckDBPyRelation, path: Path, compression: str = DEFAULT_COMPRESSION, written: Written | None = None
) -> dict:
    """Stream a query into one Parquet file, its columns compressed with ``compression`` (but the
    hash columns); its rows and sha256. A worker thread reads the next row group while this one
    is encoded; ``written`` is told the rows of each row group once it is."""
    reader = relation.to_arrow_reader(LAYOUT.batch_rows)
    sink = BackgroundFile(path)
    rows = 0
    try:
        with _writer(sink, reader.schema, compression) as writer:
            for group in prefetched(row_groups(reader, LAYOUT)):
                writer.write_table(group, row_group_size=group.num_rows)
                rows += group.num_rows
                if written is not None:
                    written(group.num_rows)
    finally:
        sha256 = sink.finish()
    return {"rows": rows, "sha256": sha256}


def write_parquet_parts(
    relation: duckdb.DuckDBPyRelation,
    folder: Path,
    layout: Layout | None = None,
    writers: int = PART_WRITERS,
    compression: str = DEFAULT_COMPRESSION,
    written: Written | None = None,
) -> list[dict]:
    """Stream a query into ``folder`` (created) as ``part-00000.parquet``, ``part-00001.parquet``
    …, which read in name order give the query's rows in its order; each part's name inside the
    folder, rows and sha256, in that order. There is always a first part, with no rows if the
    query has none. This thread reads the row groups; ``writers`` threads encode the parts, each
    its own part's row groups in order, and at most two row groups per writer wait. ``layout``:
    :data:`LAYOUT` when None; ``compression`` and ``written`` as :func:`write_parquet`'s."""
    layout = layout or LAYOUT
    folder.mkdir()
    reader = relation.to_arrow_reader(layout.batch_rows)
    waiting = threading.Semaphore(2 * writers)
    failed = threading.Event()
    parts = []
    with ThreadPoolExecutor(writers, thread_name_prefix=f"write {folder.name}") as pool:
        groups: queue.Queue[pa.Table | None] | None = None
        size = 0
        try:
            for group in row_groups(reader, layout):
                if groups is None or size >= layout.part_bytes:
                    if groups is not None:
                        groups.put(None)
                    groups, size = queue.Queue(), 0
                    path = folder / PART_NAME.format(len(parts))
                    parts.append(pool.submit(_write_part, path, reader.schema, compression, groups, waiting, failed, written))
                waiting.acquire()
                if failed.is_set():  # a writer's error is raised below
                    waiting.release()
                    break
                groups.put(group)
                size += content_bytes(group)
            if not parts:
                groups = queue.Queue()
                parts.append(pool.submit(
                    _write_part, folder / PART_NAME.format(0), reader.schema, compression, groups, waiting, failed, written
                ))
        finally:
            if groups is not None:
                groups.put(None)
        return [{"file": PART_NAME.format(index), **part.result()} for index, part in enumerate(parts)]


def _write_part(
    path: Path,
    schema: pa.Schema,
    compression: str,
    groups: queue.Queue,
    waiting: threading.Semaphore,
    failed: threading.Event,
    written: Written | None,
) -> dict:
    """Encode the row groups ``groups`` hands over, up to None, into ``path`` (telling
    ``written`` each one's rows); its rows and sha256. After an error it still takes each row
    group up to None, so the reader never waits on it."""
    sink = BackgroundFile(path)
    rows = 0
    taken_all = False
    try:
        with _writer(sink, schema, compression) as writer:
            while (group := groups.get()) is not None:
                try:
                    writer.write_table(group, row_group_size=group.num_rows)
                    rows += group.num_rows
                finally:
                    waiting.release()
                if written is not None:
                    written(group.num_rows)
            taken_all = True  # closing the writer (its footer) may still fail
    except BaseException:
        failed.set()
        while not taken_all and groups.get() is not None:
            waiting.release()
        raise
    finally:
        sha256 = sink.finish()
    return {"rows": rows, "sha256": sha256}
