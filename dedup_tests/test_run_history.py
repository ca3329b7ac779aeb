"""What `dedup run` writes to the run history of DAGSTER_HOME, and how: every step and check of
the run is there for the UI, and its SQLite files are not closed after every event (closing the
last connection to a WAL file checkpoints it and deletes the ``-wal`` file, which the next event
makes again)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from dagster import DagsterEventType, DagsterInstance

from .conftest import PROJECT_ROOT
from .test_cli import cli_env, run_command  # noqa: F401 (a fixture)

DEDUP = str(Path(sys.executable).with_name("dedup"))


def _watch_wal(runs: Path, process: subprocess.Popen) -> list[bool]:
    """Whether the run's ``-wal`` file was there, at every look while the run's process ran."""
    seen: list[bool] = []
    while process.poll() is None:
        files = [path for path in runs.glob("*.db") if path.name != "index.db"]
        if files:
            seen.append(files[0].with_name(files[0].name + "-wal").exists())
        time.sleep(0.002)
    return seen


@pytest.mark.slow
def test_the_run_keeps_its_history_files_open_and_records_every_step_and_check(cli_env, tmp_path):
    runs = Path(cli_env["DAGSTER_HOME"]) / "history" / "runs"
    with open(tmp_path / "stderr", "w+") as stderr:
        process = subprocess.Popen(
            [DEDUP, "run"], cwd=PROJECT_ROOT, env=cli_env, stdout=subprocess.DEVNULL, stderr=stderr
        )
        seen = _watch_wal(runs, process)
        stderr.seek(0)
        assert process.returncode == 0, stderr.read()[-3000:]
    # the -wal file is made once, when the run's file is, and goes once, when the run has ended:
    # never gone between two events and made again
    assert True in seen, seen
    first = seen.index(True)
    gone = seen.index(False, first) if False in seen[first:] else len(seen)
    assert True not in seen[gone:], f"the run's -wal file was deleted and made again {seen[first:].count(False)} looks"
    # and nothing is left open: the last close checkpointed each file, as Dagster's own would
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
