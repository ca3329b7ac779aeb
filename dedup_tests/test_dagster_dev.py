"""A real `dagster dev`, started by the test: the UI's GraphQL API shows the eleven assets, launches
a run of the whole graph, and serves the candidate reduction from the materialization metadata;
and its daemon runs the batch files put in the batch folder, one at a time, in key order."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from .conftest import FIXTURE, PROJECT_ROOT

pytestmark = pytest.mark.slow

DAGSTER = str(Path(sys.executable).parent / "dagster")
STARTUP_SECONDS = 120
RUN_SECONDS = 180
# the new_batches sensor ticks every 30 s and starts one batch per tick
SENSOR_SECONDS = 240


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _reset_signals() -> None:
    # A shell started in the background ignores SIGINT/SIGTERM and its children inherit that.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _graphql(port: int, query: str, variables: dict | None = None) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        payload = json.loads(response.read())
    assert "errors" not in payload, payload["errors"]
    return payload["data"]


@pytest.fixture
def dagster_dev(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    port = _free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "DEDUP_INPUT": str(FIXTURE),
        "DEDUP_DATABASE": str(tmp_path / "var" / "ui.duckdb"),
        "DEDUP_OUTPUT_DIR": str(tmp_path / "out"),
        "DEDUP_DUCKDB_MEMORY": "1GB",
        "DEDUP_BATCHES": str(tmp_path / "batches"),  # empty until a test puts a batch in it
    }
    (tmp_path / "batches").mkdir()
    log = (tmp_path / "dagster_dev.log").open("w")
    process = subprocess.Popen(
        [DAGSTER, "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_reset_signals,
    )
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            assert process.poll() is None, (tmp_path / "dagster_dev.log").read_text()[-3000:]
            try:
                nodes = _graphql(port, "{ assetNodes { assetKey { path } } }")["assetNodes"]
                if nodes:
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            assert time.monotonic() < deadline, "dagster dev did not serve its assets in time"
            time.sleep(1)
        yield port, tmp_path
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchPipelineExecution(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""
STATUS = 'query Status($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }'
METADATA = """
{ assetNodes { assetKey { path } description groupName
    assetMaterializations(limit: 1) { metadataEntries {
      label ... on TextMetadataEntry { text } } } } }
"""


def materialize_through_ui(port: int, tmp_path: Path, location: str, assets: list[str]) -> None:
    """Launch a run of ``assets`` as the UI's Materialize button does, and wait for its success."""
    launched = _graphql(
        port,
        LAUNCH,
        {
            "params": {
                "selector": {
                    "repositoryLocationName": location,
                    "repositoryName": "__repository__",
                    "jobName": "__ASSET_JOB",
                    "assetSelection": [{"path": [name]} for name in assets],
                },
                "mode": "default",
            }
        },
    )["launchPipelineExecution"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]
    deadline = time.monotonic() + RUN_SECONDS
    status = None
    while status not in ("SUCCESS", "FAILURE", "CANCELED"):
        assert time.monotonic() < deadline, f"run {run_id} still {status}"
        time.sleep(0.5)
        status = _graphql(port, STATUS, {"id": run_id})["runOrError"].get("status")
    assert status == "SUCCESS", (tmp_path / "dagster_dev.log").read_text()[-3000:]


def test_ui_shows_the_graph_and_materializes_it(dagster_dev):
    port, tmp_path = dagster_dev
    every_node = _graphql(port, METADATA)["assetNodes"]
    nodes = [n for n in every_node if n["groupName"] == "deduplication"]
    assert {n["assetKey"]["path"][-1] for n in every_node if n["groupName"] == "incremental"} == {
        "batch_documents", "batch_rejected_documents", "batch_fingerprints", "batch_pairs", "batch_clusters",
        "batch_release",
    }
    assert sorted(n["assetKey"]["path"][-1] for n in nodes) == sorted(
        [
            "documents", "rejected_documents", "fingerprinted", "band_memberships", "candidate_pairs", "scored_pairs",
            "duplicate_pairs", "reference_matches", "clusters", "deduped_documents", "manifest", "recall_audit",
            "evaluation", "boilerplate", "template_clusters",
        ]
    )
    assert all(n["description"] for n in every_node)

    location = _graphql(
        port, "{ workspaceOrError { ... on Workspace { locationEntries { name } } } }"
    )["workspaceOrError"]["locationEntries"][0]["name"]
    assert location == "dedup_assets"  # the name dg dev and a plain dagster dev give it too
    materialize_through_ui(port, tmp_path, location, [n["assetKey"]["path"][-1] for n in nodes])

    nodes = {n["assetKey"]["path"][-1]: n for n in _graphql(port, METADATA)["assetNodes"]}
    entries = {
        e["label"]: e.get("text")
        for e in nodes["candidate_pairs"]["assetMaterializations"][0]["metadataEntries"]
    }
    assert entries["pair_reduction"] == "276 → 18, 93.48% fewer"
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["counts"]["cluster_count"] == 12


RUNS = """
{ runsOrError { ... on Runs { results { runId status startTime tags { key value } } } } }
"""


def test_the_sensor_runs_new_batch_files_one_at_a_time_in_key_order(dagster_dev):
    port, tmp_path = dagster_dev
    header, *rows = FIXTURE.read_text(encoding="utf-8").splitlines(keepends=True)
    # written in the reverse of key order: the sensor must still start with the first key
    for key, part in (("2026-11-02", rows[12:]), ("2026-11-01", rows[:12])):
        (tmp_path / "batches" / f"{key}.csv").write_text(header + "".join(part), encoding="utf-8")
    deadline = time.monotonic() + SENSOR_SECONDS
    while True:
        runs = [
            ({tag["key"]: tag["value"] for tag in run["tags"]}.get("dagster/partition"), run["status"], run["startTime"])
            for run in _graphql(port, RUNS)["runsOrError"]["results"]
        ]
        batch_runs = sorted((run for run in runs if run[0]), key=lambda run: run[2] or float("inf"))  # queued: none yet
        if len(batch_runs) == 2 and all(status in ("SUCCESS", "FAILURE") for _, status, _ in batch_runs):
            break
        assert time.monotonic() < deadline, (runs, (tmp_path / "dagster_dev.log").read_text()[-3000:])
        time.sleep(2)
    assert [(key, status) for key, status, _ in batch_runs] == [("2026-11-01", "SUCCESS"), ("2026-11-02", "SUCCESS")]
    totals = json.loads((tmp_path / "out" / "batches" / "2026-11-02" / "manifest.json").read_text())["totals"]
    assert (totals["batches"], totals["document_rows"]) == (2, 24)
