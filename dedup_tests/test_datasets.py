"""The ray engine's Parquet folders (core/distributed/datasets.py): written in stream order with
positions, viewed by DuckDB without them, and replaced whole or not at all. No Ray needed."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dedup_assets.core.distributed.datasets import (
    POSITION,
    folder_rows,
    in_position_order,
    replace_table,
    view_build,
    write_batches,
    write_positioned,
)


def batches(*sizes: int):
    start = 0
    for size in sizes:
        yield pa.RecordBatch.from_pydict({"doc_id": [f"d{i}" for i in range(start, start + size)]})
        start += size


def test_a_stream_is_written_in_order_and_viewed_without_positions(tmp_path):
    rows = write_batches(tmp_path, "documents", batches(3, 0, 4, 2), rows_per_file=4)
    assert rows == 9
    # a file holds rows_per_file rows (batches split between files), as one row group: Daft
    # hands a step's functions a row group at a time, and each becomes a file of the next table
    files = sorted((tmp_path / "documents").iterdir())
    assert [path.name for path in files] == [
        "part-000000000000.parquet",
        "part-000000000004.parquet",
        "part-000000000008.parquet",
    ]
    assert [(pq.ParquetFile(path).metadata.num_row_groups, pq.ParquetFile(path).metadata.num_rows) for path in files] == [
        (1, 4), (1, 4), (1, 1),
    ]
    assert in_position_order(tmp_path / "documents")
    view = view_build(tmp_path, "documents", (POSITION,))
    assert "order by" not in view.sql  # the files say they are in order: no sort on every read
    with duckdb.connect() as connection:
        assert connection.sql(view.sql).columns == ["doc_id"]
        assert [row[0] for row in connection.sql(view.sql).fetchall()] == [f"d{i}" for i in range(9)]
        positions = connection.sql(f"select {POSITION} from read_parquet('{tmp_path}/documents/*.parquet')").fetchall()
        assert [row[0] for row in positions] == list(range(9))


def test_a_file_ends_at_its_byte_cap_before_its_rows(tmp_path, monkeypatch):
    from dedup_assets.core.distributed import datasets

    # long bodies: the driver gathers a file's row group before writing it, so bytes end it too
    monkeypatch.setattr(datasets, "FILE_BYTES", 2_500)
    long = (pa.RecordBatch.from_pydict({"doc_id": [f"d{i}"], "body": ["x" * 1_000]}) for i in range(7))
    assert write_batches(tmp_path, "documents", long, rows_per_file=100) == 7
    files = sorted((tmp_path / "documents").iterdir())
    assert [pq.ParquetFile(path).metadata.num_rows for path in files] == [3, 3, 1]
    assert in_position_order(tmp_path / "documents")
    # one batch of the same rows is cut by its rows' bytes, not written as one file of 7
    whole = pa.RecordBatch.from_pydict({"doc_id": [f"d{i}" for i in range(7)], "body": ["x" * 1_000] * 7})
    assert write_batches(tmp_path, "again", [whole], rows_per_file=100) == 7
    again = sorted((tmp_path / "again").iterdir())
    assert [pq.ParquetFile(path).metadata.num_rows for path in again] == [3, 3, 1]


def test_an_empty_stream_needs_a_schema_and_still_has_its_columns(tmp_path):
    with pytest.raises(ValueError, match="documents: the stream was empty and has no schema"):
        write_batches(tmp_path, "documents", iter(()), rows_per_file=4)
    schema = pa.schema([("doc_id", pa.string())])
    assert write_batches(tmp_path, "documents", iter(()), rows_per_file=4, schema=schema) == 0
    with duckdb.connect() as connection:
        assert connection.sql(view_build(tmp_path, "documents").sql).columns == ["doc_id"]


def test_a_failed_write_leaves_the_previous_table(tmp_path):
    write_batches(tmp_path, "documents", batches(2), rows_per_file=4)

    def failing(stream):
        yield from stream
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_batches(tmp_path, "documents", failing(batches(5)), rows_per_file=4)
    with duckdb.connect() as connection:
        assert connection.sql(view_build(tmp_path, "documents").sql).fetchall() == [("d0",), ("d1",)]
    assert [path.name for path in tmp_path.iterdir()] == ["documents"]  # no half-written folder left


def test_casts_restore_types_parquet_cannot_keep(tmp_path):
    signature = pa.FixedSizeListArray.from_arrays(pa.array([1, 2, 3, 4], pa.uint64()), 2)
    table = pa.table({"doc_id": ["a", "b"], "signature": signature})
    replace_table(tmp_path, "fingerprinted", lambda folder: pq.write_table(table, folder / "part-000000.parquet"), table.schema)
    view = view_build(tmp_path, "fingerprinted", casts={"signature": "ubigint[2]"})
    with duckdb.connect() as connection:
        assert connection.sql(f"select typeof(signature) from ({view.sql}) limit 1").fetchall() == [("UBIGINT[2]",)]


def test_a_view_orders_rows_the_files_hold_in_any_order(tmp_path):
    def write(folder):
        pq.write_table(pa.table({"doc_id": ["c", "a"], POSITION: pa.array([2, 0], pa.int64())}), folder / "x.parquet")
        pq.write_table(pa.table({"doc_id": ["b"], POSITION: pa.array([1], pa.int64())}), folder / "w.parquet")

    replace_table(tmp_path, "clusters", write, pa.schema([("doc_id", pa.string()), (POSITION, pa.int64())]))
    with duckdb.connect() as connection:
        assert connection.sql(view_build(tmp_path, "clusters", (POSITION,)).sql).fetchall() == [("a",), ("b",), ("c",)]


def positioned(doc_ids: str, positions: list[int]) -> pa.Table:
    return pa.table({"doc_id": list(doc_ids), POSITION: pa.array(positions, pa.int64())})


def test_blocks_written_by_position_are_sorted_named_and_read_in_order(tmp_path):
    def write(folder):
        assert write_positioned(folder, positioned("fd", [5, 3])) == 2
        assert write_positioned(folder, positioned("ba", [1, 0])) == 2
        assert write_positioned(folder, positioned("", [])) == 0  # no file for an empty block

    replace_table(tmp_path, "deduped_documents", write, positioned("", []).schema)
    folder = tmp_path / "deduped_documents"
    # nothing else is left in the folder: each file was written aside and renamed
    assert sorted(path.name for path in folder.iterdir()) == ["part-000000000000.parquet", "part-000000000003.parquet"]
    assert folder_rows(folder) == 4
    assert in_position_order(folder)
    view = view_build(tmp_path, "deduped_documents", (POSITION,))
    assert "order by" not in view.sql
    with duckdb.connect() as connection:
        assert connection.sql(view.sql).fetchall() == [("a",), ("b",), ("d",), ("f",)]


@pytest.mark.parametrize(
    "blocks",
    [
        pytest.param([("ca", [2, 0]), ("b", [1])], id="files overlap"),
        pytest.param([("ac", [0, 2]), ("bd", [1, 3])], id="files interleave"),
    ],
)
def test_a_view_sorts_blocks_that_are_not_runs_of_positions(tmp_path, blocks):
    replace_table(
        tmp_path,
        "clusters",
        lambda folder: [write_positioned(folder, positioned(*block)) for block in blocks],
        positioned("", []).schema,
    )
    assert not in_position_order(tmp_path / "clusters")
    view = view_build(tmp_path, "clusters", (POSITION,))
    with duckdb.connect() as connection:
        rows = [row[0] for row in connection.sql(view.sql).fetchall()]
    assert rows == sorted(rows)


def test_files_that_do_not_declare_their_order_are_sorted(tmp_path):
    # in order, and not overlapping, but written without saying they are sorted (as Daft writes)
    def write(folder):
        pq.write_table(positioned("a", [0]), folder / "part-000000000000.parquet")
        pq.write_table(positioned("b", [1]), folder / "part-000000000001.parquet")

    replace_table(tmp_path, "clusters", write, positioned("", []).schema)
    assert not in_position_order(tmp_path / "clusters")
    assert view_build(tmp_path, "clusters", (POSITION,)).sql.endswith(f"order by {POSITION}")


def test_a_null_position_is_sorted_by_the_view_not_read_as_it_lies(tmp_path):
    def write(folder):
        write_positioned(folder, pa.table({"doc_id": ["a", "n"], POSITION: pa.array([5, None], pa.int64())}))
        write_positioned(folder, positioned("b", [6]))

    replace_table(tmp_path, "clusters", write, positioned("", []).schema)
    assert not in_position_order(tmp_path / "clusters")
    with duckdb.connect() as connection:
        assert connection.sql(view_build(tmp_path, "clusters", (POSITION,)).sql).fetchall() == [("a",), ("b",), ("n",)]
