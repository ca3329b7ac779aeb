"""The incremental graph as Dagster runs it: one partition per batch of DEDUP_BATCHES, materialized
in process with a real instance and DuckDB file, the `new_batches` sensor, the
`same_as_incremental` check, and the real CLI for what a user types."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from dagster import (
    AssetKey,
    AssetRecordsFilter,
    AssetSelection,
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    RunRequest,
    SensorResult,
    build_sensor_context,
    materialize,
)

from dedup_assets.assets import PIPELINE_ASSETS
from dedup_assets.assets.batch_graph import INCREMENTAL_ASSETS
from dedup_assets.batch_runs.batch_sensor import new_batches
from dedup_assets.checks import (
    BATCH_CHECKS,
    PIPELINE_CHECKS,
    batch_records_accounted,
    batch_removals_name_kept_documents,
    same_as_incremental,
)
from dedup_assets.core.incremental.index_changes import forget_batches
from dedup_assets.core.incremental.index_tables import IndexTables
from dedup_assets.engine_resource import EngineResource
from dedup_assets.settings_resource import DedupSettings
from dedup_assets.stored_tables.tables_io import with_tables_io
from dedup_assets.stored_tables.warehouse import DuckDBWarehouse

from .conftest import FIXTURE, sha256_of_files

KEYS = ["2026-11-01", "2026-11-02", "2026-11-03"]
BIN = Path(sys.executable).parent
DAGSTER = str(BIN / "dagster")
DEDUP = str(BIN / "dedup")
BATCH_COMMAND = "dagster asset materialize -m dedup_assets.definitions --select 'group:incremental' --partition {key}"
# the index proper: what batch_release adds a batch to (the staged_* and universe_* tables are scratch)
INDEX = ("batches", "documents", "fingerprints", "band_index", "pairs", "clusters", "members", "moves", "bridges", "rejected")


def fixture_rows() -> pd.DataFrame:
    return pd.read_csv(FIXTURE, dtype=str, keep_default_na=False)


def write_batches(folder: Path, keys: list[str] = KEYS) -> Path:
    """The fixture's 24 documents as three batches of 8, in fixture order."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = fixture_rows()
    for number, key in enumerate(keys):
        rows.iloc[number * 8 : (number + 1) * 8].to_csv(folder / f"{key}.csv", index=False)
    return folder


def error_text(result) -> str:
    """Every message of the run's step failures, causes included."""
    texts = []
    for event in result.get_step_failure_events():
        error = event.step_failure_data.error
        while error is not None:
            texts.append(error.message)
            error = error.cause
    return "\n".join(texts)


class Batches:
    """Materializes batches of one folder into one DuckDB file under tmp_path, on a real instance."""

    def __init__(self, tmp_path: Path, folder: Path, instance: DagsterInstance):
        self.folder = folder
        self.instance = instance
        self.database = tmp_path / "db" / "index.duckdb"
        self.output_dir = tmp_path / "out"

    def warehouse(self) -> DuckDBWarehouse:
        return DuckDBWarehouse(database=str(self.database), memory_limit="1GB")

    def resources(self, **settings) -> dict:
        return with_tables_io({
            "dedup": DedupSettings(output_dir=str(self.output_dir), **settings),
            "warehouse": self.warehouse(),
            "engine": EngineResource(),
        })

    def run(self, key: str, raise_on_error: bool = True, **settings):
        """Materialize batch ``key`` with its checks, as the definitions do."""
        return materialize(
            [*INCREMENTAL_ASSETS, *BATCH_CHECKS],
            partition_key=key,
            instance=self.instance,
            resources=self.resources(**settings),
            raise_on_error=raise_on_error,
        )

    def check(self, key: str, check):
        """Run ``check`` alone for batch ``key``, as the UI's Execute button on a partition does:
        the partition as the run's tag, since materialize's partition_key wants a selected asset
        to take the partitions from (Dagster 1.13's JobDefinition._get_partitions_def)."""
        return materialize(
            [*INCREMENTAL_ASSETS, *BATCH_CHECKS],
            selection=AssetSelection.checks(check),
            tags={"dagster/partition": key},
            instance=self.instance,
            resources=self.resources(),
            raise_on_error=False,
        )

    def one_shot(self, input_path: Path, selection=None):
        return materialize(
            [*PIPELINE_ASSETS, *PIPELINE_CHECKS],
            selection=selection,
            instance=self.instance,
            resources=self.resources(input_path=str(input_path)),
        )

    def metadata(self, asset: str, key: str) -> dict:
        """The metadata of the latest materialization of ``asset`` for partition ``key``."""
        records = self.instance.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey(asset), asset_partitions=[key]), limit=10
        ).records
        assert records, f"{asset} has no materialization for partition {key}"
        return {name: value.value for name, value in records[0].asset_materialization.metadata.items()}

    def sql(self, query: str) -> list[tuple]:
        with duckdb.connect(str(self.database), read_only=True) as connection:
            return connection.execute(query).fetchall()

    def indexed_keys(self) -> list[str]:
        return [key for (key,) in self.sql("select batch_key from incremental.batches order by batch_key")]

    def index(self) -> dict[str, list[tuple]]:
        """Every row of every index table, in a fixed order."""
        with duckdb.connect(str(self.database), read_only=True) as connection:
            return {
                name: sorted(connection.execute(f"select * from incremental.{name}").fetchall(), key=repr)
                for name in INDEX
            }

    def release(self, key: str) -> Path:
        return self.output_dir / "batches" / key


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as instance:
        yield instance


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "batches"
    folder.mkdir()
    monkeypatch.setenv("DEDUP_BATCHES", str(folder))
    return folder


