"""Columns of a per-document table taken in place for rows keyed by position
(``ray_tables.AtPositions``), on a real two-node Ray cluster, checked against a plain dict join."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from dedup_assets.core.distributed.datasets import POSITION, write_batches

# Ray is imported by the tests, once the ray_cluster fixture has it, so the fast tier collects this
# module without the ray extra
pytestmark = pytest.mark.ray

ROWS = 5_000


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    from dedup_assets.core.distributed.ray_tables import RayTables

    root = tmp_path_factory.mktemp("positions")
    batches = [
        pa.record_batch({"doc_id": [f"d{i}" for i in range(start, start + 250)], "body": [f"text {i}" for i in range(start, start + 250)]})
        for start in range(0, ROWS, 250)
    ]
    write_batches(root, "documents", batches, rows_per_file=700)  # files and batches out of step
    return RayTables(root, partitions=3)


def taken(tables, keys: pa.Table, blocks: int) -> list[dict]:
    import ray

    from dedup_assets.core.distributed.ray_tables import AtPositions

    dataset = AtPositions(ray.data.from_arrow(keys).repartition(blocks)).take(tables, "documents", ["doc_id", "body"])
    rows = pa.concat_tables([table for table in ray.get(dataset.to_arrow_refs()) if table.num_rows] or [pa.table({})]).to_pylist()
    return sorted(rows, key=lambda row: (row[POSITION], row["tag"]))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_each_key_gets_its_documents_columns_and_keys_without_a_document_are_left_out(ray_cluster, tables, seed):
    rng = random.Random(seed)
    positions = rng.sample(range(ROWS + 200), 900)  # some past the last document
    keys = pa.table({POSITION: pa.array(positions, pa.int64()), "tag": [f"k{p}" for p in positions]})
    expected = sorted(
        ({POSITION: p, "tag": f"k{p}", "doc_id": f"d{p}", "body": f"text {p}"} for p in positions if p < ROWS),
        key=lambda row: (row[POSITION], row["tag"]),
    )
    assert taken(tables, keys, blocks=rng.choice([1, 4, 7])) == expected


def test_a_position_keyed_twice_is_taken_twice_and_no_keys_take_nothing(ray_cluster, tables):
    import ray

    from dedup_assets.core.distributed.ray_tables import AtPositions

    keys = pa.table({POSITION: pa.array([10, 10, 4_999], pa.int64()), "tag": ["a", "b", "c"]})
    assert [(row[POSITION], row["tag"], row["doc_id"]) for row in taken(tables, keys, blocks=2)] == [
        (10, "a", "d10"), (10, "b", "d10"), (4_999, "c", "d4999"),
    ]
    empty = pa.table({POSITION: pa.array([], pa.int64()), "tag": pa.array([], pa.string())})
    dataset = AtPositions(ray.data.from_arrow(empty)).take(tables, "documents", ["body"])
    assert dataset.count() == 0


def test_the_tables_files_are_read_in_the_same_task_as_the_take(ray_cluster, tmp_path):
    """A read split into more blocks than files is never fused with the take's map; on nodes of
    one CPU its tasks held both CPUs while the map waited (the 5M run's crawl). Bodies of web
    page length make Ray Data want more blocks than these files."""
    import ray

    from dedup_assets.core.distributed.session import ray_session
    from dedup_assets.core.distributed.ray_tables import AtPositions, RayTables

    batches = [pa.record_batch({"doc_id": [f"d{i}" for i in range(start, start + 500)], "body": ["w" * 2_000] * 500}) for start in range(0, ROWS, 500)]
    write_batches(tmp_path, "documents", batches, rows_per_file=700)
    keys = pa.table({POSITION: pa.array(range(0, ROWS, 7), pa.int64())})
    with ray_session(None):  # the engine's Ray Data settings
        dataset = AtPositions(ray.data.from_arrow(keys)).take(RayTables(tmp_path, partitions=3), "documents", ["body"])
        stats = dataset.materialize().stats()
    assert "ReadParquet->MapBatches(join)" in stats and "SplitBlocks" not in stats, stats


def test_a_body_taken_for_many_keys_comes_in_parts_and_each_part_goes_through_then(ray_cluster, tmp_path):
    # one 1 MB body keyed 150 times is 150 MB for one documents file: in parts of about
    # TAKEN_BYTES (64 MB), each given to `then` as it is cut, not one block (a dense
    # near-duplicate group's pairs made one 7 GB block and stalled the run)
    import ray

    from dedup_assets.core.distributed.ray_tables import TAKEN_BYTES, AtPositions, RayTables

    tables = RayTables(tmp_path, partitions=2)
    body = "w " * (2**19)
    write_batches(tmp_path, "documents", [pa.record_batch({"doc_id": ["d0", "d1"], "body": [body, "short"]})], rows_per_file=2)
    keys = pa.table({POSITION: pa.array([0] * 150 + [1], pa.int64()), "tag": [f"k{i}" for i in range(151)]})

    def measured(part: pa.Table) -> pa.Table:  # what `then` saw: a part's rows and bytes
        return pa.table({"rows": [part.num_rows], "bytes": [part["body"].nbytes if part.num_rows else 0]})

    parts = pa.concat_tables(ray.get(AtPositions(ray.data.from_arrow(keys)).take(tables, "documents", ["body"], measured).to_arrow_refs()))
    assert sum(parts["rows"].to_pylist()) == 151
    sizes = [size for size in parts["bytes"].to_pylist() if size]
    assert len(sizes) >= 3 and max(sizes) <= TAKEN_BYTES + len(body), sizes
