"""A benchmark stopped by SIGTERM (``timeout``, ``kill``) stops what it measures: its Dagster run,
started in a session of its own, does not go on without it. A real benchmark on a small generated
corpus, stopped while its Dagster CLI runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .processes import child_processes

pytestmark = pytest.mark.faults

REPO = Path(__file__).resolve().parents[1]
# a guard against a hang only: the corpus, the kernels' warm-up and the start of the run
DEADLINE_S = 600


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_benchmark_stopped_by_sigterm_stops_its_dagster_run(tmp_path):
    env = {**os.environ, "PYTHONPATH": f"{REPO}:{REPO / 'benchmarks'}"}
    command = [sys.executable, "benchmarks/benchmark.py", "--docs", "3000", "--skip-library", "--runs", "1", "--workdir", str(tmp_path)]
    benchmark = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + DEADLINE_S
        run = None
        while run is None and benchmark.poll() is None and time.monotonic() < deadline:
            run = next((pid for pid, _, line in child_processes({benchmark.pid}) if "asset materialize" in line), None)
            time.sleep(0.2)
        assert run is not None, f"no Dagster run started (benchmark exit {benchmark.poll()})"
        benchmark.send_signal(signal.SIGTERM)
        assert benchmark.wait(timeout=120) == 128 + signal.SIGTERM
        # the run's session is killed before the benchmark's exit
        assert not _alive(run), f"the Dagster run {run} outlived the stopped benchmark"
    finally:
        if benchmark.poll() is None:
            benchmark.kill()
            benchmark.wait()