@pytest.fixture
def batches(tmp_path, folder, instance) -> Batches:
    write_batches(folder)
    instance.add_dynamic_partitions("batches", KEYS)
    return Batches(tmp_path, folder, instance)


def check_evaluations(result, name: str) -> list:
    return [evaluation for evaluation in result.get_asset_check_evaluations() if evaluation.check_name == name]


def test_three_batches_in_order_then_a_one_shot_run_over_them_passes_same_as_incremental_until_the_index_loses_an_edge(batches):
    for key in KEYS:
        result = batches.run(key)
        assert result.success
        # every column the UI shows says what it holds
        assert [
            f"{event.asset_key.path[-1]}.{column.name}"
            for event in result.get_asset_materialization_events()
            if "dagster/column_schema" in event.materialization.metadata  # the tables, not a release
            for column in event.materialization.metadata["dagster/column_schema"].value.columns
            if not column.description
        ] == []
    assert batches.indexed_keys() == KEYS

    # batch 1: billing, incident and two model pages; batch 2: the third model page (a duplicate
    # of batch 1's two), retention, retrieval and the support page whose mirror and revision
    # are in batch 3
    assert [batches.metadata("batch_documents", key)["documents"] for key in KEYS] == [8, 8, 8]
    assert [batches.metadata("batch_pairs", key)["candidates_with_earlier_batches"] for key in KEYS] == [0, 2, 2]
    assert [batches.metadata("batch_clusters", key)["removed_against_earlier_batches"] for key in KEYS] == [0, 1, 2]
    assert [batches.metadata("batch_clusters", key)["bridges"] for key in KEYS] == [0, 0, 0]
    manifests = [json.loads((batches.release(key) / "manifest.json").read_text()) for key in KEYS]
    assert manifests[-1]["totals"]["document_rows"] == 24
    assert manifests[-1]["totals"]["kept_documents"] == 12

    one_shot = batches.one_shot(batches.folder)
    assert one_shot.success
    [same] = check_evaluations(one_shot, "same_as_incremental")
    assert same.passed, same.description
    assert "found the same 18 edges" in same.description

    with duckdb.connect(str(batches.database)) as connection:
        left, right = connection.execute(
            "select left_doc_id, right_doc_id from incremental.pairs where is_duplicate "
            "order by left_doc_id, right_doc_id limit 1"
        ).fetchone()
        connection.execute(
            "delete from incremental.pairs where left_doc_id = ? and right_doc_id = ?", [left, right]
        )
    check_only = batches.one_shot(batches.folder, selection=AssetSelection.checks(same_as_incremental))
    assert not check_only.get_asset_materialization_events(), "only the check should run"
    [broken] = check_evaluations(check_only, "same_as_incremental")
    assert not broken.passed
    assert f"1 × an edge of the one-shot run that no batch found: {left} ~ {right}" in broken.description


def results_by_batch(instance: DagsterInstance, check) -> dict:
    """The latest result of ``check`` for each batch, as Dagster's instance records it: partition
    -> (status, description); a check without partitions would have one entry, None."""
    [check_key] = check.check_keys
    latest = {}
    for record in instance.event_log_storage.get_asset_check_execution_history(check_key, limit=100):  # newest first
        latest.setdefault(record.partition, record)
    return {
        partition: (record.status.value, record.event.asset_check_evaluation.description)
        for partition, record in latest.items()
    }


