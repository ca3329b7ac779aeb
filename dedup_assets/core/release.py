"""Release files, streamed out of the DuckDB tables, byte-identical for identical runs."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import io
import json
import mmap
import os
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from .inputs import file_sha256
from .settings import DEFAULT_BATCH_SIZE
from .stages import Tables, prefetched, sql

# DuckDB hands over batches of DEFAULT_BATCH_SIZE rows, whose memory is reused from batch to
# batch (fresh memory for 50,000-row batches cost 1-2 s of page faults per 1M bodies); they are
# gathered without a copy into row groups of about ROW_GROUP_ROWS rows.
ROW_GROUP_ROWS = 49_152
SUMMARY_FILE = "candidate_summary.csv"
LARGE_FILES = ("deduped_documents.parquet", "fingerprinted.parquet")
LIBRARIES = (
    "dagster",
    "dagster-duckdb",
    "dagster-duckdb-pandas",
    "duckdb",
    "pandas",
    "pyarrow",
    "networkx",
    "numpy",
    "numba",
    "warcio",
    "resiliparse",
)


def library_versions() -> dict[str, str]:
    return {name: metadata.version(name) for name in ("dedup-assets", *LIBRARIES)}


def release_queries(tables: Tables) -> dict[str, str]:
    """File name -> the query that fills it. Per-document files keep input order (the order the
    tables are stored in, so the corpus text is never sorted); pair files are sorted by pair."""
    return {
        "fingerprinted.parquet": f"select * from {tables.fingerprinted}",
        SUMMARY_FILE: "select * from candidate_summary",
        "scored_pairs.parquet": f"select * from {tables.scored_pairs}",
        "duplicate_pairs.csv": f"select * from {tables.duplicate_pairs}",
        "clusters.csv": f"select * from {tables.clusters} order by cluster_id, representative_rank",
        "cluster_inspection.csv": sql("cluster_inspection", tables),
        "deduped_documents.parquet": f"select * from {tables.deduped_documents}",
        "rejected_documents.csv": f"select * from {tables.rejected_documents}",
    }


def hash_columns(schema: pa.Schema) -> set[str]:
    """The 64-bit hash columns (and lists of them): random bits, which no codec shrinks
    (compressing them cost 3 s per 1M 128-value signatures for 0.7% of size) and whose min/max
    statistics prune nothing (computing them cost 0.45 s per 1M signatures)."""

    def is_hash(kind: pa.DataType) -> bool:
        while pa.types.is_list(kind) or pa.types.is_fixed_size_list(kind):
            kind = kind.value_type
        return pa.types.is_uint64(kind)

    return {field.name for field in schema if is_hash(field.type)}


def write_parquet(relation: duckdb.DuckDBPyRelation, sink: str | Path | io.RawIOBase) -> int:
    """Stream a query into a Parquet file (a path or a writable file); returns its row count.

    Written by Arrow without dictionary pages: for unique text such as bodies, DuckDB's writer
    spent half its time building dictionaries it then discarded (16 s against 8 s per 1M bodies).
    A worker thread reads the next row group while this one is encoded.
    """
    reader = relation.to_arrow_reader(DEFAULT_BATCH_SIZE)
    rows = 0
    hashes = hash_columns(reader.schema)
    with pq.ParquetWriter(
        sink,
        reader.schema,
        compression={name: "none" if name in hashes else "snappy" for name in reader.schema.names},
        write_statistics=[name for name in reader.schema.names if name not in hashes],
        use_dictionary=False,
    ) as writer:
        for row_group in prefetched(_row_groups(reader)):
            writer.write_table(row_group, row_group_size=row_group.num_rows)
            rows += row_group.num_rows
    return rows


def _row_groups(reader: pa.RecordBatchReader) -> Iterator[pa.Table]:
    """Tables of about ``ROW_GROUP_ROWS`` rows, each with the batches as chunks, not copied."""
    group: list[pa.RecordBatch] = []
    rows = 0
    for batch in reader:
        group.append(batch)
        rows += batch.num_rows
        if rows >= ROW_GROUP_ROWS:
            yield pa.Table.from_batches(group)
            group, rows = [], 0
    if group:
        yield pa.Table.from_batches(group)


def write_release(
    connection: duckdb.DuckDBPyConnection,
    tables: Tables,
    output_dir: Path,
    summarize: Callable[[duckdb.DuckDBPyConnection], tuple[dict, dict]],
) -> dict:
    """Write every release file, then ``manifest.json`` listing them with rows and sha256.
    Returns the manifest as written.

    ``summarize(cursor)`` returns the candidate summary row and the manifest's other entries; it
    runs while the files are written. Files are written two at a time, each on its own cursor,
    largest first: the deduped documents alone keep one core busy for most of the stage."""
    output_dir.mkdir(parents=True, exist_ok=True)
    queries = release_queries(tables)
    largest_first = sorted(
        (name for name in queries if name != SUMMARY_FILE), key=lambda name: name not in LARGE_FILES
    )
    with ThreadPoolExecutor(max_workers=2) as writers:
        files = {
            name: writers.submit(_write_file, connection.cursor(), queries[name], output_dir / name, {})
            for name in largest_first
        }
        with connection.cursor() as cursor:
            candidate_summary, manifest = summarize(cursor)
        files[SUMMARY_FILE] = writers.submit(
            _write_file,
            connection.cursor(),
            queries[SUMMARY_FILE],
            output_dir / SUMMARY_FILE,
            {"candidate_summary": pa.Table.from_pylist([candidate_summary])},
        )
        outputs = [{"file": name, **files[name].result()} for name in queries]
    written = {**manifest, "outputs": outputs}
    (output_dir / "manifest.json").write_text(json.dumps(written, indent=2) + "\n", encoding="utf-8")
    return written


def _write_file(
    cursor: duckdb.DuckDBPyConnection, query: str, path: Path, arrow_inputs: dict[str, pa.Table]
) -> dict:
    """One release file from ``query`` on ``cursor`` (which it closes); its rows and sha256.
    Cursors are made by the calling thread: making them concurrently is not safe."""
    with cursor:
        for name, table in arrow_inputs.items():
            cursor.register(name, table)
        relation = cursor.sql(query)
        if path.suffix == ".parquet":
            sink = _BackgroundFile(path)
            try:
                rows = write_parquet(relation, sink)
            finally:
                sha256 = sink.finish()
        else:
            relation.write_csv(str(path))
            rows = cursor.sql(f"select count(*) from ({query})").fetchall()[0][0]
            sha256 = file_sha256(path)
    return {"rows": int(rows), "sha256": sha256}


class _BackgroundFile(io.RawIOBase):
    """A file for ``pq.ParquetWriter`` whose bytes reach ``path`` (through :class:`_DirectFile`),
    and its sha256, in a thread of their own, so the encoding thread does not wait on the disk:
    all release files of 1M documents took 8.5 and 8.6 s this way (buffered writes then), against
    9.6 and 10.1 s hashing a file as it grew."""

    def __init__(self, path: Path):
        super().__init__()
        self._pending: queue.Queue[bytes | None] = queue.Queue(maxsize=32)
        self._position = 0
        self._digest = hashlib.sha256()
        self._error: BaseException | None = None
        self._handle = _DirectFile(path)
        self._writer = threading.Thread(target=self._drain, name=f"write {path.name}")
        self._writer.start()

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def write(self, data: bytes) -> int:
        if self._error is not None:
            raise self._error
        self._pending.put(data)  # pyarrow hands over immutable bytes
        self._position += len(data)
        return len(data)

    def _drain(self) -> None:
        while (data := self._pending.get()) is not None:
            if self._error is None:
                try:
                    self._handle.write(data)
                    self._digest.update(data)
                except BaseException as error:  # keep taking data so the writer never blocks
                    self._error = error

    def finish(self) -> str:
        """Wait for every byte to be written; the file's sha256."""
        self._pending.put(None)
        self._writer.join()
        try:
            self._handle.close()
        except OSError as error:
            self._error = self._error or error
        if self._error is not None:
            raise self._error
        return self._digest.hexdigest()


