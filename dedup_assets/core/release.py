"""Release files, written by DuckDB straight from the tables, byte-identical for identical runs."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from .inputs import file_sha256
from .stages import Tables, prefetched, sql

# DuckDB hands over small batches, whose memory is reused from batch to batch; fresh memory
# for 50,000-row batches cost 1-2 s of page faults per 1M bodies. Batches are gathered without a
# copy into row groups of about ROW_GROUP_ROWS rows.
READ_BATCH_ROWS = 4_096
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


def write_parquet(relation: duckdb.DuckDBPyRelation, path: Path) -> int:
    """Stream a query into a Parquet file; returns its row count.

    Written by Arrow without dictionary pages: for unique text such as bodies, DuckDB's writer
    spent half its time building dictionaries it then discarded (16 s against 8 s per 1M bodies).
    A worker thread reads the next row group while this one is encoded.
    """
    reader = relation.to_arrow_reader(READ_BATCH_ROWS)
    rows = 0
    hashes = hash_columns(reader.schema)
    with pq.ParquetWriter(
        path,
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
            rows, sha256 = _written_and_hashed(path, lambda: write_parquet(relation, path))
        else:
            relation.write_csv(str(path))
            rows = cursor.sql(f"select count(*) from ({query})").fetchall()[0][0]
            sha256 = file_sha256(path)
    return {"rows": int(rows), "sha256": sha256}


def _written_and_hashed(path: Path, write: Callable[[], int]) -> tuple[int, str]:
    """``write()``, which writes ``path`` front to back, and the file's sha256, hashed in a second
    thread as the bytes land: hashing 1M deduped documents after writing them added 1.2 s."""
    path.write_bytes(b"")
    written = threading.Event()
    with ThreadPoolExecutor(max_workers=1) as hasher:
        digest = hasher.submit(_follow_sha256, path, written)
        try:
            result = write()
        finally:
            written.set()
        return result, digest.result()


def _follow_sha256(path: Path, written: threading.Event) -> str:
    """sha256 of ``path`` while it grows; done once ``written`` was set before a read that found
    nothing more."""
    digest = hashlib.sha256()
    buffer = bytearray(1 << 20)
    view = memoryview(buffer)
    with path.open("rb") as handle:
        while True:
            finished = written.is_set()
            size = handle.readinto(buffer)
            if size:
                digest.update(view[:size])
            elif finished:
                return digest.hexdigest()
            else:
                time.sleep(0.01)