def test_each_batch_s_checks_are_recorded_under_that_batch_and_a_broken_removal_fails_only_its_own(batches):
    for key in KEYS[:2]:
        assert batches.run(key).success
    for check in BATCH_CHECKS:
        results = results_by_batch(batches.instance, check)
        assert sorted(results) == KEYS[:2], (check.check_keys, results)
        assert {status for status, _ in results.values()} == {"SUCCEEDED"}, results
    assert results_by_batch(batches.instance, batch_records_accounted) == {
        key: ("SUCCEEDED", "8 input rows = 8 documents + 0 rejected") for key in KEYS[:2]
    }
    removed = [batches.metadata("batch_clusters", key)["removed_documents"] for key in KEYS[:2]]
    assert results_by_batch(batches.instance, batch_removals_name_kept_documents) == {
        KEYS[0]: ("SUCCEEDED", f"{removed[0]} removed documents, each for a document kept in the batch it names (0 in earlier batches)"),
        KEYS[1]: ("SUCCEEDED", f"{removed[1]} removed documents, each for a document kept in the batch it names (1 in earlier batches)"),
    }

    # batch 2's removal against batch 1 made to name batch 2: its check fails, batch 1's stays
    with duckdb.connect(str(batches.database)) as connection:
        [(doc_id, kept)] = connection.execute(
            "update incremental.staged_clusters set representative_batch = ? "
            "where decision = 'removed_duplicate' and representative_batch = ? returning doc_id, representative_doc_id",
            [KEYS[1], KEYS[0]],
        ).fetchall()
    broken = batches.check(KEYS[1], batch_removals_name_kept_documents)
    assert not broken.success and "1 blocking asset check failed" in error_text(broken)  # a blocking check fails its step
    assert results_by_batch(batches.instance, batch_removals_name_kept_documents) == {
        KEYS[0]: ("SUCCEEDED", f"{removed[0]} removed documents, each for a document kept in the batch it names (0 in earlier batches)"),
        KEYS[1]: ("FAILED", f"{doc_id} is removed for {kept} of batch {KEYS[1]}, which batch {KEYS[1]} does not hold"),
    }
    # batch 1's check again: the staging tables hold batch 2, whose result it must not record as batch 1's
    earlier = batches.check(KEYS[0], batch_removals_name_kept_documents)
    assert not earlier.success
    assert f"incremental.staged_clusters holds batch {KEYS[1]}, not batch {KEYS[0]}" in error_text(earlier)


def test_same_as_incremental_says_it_compared_nothing_when_the_one_shot_input_is_not_the_batches(batches):
    assert batches.run(KEYS[0]).success
    one_shot = batches.one_shot(FIXTURE)
    assert one_shot.success
    [same] = check_evaluations(one_shot, "same_as_incremental")
    assert same.passed and same.metadata["compared"].value is False
    assert same.description.startswith("not compared: this run's documents are not the incremental index's")


def test_changing_a_setting_between_batches_fails_the_batch_naming_the_setting_and_both_values(batches):
    assert batches.run(KEYS[0]).success
    before = batches.index()
    changed = batches.run(KEYS[1], raise_on_error=False, num_perm=128)
    assert not changed.success
    message = error_text(changed)
    assert "the index has num_perm=64, this run num_perm=128" in message, message
    # the index's setting, to run with once (the run config, under Python) or to keep
    assert '"config": {"num_perm": 64}' in message and "add to dedup.yaml in the folder you run from:\n  num_perm: 64" in message
    assert changed.get_failed_step_keys() == {"batch_documents"}
    assert batches.index() == before
    assert batches.indexed_keys() == [KEYS[0]]