class _DirectFile:
    """A file written with O_DIRECT in whole aligned blocks, so its bytes go to the disk without
    being copied into freshly allocated page cache: writing the deduped documents of 1M documents
    took 1.8-2.0 s of system time against 5.3 s (the disk takes 1.3 GB/s this way; buffered
    writes ran at 0.44 GB/s on this machine). Writes are gathered into one block either way; the
    last partial block is written normally. Where the filesystem refuses O_DIRECT, at open
    (tmpfs) or at the first write (EINVAL), the file is written normally."""

    BLOCK_BYTES = 1 << 22

    def __init__(self, path: Path, block_bytes: int = BLOCK_BYTES, direct: bool = True):
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        self._direct = direct and hasattr(os, "O_DIRECT")
        try:
            self._fd = os.open(path, flags | (os.O_DIRECT if self._direct else 0), 0o644)
        except OSError as error:
            if not self._direct or error.errno != errno.EINVAL:
                raise
            self._direct = False
            self._fd = os.open(path, flags, 0o644)
        self._block = mmap.mmap(-1, block_bytes)  # page-aligned, as O_DIRECT requires
        self._filled = 0

    def write(self, data: bytes) -> None:
        pending = memoryview(data)
        while len(pending):
            taken = min(len(pending), len(self._block) - self._filled)
            self._block[self._filled : self._filled + taken] = pending[:taken]
            self._filled += taken
            pending = pending[taken:]
            if self._filled == len(self._block):
                self._flush()

    def close(self) -> None:
        try:
            if self._filled:
                self._stop_direct()  # the rest is not a whole block
                self._flush()
        finally:
            os.close(self._fd)

    def _flush(self) -> None:
        try:
            self._write_all(0)
        except OSError as error:
            if not self._direct or error.errno != errno.EINVAL:
                raise
            self._stop_direct()  # accepted at open, refused at write
            self._write_all(0)
        self._filled = 0

    def _write_all(self, start: int) -> None:
        # offsets into the block rather than memoryview slices: a slice kept alive by an
        # exception's traceback would pin the mapping
        while start < self._filled:
            with memoryview(self._block) as view:
                start += os.write(self._fd, view[start : self._filled])

    def _stop_direct(self) -> None:
        if self._direct:
            fcntl.fcntl(self._fd, fcntl.F_SETFL, fcntl.fcntl(self._fd, fcntl.F_GETFL) & ~os.O_DIRECT)
            self._direct = False
