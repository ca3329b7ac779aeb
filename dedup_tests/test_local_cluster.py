"""``dedup cluster up | down | status`` as a user types them: a real local Ray cluster of two
nodes that a ``dedup run`` on engine ray joins, and that ``down`` stops; and the answers that
need no cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import PROJECT_ROOT
from .test_cli import cli_env  # noqa: F401  (a fixture)

DEDUP = str(Path(sys.executable).parent / "dedup")
ON_RAY = '{"resources": {"dedup": {"config": {"engine": "ray"}}}}'


def dedup(*args: str, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([DEDUP, *args], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def env(cli_env, tmp_path) -> dict:
    return {**cli_env, "DEDUP_CLUSTER_STATE": str(tmp_path / "cluster.json")}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.ray
def test_a_run_joins_the_cluster_that_up_starts_and_down_stops_it(env, tmp_path):
    # as docs/scale-out.md shows them
    up = dedup("cluster", "up", "--nodes", "2", env=env)
    assert up.returncode == 0, up.stdout + up.stderr
    assert "export DEDUP_RAY_ADDRESS=$(dedup cluster address)" in up.stdout
    address = dedup("cluster", "address", env=env).stdout.strip()
    state = json.loads((tmp_path / "cluster.json").read_text())
    try:
        assert state["address"] == address and _alive(state["pid"])
        again = dedup("cluster", "up", env=env)
        assert again.returncode == 1 and "Stop it first: dedup cluster down" in again.stderr
        status = dedup("cluster", "status", env=env)
        assert status.returncode == 0 and f"of 2 nodes (1 CPU each, 1,024 MB of object store each) is up at {address}" in status.stdout
        nodes = subprocess.run(
            [sys.executable, "-c", f"import ray; ray.init(address={address!r}, log_to_driver=False); "
             "print(sum(node['Alive'] for node in ray.nodes()))"],
            capture_output=True, text=True, timeout=120,
        )
        assert nodes.stdout.strip().splitlines()[-1] == "2", nodes.stderr
        run = dedup("run", "--config-json", ON_RAY, env={**env, "DEDUP_RAY_ADDRESS": address}, timeout=900)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
        assert manifest["settings"]["engine"] == "ray" and manifest["counts"]["cluster_count"] == 12
    finally:
        down = dedup("cluster", "down", env=env)
    assert down.returncode == 0 and f"The local cluster at {address} is down." in down.stdout
    assert not _alive(state["pid"]) and not (tmp_path / "cluster.json").exists()
    assert dedup("cluster", "status", env=env).returncode == 1
    assert dedup("cluster", "address", env=env).returncode == 1


def test_without_a_cluster_down_says_so_status_fails_and_bad_sizes_are_refused(env):
    down = dedup("cluster", "down", env=env)
    assert down.returncode == 0 and "No local cluster is up" in down.stdout
    status = dedup("cluster", "status", env=env)
    assert status.returncode == 1 and "Start one: dedup cluster up" in status.stdout
    refused = dedup("cluster", "up", "--nodes", "0", env=env)
    assert refused.returncode == 2 and "--nodes must be at least 1" in refused.stderr


def test_a_state_file_of_a_process_that_died_is_not_a_cluster(env, tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / "cluster.json").write_text(json.dumps(
        {"pid": int(dead.stdout), "started": time.time(), "address": "127.0.0.1:1", "nodes": 2, "cpus_per_node": 1, "object_store_mb": 1}
    ))
    assert dedup("cluster", "status", env=env).returncode == 1
    assert not (tmp_path / "cluster.json").exists()


def test_up_without_ray_says_how_to_install_it(env):
    hidden = "import sys; sys.modules['ray'] = None; from dedup_assets.cli import main; sys.exit(main(['cluster', 'up']))"
    result = subprocess.run([sys.executable, "-c", hidden], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "dedup cluster needs Ray, which is not installed. Install the ray extra (make setup-ray" in result.stderr


def test_a_state_file_this_command_did_not_write_is_no_cluster(env, tmp_path):
    (tmp_path / "cluster.json").write_text('{"pid": 1}')  # no start time: an older version's, or another's
    status = dedup("cluster", "status", env=env)
    assert status.returncode == 1 and "No local cluster is up" in status.stdout and "Traceback" not in status.stderr
