"""Incremental batches on the ray engine, on a real two-node Ray cluster, through the library and
the incremental assets: the index's rows and payloads and each batch's release are the DuckDB
engine's, byte for byte, and a batch leaves the one-shot run's tables in the same database as
they were."""

from __future__ import annotations

import duckdb
import pytest

from dagster import DagsterInstance

from dedup_assets.core.pipeline.library import run_batch, run_library
from dedup_assets.core.settings.model import Settings

from .conftest import sha256_of_files, write_csv
from .test_incremental import _batch_files, _generated_corpus, _index, _releases
from .test_incremental_assets import KEYS, Batches, write_batches

pytestmark = pytest.mark.ray


def _one_shot_documents(database) -> list[tuple]:
    with duckdb.connect(str(database), read_only=True) as connection:
        return connection.execute("select doc_id, body from dedup.documents").fetchall()


def test_batches_on_ray_add_the_duckdb_engines_rows_and_releases(ray_cluster, tmp_path):
    rows = _generated_corpus(pages=300, seed=51)
    # a doc_id of the first batch again in the last: screened out of the batch (duplicate_doc_id)
    # after the engine has written the batch's documents, so the engine must fingerprint the
    # screened rows, not the ones it wrote
    again = dict(rows[3], body="another text under a doc_id the first batch holds " * 3)
    third = len(rows) // 3
    batches = _batch_files(tmp_path / "batches", [rows[:third], rows[third : 2 * third], rows[2 * third :] + [again]])
    write_csv(tmp_path / "all.csv", rows[:50])
    results = {}
    for engine in ("duckdb", "ray"):
        database, output = tmp_path / engine / "index.duckdb", tmp_path / engine / "out"
        settings = Settings(engine=engine)
        # a one-shot run beside the index (50 documents, 2 measured pairs: a hash partition of a
        # join gets no row of one side, which failed on ray before ray_tables.kept)
        one_shot_counts = run_library(str(tmp_path / "all.csv"), str(database), None, settings)["counts"]
        one_shot = _one_shot_documents(database)
        counts = [run_batch(batches, key, str(database), str(output), settings)["counts"] for key in batches.keys()]
        assert _one_shot_documents(database) == one_shot, engine
        releases = {
            key: {name: sha256 for name, sha256 in files.items() if name != "manifest.json"}  # it names the engine
            for key, files in _releases(output).items()
        }
        results[engine] = counts, _index(database), releases, one_shot_counts
    datasets = tmp_path / "ray" / "index.duckdb.datasets"
    assert (datasets / "incremental" / "fingerprinted").is_dir()  # the ray engine fingerprinted the batches
    assert results["ray"] == results["duckdb"]
    counts, index, releases, _ = results["ray"]
    assert len(releases) == 3 and all(releases.values())
    assert [row for row in index["rejected"] if "duplicate_doc_id" in row] != []
    assert sum(batch["document_rows"] + batch["rejected_document_rows"] for batch in counts) == len(rows) + 1


def test_the_incremental_assets_on_ray_add_the_duckdb_engines_rows(ray_cluster, tmp_path, monkeypatch):
    """The batches as Dagster materializes them (``batch_graph.py``), with the engine resource the
    definitions give: the fixture's three batches on each engine, one index each."""
    runs = {}
    folder = write_batches(tmp_path / "batches")  # one folder: the index records each batch's path
    monkeypatch.setenv("DEDUP_BATCHES", str(folder))
    for engine in ("duckdb", "ray"):
        with DagsterInstance.ephemeral() as instance:
            instance.add_dynamic_partitions("batches", KEYS)
            batches = Batches(tmp_path / engine, folder, instance)
            for key in KEYS:
                assert batches.run(key, engine=engine).success
        releases = {key: sha256_of_files(batches.release(key)) for key in KEYS}
        for files in releases.values():
            files.pop("manifest.json")  # it names the engine
        runs[engine] = batches.index(), releases
    assert (tmp_path / "ray" / "db" / "index.duckdb.datasets" / "incremental" / "fingerprinted").is_dir()
    assert runs["ray"] == runs["duckdb"]
