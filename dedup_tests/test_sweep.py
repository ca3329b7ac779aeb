"""The parameter sweep: each combination's counts, recall and precision against a plain Python
computation on a generated corpus, its settings checked at launch, and the asset's files in the
output folder's `tuning/`, which a one-shot release keeps."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from dataclasses import replace
from itertools import combinations
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from dagster import materialize
from pydantic import ValidationError

from dedup_assets.assets.tuning import parameter_sweep
from dedup_assets.core.pipeline import sweep as sweep_module
from dedup_assets.core.audit.sample import sample_doc_ids
from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.release.publish import publish
from dedup_assets.core.release.files import verify_release
from dedup_assets.core.lsh.scurve import choose_bands
from dedup_assets.core.settings.model import Settings, SettingsError
from dedup_assets.core.pipeline.sweep_settings import SweepCombination, SweepSettings
from dedup_assets.core.storage.store import open_database
from dedup_assets.core.pipeline.sweep import SWEEP_COLUMNS, run_sweep
from dedup_assets.core.storage.tables import SCHEMA, Tables
from dedup_assets.core.text.normalize import Shingling, document_shingles, normalize_text
from dedup_assets.definitions import defs
from dedup_assets.settings_resource import DedupSettings
from dedup_assets.stored_tables.warehouse import DuckDBWarehouse

from .conftest import FIXTURE, GraphRunner

from dedup_bench.corpus import generate

DOCUMENTS = 3_000
SAMPLE = 1_000
COMBINATIONS = (
    SweepCombination(num_perm=64, rows_per_band=8),
    SweepCombination(num_perm=128, auto_bands=True, false_negative_weight=0.9),
    SweepCombination(num_perm=32, rows_per_band=8, jaccard_threshold=0.6, shingle_size=3),
    SweepCombination(num_perm=64, rows_per_band=16, jaccard_threshold=0.6, shingle_size=3),
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, Path]:
    """A generated corpus and a database whose documents table holds it."""
    folder = tmp_path_factory.mktemp("sweep")
    path = folder / "corpus.parquet"
    generate(DOCUMENTS, path)
    database = folder / "corpus.duckdb"
    run_library(str(path), str(database), None)
    return path, database


def _sweep(database: Path, sweep: SweepSettings, settings: Settings = Settings()):
    with open_database(str(database), "1GB", SCHEMA) as connection:
        return run_sweep(connection, Tables.in_schema(SCHEMA), settings, sweep, "1GB", lambda message: None)


def _true_pairs(bodies: list[str], threshold: float, shingle_size: int) -> set[tuple[int, int]]:
    """Every pair of distinct texts with shingle Jaccard at least ``threshold``: a text's later
    copies (same normalized text) are left out, as is a body without shingles. Pairs that share no
    shingle have Jaccard 0, so only pairs sharing one are compared."""
    first_of_text: dict[str, int] = {}
    sets: dict[int, set[str]] = {}
    for row, body in enumerate(bodies):
        shingles = document_shingles(body, Shingling(shingle_size))
        if shingles and first_of_text.setdefault(normalize_text(body), row) == row:
            sets[row] = shingles
    holders = defaultdict(list)
    for row, shingles in sets.items():
        for shingle in shingles:
            holders[shingle].append(row)
    sharing = {pair for rows in holders.values() for pair in combinations(rows, 2)}
    return {
        (left, right)
        for left, right in sharing
        if len(sets[left] & sets[right]) / len(sets[left] | sets[right]) >= threshold
    }


def _lsh_edges(sample: Path, settings: Settings, folder: Path) -> tuple[dict, set[tuple[str, str]]]:
    """A plain pipeline run on the sample alone: its counts and its edges between distinct texts."""
    database = folder / f"plain-{settings.num_perm}-{settings.rows_per_band}-{settings.shingle_size}.duckdb"
    result = run_library(str(sample), str(database), None, settings)
    with duckdb.connect(str(database), read_only=True) as connection:
        edges = connection.execute(
            "select left_doc_id, right_doc_id from dedup.duplicate_pairs where found_by = 'lsh'"
        ).fetchall()
    return result, set(edges)


@pytest.mark.slow
def test_each_combination_measures_the_pipelines_edges_against_every_true_pair(corpus, tmp_path, monkeypatch):
    path, database = corpus
    truths = []
    text_pairs = sweep_module._text_pairs
    monkeypatch.setattr(
        sweep_module,
        "_text_pairs",
        lambda connection, tables, settings: truths.append((settings.shingling(), settings.jaccard_threshold))
        or text_pairs(connection, tables, settings),
    )
    result = _sweep(database, SweepSettings(COMBINATIONS, SAMPLE))
    assert result.rows.schema == SWEEP_COLUMNS and result.sampled_documents == SAMPLE
    # one ground truth per (shingle_size, threshold), shared by the combinations with it
    assert truths == [(Shingling(5), 0.7), (Shingling(3), 0.6)]

    corpus_table = pq.read_table(path)
    ids = corpus_table.column("doc_id").cast(pa.string())
    sample = corpus_table.filter(pc.is_in(ids, value_set=sample_doc_ids(ids, SAMPLE, Settings().minhash_seed)))
    pq.write_table(sample, tmp_path / "sample.parquet")
    bodies = sample.column("body").to_pylist()
    doc_ids = [str(doc_id) for doc_id in sample.column("doc_id").to_pylist()]
    recalls = []
    for combination, row in zip(COMBINATIONS, result.rows.to_pylist()):
        settings = combination.applied_to(Settings())
        truth = {
            tuple(sorted((doc_ids[left], doc_ids[right])))
            for left, right in _true_pairs(bodies, combination.jaccard_threshold, combination.shingle_size)
        }
        plain, edges = _lsh_edges(tmp_path / "sample.parquet", settings, tmp_path)
        assert (row["candidates"], row["edges"]) == (plain["candidates"], plain["duplicates"]), row["label"]
        assert row["true_pairs"] == len(truth) > 0, row["label"]
        assert row["found_pairs"] == len(truth & edges), row["label"]
        assert row["lsh_edges"] == len(edges), row["label"]
        assert row["recall"] == pytest.approx(len(truth & edges) / len(truth)), row["label"]
        assert row["precision"] == pytest.approx(len(truth & edges) / len(edges)), row["label"]
        assert row["refused"] is None and row["seconds"] >= 0
        recalls.append(row["recall"])
    # the strict bands miss true pairs, so the comparison above is not only of full recall
    assert min(recalls) < 0.9 < max(recalls)

    auto = result.rows.to_pylist()[1]
    assert (auto["bands"], auto["rows"]) == choose_bands(0.7, 128, 0.9)
    assert auto["label"] == f"128: {auto['bands']}x{auto['rows']} auto 0.9 t=0.7 k=5"


def test_a_combination_the_pair_limits_refuse_is_reported_and_the_others_run(corpus):
    _, database = corpus
    loose, strict = SweepCombination(num_perm=64, rows_per_band=2), SweepCombination(num_perm=64, rows_per_band=16)
    # a sample of 1,000 holds a bucket of 3 texts at 32 x 2 (the 500 the audit's keyed sample draws do not)
    result = _sweep(database, SweepSettings((loose, strict), 1000), Settings(max_bucket_size=2))
    refused, ran = result.rows.to_pylist()
    assert "above max_bucket_size=2" in refused["refused"]
    assert refused["candidates"] is None and refused["recall"] is None
    assert ran["refused"] is None and ran["candidates"] > 0 and ran["recall"] is not None


def test_sweep_settings_are_checked_at_launch():
    assert DedupSettings().sweep() == SweepSettings()
    assert DedupSettings(sweep_combinations=[{"num_perm": 32}]).sweep().combinations == (
        replace(SweepCombination(), num_perm=32),
    )
    with pytest.raises(ValidationError, match=r"sweep_combinations\[1\]: num_perm \(60\) must be a positive multiple"):
        DedupSettings(sweep_combinations=[{}, {"num_perm": 60}])
    with pytest.raises(ValidationError, match="the fss scheme supports num_perm up to 512"):
        DedupSettings(sweep_combinations=[{"num_perm": 1024}])
    with pytest.raises(ValidationError, match="sweep_sample_size must be at least 0"):
        DedupSettings(sweep_sample_size=-1)
    with pytest.raises(SettingsError, match="twice"):
        SweepSettings((SweepCombination(), SweepCombination()))
    with pytest.raises(SettingsError, match="at least one"):
        SweepSettings(())


def test_the_sweep_is_in_no_plain_run():
    graph = defs.resolve_asset_graph()
    assert graph.get(parameter_sweep.key).group_name == "tuning"
    selected = {key.path[-1] for key in defs.resolve_job_def("dedup_all").asset_layer.selected_asset_keys}
    assert "documents" in selected and "parameter_sweep" not in selected


def _materialize_sweep(runner: GraphRunner, **settings):
    return materialize(
        [parameter_sweep],
        resources={
            "warehouse": DuckDBWarehouse(database=str(runner.database), memory_limit="1GB"),
            "dedup": DedupSettings(input_path=str(FIXTURE), output_dir=str(runner.output_dir), **settings),
        },
    )


def _without_seconds(text: str) -> list[dict]:
    return [{name: value for name, value in row.items() if name != "seconds"} for row in csv.DictReader(io.StringIO(text))]


def test_the_asset_writes_its_files_to_tuning_which_a_release_keeps(runner):
    assert runner.run(FIXTURE).success
    custom = {
        "sweep_combinations": [{"num_perm": 32, "rows_per_band": 4}, {"num_perm": 64, "auto_bands": True}],
        "sweep_sample_size": 0,
    }
    result = _materialize_sweep(runner, **custom)
    assert result.success
    tuning = runner.output_dir / "tuning"
    assert sorted(path.name for path in tuning.iterdir()) == ["sweep.csv", "sweep.png"]
    written = {path.name: path.read_bytes() for path in tuning.iterdir()}
    rows = _without_seconds(written["sweep.csv"].decode())
    assert [row["label"] for row in rows] == ["32: 8x4", f"64: {'x'.join(map(str, choose_bands(0.7, 64, 0.5)))} auto 0.5"]
    bodies = [row["body"] for row in csv.DictReader(FIXTURE.open(encoding="utf-8"))]
    assert {row["true_pairs"] for row in rows} == {str(len(_true_pairs(bodies, 0.7, 5)))}
    table = runner.table("parameter_sweep")
    assert list(table.columns) == SWEEP_COLUMNS.names and len(table) == 2
    assert runner.lineage("parameter_sweep")["sweep_sampled_documents"] == 24
    metadata = result.asset_materializations_for_node("parameter_sweep")[0].metadata
    assert "| 32: 8x4 | 8 x 4 |" in metadata["sweep"].value
    assert "data:image/png;base64," in metadata["recall_against_candidates"].value

    # a one-shot release replaces the folder and carries tuning/ over, untouched
    assert runner.run(FIXTURE, selection="manifest").success
    assert {path.name: path.read_bytes() for path in tuning.iterdir()} == written
    assert verify_release(runner.output_dir) == []

    # again, over what a killed sweep left: the same rows but for the seconds, and the same picture
    (tuning / ".sweep.csv.tmp-4242").write_text("partial")
    assert _materialize_sweep(runner, **custom).success
    assert sorted(path.name for path in tuning.iterdir()) == ["sweep.csv", "sweep.png"]
    assert _without_seconds((tuning / "sweep.csv").read_text()) == rows
    assert (tuning / "sweep.png").read_bytes() == written["sweep.png"]


def test_kept_folders_a_killed_switch_moved_into_its_staging_folder_are_put_back(tmp_path):
    """An older version kept them inside the release folder and moved them into the new one."""
    out = tmp_path / "out"
    out.mkdir()
    # a kill after the switch moved the kept folders into the staging folder, before the exchange
    staging = tmp_path / ".out.staging-4242"
    (staging / "tuning").mkdir(parents=True)
    (staging / "tuning" / "sweep.csv").write_text("a,b\n")
    (staging / "batches" / "2026-11-01").mkdir(parents=True)
    messages = []
    publish(out, lambda folder: (folder / "manifest.json").write_text("{}"), "db", messages.append)
    assert (out / "tuning" / "sweep.csv").read_text() == "a,b\n" and (out / "batches" / "2026-11-01").is_dir()
    assert messages[0] == "put back batches/, tuning/ that a killed run had moved into .out.staging-4242"


def test_a_share_threshold_sweeps_as_the_passages_it_finds_listed(tmp_path):
    """ignore_shared_above: the sample's shared footer is left out of every combination's run and
    of its truth alike, as a listed footer is (the truth once kept it: 38,975 true pairs)."""
    from .test_boilerplate import footer_pages
    from .conftest import write_csv

    rows, footer = footer_pages()
    pages = write_csv(tmp_path / "pages.csv", rows)
    database = tmp_path / "db.duckdb"
    run_library(str(pages), str(database), None, Settings(audit_sample_size=0))
    sweep = SweepSettings(sample_size=0)
    shared = _sweep(database, sweep, Settings(ignore_shared_above=0.5)).rows
    listed = _sweep(database, sweep, Settings(ignored_passages=[footer])).rows
    columns = [name for name in shared.column_names if name != "seconds"]
    assert shared.select(columns).to_pylist() == listed.select(columns).to_pylist()
    assert min(shared.column("true_pairs").to_pylist()) <= 30