def test_re_adding_an_earlier_batch_is_refused_until_forget_batches_takes_it_and_the_later_ones_out(batches):
    for key in KEYS:
        assert batches.run(key).success
    before = batches.index()
    releases = {key: sha256_of_files(batches.release(key)) for key in KEYS}

    again = batches.run(KEYS[1], raise_on_error=False)
    assert not again.success
    message = error_text(again)
    assert f"later batches are in the index already ({KEYS[2]})" in message, message
    assert f"dedup forget-batches {KEYS[1]}" in message
    assert batches.index() == before

    env = {**os.environ, "DEDUP_DATABASE": str(batches.database), "DEDUP_DUCKDB_MEMORY": "1GB"}
    forgot = subprocess.run([DEDUP, "forget-batches", KEYS[1]], env=env, capture_output=True, text=True, timeout=120)
    assert forgot.returncode == 0, forgot.stderr[-3000:]
    assert forgot.stdout.startswith(
        f"{batches.database}: took 2 batch(es) out of the incremental index: {KEYS[1]}, {KEYS[2]}. "
        "Their release folders"
    )
    assert batches.indexed_keys() == [KEYS[0]]

    for key in KEYS[1:]:
        assert batches.run(key).success
    # the same batches added again in the same order make the same index and the same releases
    assert batches.index() == before
    assert {key: sha256_of_files(batches.release(key)) for key in KEYS} == releases


def test_re_materializing_the_latest_batch_writes_byte_identical_release_files(batches):
    for key in KEYS:
        assert batches.run(key).success
    first = sha256_of_files(batches.release(KEYS[-1]))
    assert {"manifest.json", "deduped_documents/part-00000.parquet", "duplicate_pairs.csv", "clusters.csv"} <= set(first)
    before = batches.index()
    assert batches.run(KEYS[-1]).success
    assert sha256_of_files(batches.release(KEYS[-1])) == first
    assert batches.index() == before


def test_two_files_with_one_key_fail_their_partition_and_the_sensor_names_both(tmp_path, folder, instance):
    rows = fixture_rows().iloc[:2]
    rows.to_csv(folder / "a.csv", index=False)
    rows.to_json(folder / "a.jsonl", orient="records", lines=True)
    instance.add_dynamic_partitions("batches", ["a"])
    runner = Batches(tmp_path, folder, instance)

    result = runner.run("a", raise_on_error=False)
    assert not result.success
    message = error_text(result)
    assert f"Batch key 'a' names more than one entry in {folder}: a.csv and a.jsonl" in message, message

    with build_sensor_context(instance=instance, resources=runner.resources()) as context:
        sensed = new_batches(context)
    assert isinstance(sensed, SensorResult)
    assert not sensed.run_requests
    assert "a.csv and a.jsonl" in str(sensed.skip_reason.skip_message)


def test_the_sensor_adds_new_files_as_partitions_and_runs_one_batch_at_a_time_in_key_order(tmp_path, folder, instance):
    write_batches(folder)
    runner = Batches(tmp_path, folder, instance)

    def sense() -> SensorResult:
        with build_sensor_context(instance=instance, resources=runner.resources()) as context:
            return new_batches(context)

    first = sense()
    assert [(request.partitions_def_name, list(request.partition_keys)) for request in first.dynamic_partitions_requests] == [
        ("batches", KEYS)
    ]
    assert [(type(request), request.partition_key) for request in first.run_requests] == [(RunRequest, KEYS[0])]

    instance.add_dynamic_partitions("batches", KEYS)  # what the daemon does with the sensor's request
    assert runner.run(KEYS[0]).success
    second = sense()
    assert not second.dynamic_partitions_requests
    assert [request.partition_key for request in second.run_requests] == [KEYS[1]]

    # a run for a batch that has not finished: nothing more is started meanwhile
    # (DagsterInstance.add_run is not marked public; DagsterRun and delete_run are)
    running = instance.add_run(
        DagsterRun(job_name="__ASSET_JOB", status=DagsterRunStatus.STARTED, tags={"dagster/partition": KEYS[1]})
    )
    waiting = sense()
    assert not waiting.run_requests
    assert f"waiting for run {running.run_id} (batch {KEYS[1]})" in waiting.skip_reason.skip_message
    instance.delete_run(running.run_id)

    for key in KEYS[1:]:
        assert runner.run(key).success
    done = sense()
    assert not done.run_requests
    assert done.skip_reason.skip_message == f"every batch of {folder} is in the index"

    # the latest batch is in the index but its release is not (its run failed after adding it)
    (runner.output_dir / "batches" / KEYS[-1]).unlink()  # the link to it, and its releases
    shutil.rmtree(runner.output_dir / "batches" / f".{KEYS[-1]}.releases")
    assert [request.partition_key for request in sense().run_requests] == [KEYS[-1]]
    assert runner.run(KEYS[-1]).success

    # taken out with forget-batches, a batch runs again though its file did not change
    with duckdb.connect(str(runner.database)) as connection:
        forget_batches(connection, IndexTables.in_schema(), KEYS[-1])
    assert [request.partition_key for request in sense().run_requests] == [KEYS[-1]]
    assert runner.run(KEYS[-1]).success

    # a file that sorts before batches already in the index holds the later ones back, saying why
    write_batches(folder, keys=["2026-10-31"])
    late = sense()
    assert not late.run_requests
    assert "batch 2026-10-31 sorts before batches already in the index" in late.skip_reason.skip_message
    assert "dedup forget-batches 2026-10-31" in late.skip_reason.skip_message


