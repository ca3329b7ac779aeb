"""Which process a run is judged by (the whole kill-and-mark path is in test_faults.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from dagster import DagsterInstance, DagsterRun

from dedup_assets.launch.processes import alive
from dedup_assets.launch.run_health import PROCESS_TAG, _run_pid, new_run


def test_a_run_is_judged_by_its_own_process_not_one_it_inherited():
    run_id, tags = new_run()
    assert tags == {PROCESS_TAG: f"{run_id} {socket.gethostname()} {os.getpid()}"}
    with DagsterInstance.ephemeral() as instance:
        assert _run_pid(instance, DagsterRun(job_name="dedup_all", run_id=run_id, tags=tags)) == os.getpid()
        # a re-execution copies its parent's tags: the parent's process says nothing about it
        child = DagsterRun(job_name="dedup_all", run_id=str(new_run()[0]), tags=tags)
        assert _run_pid(instance, child) is None
        elsewhere = {PROCESS_TAG: f"{run_id} another-host {os.getpid()}"}
        assert _run_pid(instance, DagsterRun(job_name="dedup_all", run_id=run_id, tags=elsewhere)) is None
        # without the tag, only a local instance's engine events can say; this one is in memory
        assert _run_pid(instance, DagsterRun(job_name="dedup_all", run_id=run_id)) is None


def test_a_process_is_alive_only_if_it_started_before_the_run():
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert not alive(int(finished.stdout), time.time())
    assert alive(os.getpid(), time.time())
    # a process that started after the run cannot be the run's: its id was reused
    assert not alive(os.getpid(), time.time() - 10 * 365 * 24 * 3600)
