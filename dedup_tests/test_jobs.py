"""The named jobs, run from the wired definitions with the warehouse fed by its variables."""

from __future__ import annotations

import duckdb
from dagster import DagsterInstance

from dedup_assets.definitions import defs

from .conftest import FIXTURE


def _stepped(result) -> set[str]:
    return {event.step_key for event in result.all_events if event.event_type_value == "STEP_SUCCESS"}


def test_dedup_all_builds_everything_and_rescore_only_what_follows_the_scores(tmp_path, monkeypatch):
    database = tmp_path / "jobs.duckdb"
    monkeypatch.setenv("DEDUP_DATABASE", str(database))
    monkeypatch.setenv("DEDUP_DUCKDB_MEMORY", "1GB")
    monkeypatch.setenv("DEDUP_INPUT", str(FIXTURE))
    monkeypatch.setenv("DEDUP_OUTPUT_DIR", str(tmp_path / "release"))
    instance = DagsterInstance.ephemeral()

    everything = defs.resolve_job_def("dedup_all").execute_in_process(instance=instance)
    assert everything.success
    assert {"documents", "fingerprinted", "scored_pairs", "manifest"} <= _stepped(everything)

    strict = {"resources": {"dedup": {"config": {"jaccard_threshold": 0.9}}}}
    rescored = defs.resolve_job_def("rescore").execute_in_process(run_config=strict, instance=instance)
    assert rescored.success
    steps = _stepped(rescored)
    assert {"scored_pairs", "duplicate_pairs", "clusters", "deduped_documents", "manifest"} <= steps
    assert not {"documents", "fingerprinted", "band_memberships", "candidate_pairs"} & steps
    with duckdb.connect(str(database), read_only=True) as connection:
        weakest = connection.execute("select min(jaccard) from dedup.duplicate_pairs").fetchone()[0]
    assert weakest >= 0.9