def test_a_batch_without_a_body_column_fails_naming_file_and_column_and_leaves_the_index_as_it_was(batches):
    assert batches.run(KEYS[0]).success
    before = batches.index()
    bad = batches.folder / f"{KEYS[1]}.csv"
    fixture_rows().iloc[8:16].drop(columns=["body"]).to_csv(bad, index=False)

    result = batches.run(KEYS[1], raise_on_error=False)
    assert not result.success
    assert result.get_failed_step_keys() == {"batch_documents"}
    message = error_text(result)
    assert f"{bad}: missing required column(s) body." in message, message
    assert batches.index() == before
    assert batches.indexed_keys() == [KEYS[0]]
    assert not batches.release(KEYS[1]).exists()


# ---- the real CLI ----------------------------------------------------------------------------


@pytest.fixture
def cli(tmp_path) -> dict:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    (tmp_path / "work").mkdir()
    return {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "DEDUP_BATCHES": str(tmp_path / "batches"),
        "DEDUP_DATABASE": str(tmp_path / "var" / "index.duckdb"),
        "DEDUP_OUTPUT_DIR": str(tmp_path / "output"),
        "DEDUP_DUCKDB_MEMORY": "1GB",
    }


def dagster_materialize(env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [DAGSTER, "asset", "materialize", "-m", "dedup_assets.definitions", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )


def register_batches(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([DEDUP, "register-batches"], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_a_batch_file_put_in_the_folder_materializes_once_registered_in_key_order_only(cli, tmp_path):
    work = tmp_path / "work"
    folder = Path(cli["DEDUP_BATCHES"])
    folder.mkdir()
    rows = fixture_rows()
    rows.iloc[:8].to_csv(folder / f"{KEYS[0]}.csv", index=False)

    # loading the definitions registers nothing: Dagster does not know the partition yet
    unknown = dagster_materialize(cli, work, "--select", "group:incremental", "--partition", KEYS[0])
    assert unknown.returncode != 0
    assert 'Started execution of step "batch_documents"' not in unknown.stderr
    registered = register_batches(cli)
    assert registered.returncode == 0, registered.stderr[-3000:]
    assert f"1 batch(es), 1 newly registered as partitions ({KEYS[0]})" in registered.stdout
    first = dagster_materialize(cli, work, "--select", "group:incremental", "--partition", KEYS[0])
    assert first.returncode == 0, first.stderr[-3000:]
    manifest = json.loads((Path(cli["DEDUP_OUTPUT_DIR"]) / "batches" / KEYS[0] / "manifest.json").read_text())
    assert manifest["batch"] == KEYS[0]
    assert manifest["counts"]["document_rows"] == 8

    rows.iloc[8:16].to_csv(folder / f"{KEYS[1]}.csv", index=False)
    rows.iloc[16:].to_csv(folder / f"{KEYS[2]}.csv", index=False)
    assert register_batches(cli).returncode == 0
    early = dagster_materialize(cli, work, "--select", "group:incremental", "--partition", KEYS[2])
    assert early.returncode != 0
    assert f"Batch {KEYS[2]} cannot be added before batch {KEYS[1]}" in early.stderr, early.stderr[-3000:]
    assert BATCH_COMMAND.format(key=KEYS[1]) in early.stderr
    assert 'Started execution of step "batch_fingerprints"' not in early.stderr
    assert not (Path(cli["DEDUP_OUTPUT_DIR"]) / "batches" / KEYS[2]).exists()


def test_register_batches_without_dagster_home_says_how_to_set_it(cli):
    env = {key: value for key, value in cli.items() if key != "DAGSTER_HOME"}
    refused = register_batches(env)
    assert refused.returncode == 2
    assert "DAGSTER_HOME is not set" in refused.stderr and ". ./env.sh" in refused.stderr
