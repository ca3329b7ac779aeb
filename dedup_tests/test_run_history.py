"""What `dedup run` writes to the run history of DAGSTER_HOME, and how: every step and check of
the run is there for the UI, and its SQLite files are held open so that they are not closed after
every event (closing the last connection to a WAL file checkpoints it and deletes the ``-wal``
file, which the next event makes again)."""

from __future__ import annotations

import sqlite3
import sys
from contextlib import closing
from pathlib import Path

import pytest
from dagster import DagsterEventType, DagsterInstance

from dedup_assets.launch.history_files import held_open

from .test_cli import cli_env, run_command  # noqa: F401 (a fixture)

DEDUP = str(Path(sys.executable).with_name("dedup"))


def _write_and_close(path: Path) -> None:
    # as Dagster writes an event: a connection of its own that commits and closes
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("insert into events values (1)")
        connection.commit()


def test_held_files_keep_their_wal_between_connections_and_checkpoint_once_let_go(tmp_path):
    """Without a held connection, each close of the last one deletes the -wal file, which the
    next write makes again; held, it stays until the hold ends, and then goes."""
    path = tmp_path / "run.db"
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("pragma journal_mode=wal")
        connection.execute("create table events (id integer)")
    wal = path.with_name("run.db-wal")
    _write_and_close(path)
    assert not wal.exists()  # as Dagster's own connections leave it: deleted at every close
    with held_open([path]):
        for _ in range(3):
            _write_and_close(path)
            assert wal.exists()
    assert not wal.exists()
    with closing(sqlite3.connect(path)) as connection:
        assert connection.execute("select count(*) from events").fetchone()[0] == 4


@pytest.mark.slow
def test_a_run_records_every_step_and_check_and_leaves_no_wal_file(cli_env):
    result = run_command([DEDUP, "run"], cli_env)
    assert result.returncode == 0, result.stderr[-3000:]
    runs = Path(cli_env["DAGSTER_HOME"]) / "history" / "runs"
    # nothing is left open: the last close checkpointed each file, as Dagster's own would
    assert not list(runs.glob("*-wal")) and not list(runs.glob("*-shm"))
    with DagsterInstance.from_config(cli_env["DAGSTER_HOME"]) as instance:
        (record,) = instance.get_run_records()
        logs = instance.all_logs(record.dagster_run.run_id)
    kinds = [entry.dagster_event.event_type for entry in logs if entry.dagster_event]
    # the fixture's run: 14 asset steps (documents makes rejected_documents too) and 15 checks
    assert kinds.count(DagsterEventType.STEP_SUCCESS) == 29
    assert kinds.count(DagsterEventType.ASSET_MATERIALIZATION) == 15
    assert kinds.count(DagsterEventType.ASSET_CHECK_EVALUATION) == 15
    assert kinds[-1] == DagsterEventType.RUN_SUCCESS


def test_a_run_refused_for_its_settings_leaves_no_file_in_the_history(cli_env):
    # the run's file is made before Dagster writes to it; a run refused before it starts has none
    bad = '{"resources": {"dedup": {"config": {"num_perm": 64, "no_such_setting": 1}}}}'
    result = run_command([DEDUP, "run", "--config-json", bad], cli_env)
    assert result.returncode == 1 and "no_such_setting" in result.stderr, result.stderr[-3000:]
    runs = Path(cli_env["DAGSTER_HOME"]) / "history" / "runs"
    assert sorted(path.name for path in runs.iterdir()) == ["index.db"]
