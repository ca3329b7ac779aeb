"""A full disk under the database, on real tmpfs mounts: an incremental batch and `dedup run`
fail with one sentence naming the place and the setting that moves it, leave no temporary file,
and succeed once there is room again. A temporary payload a killed run left is removed by the
next batch."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from dagster import Failure, materialize

from dedup_assets.assets.batch_graph import INCREMENTAL_ASSETS
from dedup_assets.launch.user_messages import user_message
from dedup_assets.stored_tables.warehouse import DuckDBWarehouse
from dedup_bench.corpus import generate

from .conftest import FIXTURE
from .test_incremental_assets import KEYS, Batches, batches, folder, instance  # noqa: F401 (fixtures)

KEY = KEYS[0]
DATABASE_SETTING = (
    "Free space or fix the folder's permissions, or set DEDUP_DATABASE to a file on a disk with room "
    "(its .wal, .tmp and .payloads sit beside it), then run again."
)


@contextmanager
def tmpfs(mount_point: Path, size: str) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount_point.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)], check=True)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "--lazy", str(mount_point)], check=True)


def fill(disk: Path, leave: int) -> Path:
    """A file taking all of ``disk``'s free space but ``leave`` bytes."""
    filler = disk / "filler"
    with open(filler, "wb") as handle:
        os.posix_fallocate(handle.fileno(), 0, max(shutil.disk_usage(disk).free - leave, 1))
    return filler


def failure_descriptions(result) -> list[str]:
    """What each failed step says to the user (what `dedup run` prints)."""
    return [user_message(event.step_failure_data.error) for event in result.get_step_failure_events()]


@pytest.mark.faults
@pytest.mark.parametrize("filled", ["before the batch", "before its payload"])
def test_a_full_database_disk_fails_the_batch_in_one_sentence_leaves_no_temporary_payload_and_a_rerun_succeeds(
    tmp_path, folder, instance, filled  # noqa: F811
):
    generate(3_000, folder / f"{KEY}.parquet", seed=1)  # a payload of megabytes
    instance.add_dynamic_partitions("batches", [KEY])
    batches = Batches(tmp_path, folder, instance)
    payloads = Path(f"{batches.database}.payloads")
    release = INCREMENTAL_ASSETS[-1]
    with tmpfs(tmp_path / "db", "200m") as disk:
        if filled == "before the batch":
            filler, selection = fill(disk, leave=0), None
            expected = f"Cannot write {batches.database}: no space is left on the device. "
        else:  # room for the staging tables, not for the payload file
            staged = materialize(
                INCREMENTAL_ASSETS[:-1], partition_key=KEY, instance=instance, resources=batches.resources()
            )
            assert staged.success
            filler, selection = fill(disk, leave=256 * 1024), [release.key]
            expected = f"Cannot write the payload of batch {KEY} to {payloads}: no space is left on the device. "
        failed = materialize(
            INCREMENTAL_ASSETS, selection=selection, partition_key=KEY, instance=instance,
            resources=batches.resources(), raise_on_error=False,
        )
        assert not failed.success
        assert failure_descriptions(failed) == [expected + DATABASE_SETTING]
        assert not payloads.is_dir() or os.listdir(payloads) == []

        filler.unlink()
        again = materialize(
            INCREMENTAL_ASSETS, selection=selection, partition_key=KEY, instance=instance,
            resources=batches.resources(),
        )
        assert again.success
        (payload,) = os.listdir(payloads)
        assert payload.startswith(f"{KEY}.") and payload.endswith(".arrow")
        assert batches.indexed_keys() == [KEY]


def test_a_temporary_payload_a_killed_run_left_is_removed_at_the_next_batch(batches):  # noqa: F811
    assert batches.run(KEYS[0]).success
    payloads = Path(f"{batches.database}.payloads")
    (indexed,) = os.listdir(payloads)
    left = payloads / f".{KEYS[1]}.0123456789abcdef.arrow.4242"  # kill -9 mid-write leaves this
    left.write_bytes(b"half a payload")
    assert batches.run(KEYS[1]).success
    assert not left.exists()
    assert [name for name in os.listdir(payloads) if name != indexed][0].startswith(f"{KEYS[1]}.")
    assert len(os.listdir(payloads)) == 2


@pytest.mark.faults
def test_a_full_database_disk_mid_query_ends_the_step_in_one_sentence(tmp_path):
    with tmpfs(tmp_path / "db", "2m") as disk:
        warehouse = DuckDBWarehouse(database=str(disk / "w.duckdb"), memory_limit="1GB")
        with pytest.raises(Failure) as raised, warehouse.cursor() as cursor:
            # outside any transaction of the store's: DuckDB's own autocommit
            cursor.execute(
                "create table big as select repeat('x', 1000) || i::varchar as s from range(100000) r(i)"
            )
        warehouse.teardown_after_execution(None)
    assert raised.value.description == (
        f"Cannot write {disk / 'w.duckdb'}: no space is left on the device. " + DATABASE_SETTING
    )


@pytest.mark.faults
def test_dedup_run_on_a_full_database_disk_says_so_once_without_a_traceback_and_runs_once_there_is_room(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with tmpfs(tmp_path / "db", "4m") as disk:
        database = disk / "cli.duckdb"
        env = {
            **os.environ,
            "DAGSTER_HOME": str(home),
            "DEDUP_INPUT": str(FIXTURE),
            "DEDUP_DATABASE": str(database),
            "DEDUP_OUTPUT_DIR": str(tmp_path / "out"),
            "DEDUP_DUCKDB_MEMORY": "1GB",
        }
        command = [sys.executable, "-m", "dedup_assets.cli", "run"]
        filler = fill(disk, leave=0)
        full = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert full.returncode == 1
        output = full.stdout + full.stderr
        assert f"Error: Cannot write {database}: no space is left on the device. {DATABASE_SETTING}\n" in output
        assert output.count("no space is left") == 1
        assert "Traceback" not in output

        filler.unlink()
        roomy = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert roomy.returncode == 0, roomy.stderr[-3000:]
