"""The incremental benchmark's own code (benchmarks/dedup_bench/incremental_runs.py) on a few hundred
documents: the batch files it cuts its corpus into, and its comparison of the index with the
one-shot run, here on runs of the library (the benchmark runs the Dagster CLI)."""

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dedup_assets.core.read.batches import find_batches
from dedup_assets.core.pipeline.library import run_batch, run_library
from dedup_bench.corpus import generate
from dedup_bench.incremental_runs import (
    BATCH_FOLDER,
    ONE_SHOT_FOLDER,
    batch_keys,
    batch_sizes,
    compare_child,
    write_batches,
)
from dedup_bench.ours import parse_in_process_seconds

DOCUMENTS, BATCHES = 300, 4


@pytest.fixture(scope="module")
def split(tmp_path_factory) -> tuple[Path, Path, list[int]]:
    folder = tmp_path_factory.mktemp("split")
    corpus, sizes = folder / "c.parquet", batch_sizes(DOCUMENTS, BATCHES)
    generate(sum(sizes), corpus, seed=5)
    write_batches(corpus, folder / "c.batches", sizes)
    return corpus, folder / "c.batches", sizes


def test_batches_share_the_documents_evenly_then_a_small_batch_has_a_hundredth():
    assert batch_sizes(1_000_000, 10) == [100_000] * 10 + [10_000]
    assert batch_sizes(2000, 3) == [667, 667, 666, 20]
    keys = batch_keys(11)
    assert keys[0] == "part-00" and keys[-1] == "part-10" and sorted(keys) == keys


def test_the_batch_files_are_the_corpus_cut_in_key_order(split):
    corpus, folder, sizes = split
    batches = find_batches(folder / BATCH_FOLDER).batches
    assert [batch.key for batch in batches] == batch_keys(BATCHES + 1)
    tables = [pq.read_table(batch.path) for batch in batches]
    assert [table.num_rows for table in tables] == sizes
    assert pa.concat_tables(tables).equals(pq.read_table(corpus))
    one_shot = sorted((folder / ONE_SHOT_FOLDER).iterdir())
    assert len(one_shot) == BATCHES
    assert all(path.samefile(batch.path) for path, batch in zip(one_shot, batches))


def test_the_batches_equal_the_one_shot_run_until_the_small_batch_adds_documents(split, tmp_path):
    _, folder, _ = split
    batches = find_batches(folder / BATCH_FOLDER)
    index, one_shot = tmp_path / "index.duckdb", tmp_path / "one-shot.duckdb"
    run_library(str(folder / ONE_SHOT_FOLDER), str(one_shot), None)
    *keys, small = batches.keys()
    for key in keys:
        run_batch(batches, key, str(index), None)
    compared = compare_child(index, one_shot)
    assert compared["differences"] == []
    assert compared["one_shot_edges"] == compared["batch_edges"] > 0
    assert compared["one_shot_clusters"] == compared["batch_clusters"] > 0
    run_batch(batches, small, str(index), None)
    assert compare_child(index, one_shot)["differences"] is None


def test_the_dagster_run_time_is_the_executors_time_for_its_steps():
    log = (
        "... - 9988 - ENGINE_EVENT - Executing steps in process (pid: 9988)\n"
        "... - 9988 - ENGINE_EVENT - Finished steps in process (pid: 9988) in 1m2.5s\n"
    )
    assert parse_in_process_seconds(log) == pytest.approx(62.5)
    assert parse_in_process_seconds("no executor line") is None
