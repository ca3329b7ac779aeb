"""The benchmark's reading of a Dagster run's log: the steps that compiled kernels (worded by
dedup_assets.launch.warm, which the harness does not import), the asset steps, and what the report
makes of them: each step's kind and share, and the assurance and compile target lines."""

from __future__ import annotations

import sys

from dedup_bench.common import ProcessRun, run_measured
from dedup_bench.ours import dagster_times, step_kind
from dedup_bench.report import dagster_steps_table
from dedup_bench.targets import (
    TARGET_ASSURANCE_SHARE,
    assurance_target,
    compile_line,
    cpu_floor_line,
    speedup_target,
)

from dedup_assets.launch.warm import COMPILE_LINE, step_compiled

PREFIX = "2026-12-04 19:03:57 +0000 - dagster - DEBUG - __ASSET_JOB - 8897cb4c - 2371 - "


def _log(steps: dict[str, float], assets: set[str], extra: list[str]) -> str:
    lines = []
    for step, seconds in steps.items():
        if step in assets:
            lines.append(f"{PREFIX}{step} - ASSET_MATERIALIZATION - Materialized value {step}.")
        lines.append(f'{PREFIX}{step} - STEP_SUCCESS - Finished execution of step "{step}" in {seconds}s.')
    return "\n".join([*extra, *lines])


def _run(steps: dict[str, float], assets: set[str], extra: list[str], wall: float) -> dict:
    log = _log(steps, assets, extra)
    return dagster_times(ProcessRun(["dagster"], 0, wall, 100.0, "", log))


STEPS = {"documents": 2.0, "documents_doc_id_unique": 0.5, "scored_pairs": 3.0, "recall_audit": 1.5, "manifest": 1.0}
ASSETS = {"documents", "scored_pairs", "recall_audit", "manifest"}


def test_a_step_that_compiled_and_a_compile_at_start_are_read_from_the_log():
    warning = f"{PREFIX}scored_pairs - WARNING - {step_compiled('scored_pairs', 3)}"
    started = f"{PREFIX}RUN - ENGINE_EVENT - {COMPILE_LINE}"
    run = _run(STEPS, ASSETS, [started, warning], 20.0)
    assert run["compiled_in_steps"] == {"scored_pairs": 3}
    assert run["compiled_at_start"] is True
    line = compile_line({"Dagster": run}, targets := {})
    assert "NOT met" in line and targets["compiled_while_timed"] == {"Dagster scored_pairs": 3, "Dagster start": 1}
    quiet = _run(STEPS, ASSETS, [], 20.0)
    assert quiet["compiled_in_steps"] == {} and quiet["compiled_at_start"] is False
    assert compile_line({"Dagster": quiet, "library": {"compiled_kernels": 0}}, {}).endswith("none — met")


def test_steps_are_told_apart_and_their_shares_add_up():
    run = _run(STEPS, ASSETS, [], 20.0)
    kinds = {step: step_kind(run, step) for step in STEPS}
    assert kinds == {
        "documents": "deduplication",
        "documents_doc_id_unique": "check",
        "scored_pairs": "deduplication",
        "recall_audit": "audit",
        "manifest": "release",
    }
    table = dagster_steps_table(run)
    assert "| recall_audit | audit | 1.500 | 7.5% |" in table
    assert "| **assurance steps** | check, audit | 2.000 | 10.0% |" in table


def test_the_assurance_target_names_the_largest_step_against_its_share():
    for wall in (20.0, 10.0):
        run = _run(STEPS, ASSETS, [], wall)
        targets = {}
        line = assurance_target(run, targets)
        largest = targets["largest_assurance_step"]
        assert largest["step"] == "recall_audit"
        assert largest["met"] == (1.5 / wall <= TARGET_ASSURANCE_SHARE)
        assert line.endswith("— met" if largest["met"] else "— NOT met")


def test_the_speed_targets_are_issue_52s_against_each_front_end():
    ours = {"wall_s": 10.0, "cpu_s": 20.0}
    peers = [
        {"engine": "peer", "wall_s": 55.0, "cpu_s": 90.0, "finds_pairs": True, "front_end": "python"},
        {"engine": "vec", "wall_s": 25.0, "cpu_s": 30.0, "finds_pairs": True, "front_end": "vectorized"},
        {"engine": "floor", "wall_s": 5.0, "finds_pairs": False, "front_end": "python"},
    ]
    plain, web = {}, {}
    assert speedup_target(ours, peers, plain) == (
        "Dagster e2e vs fastest python peer (peer): 5.50× faster (target ≥ 6×) — NOT met; "
        "4.50× fewer CPU s (target ≥ 4×) — met"
    )
    assert speedup_target(ours, peers, web, web=True).startswith("Dagster e2e vs fastest python peer (peer): 5.50× faster (target ≥ 6× on web-length pages)")
    assert speedup_target(ours, peers, plain, front_end="vectorized") == (
        "Dagster e2e vs fastest vectorized peer (vec): 2.50× faster (target ≥ 3×) — NOT met"
    )
    assert plain["speedup_vs_fastest_vectorized_peer"] == {"peer": "vec", "value": 2.5, "target": 3.0}
    assert (plain["speedup_vs_fastest_peer"]["target"], plain["cpu_ratio_vs_fastest_peer"]["target"]) == (6.0, 4.0)
    assert speedup_target(ours, peers[:1], {}, front_end="vectorized") is None  # no vectorized peer run: no line


def test_a_child_s_cpu_seconds_are_measured_with_its_waited_for_descendants():
    # the child spins 0.4 s and waits for a grandchild that spins 0.4 s more
    spin = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass"
    child = f"import subprocess, sys\n{spin}\nsubprocess.run([sys.executable, '-c', {spin!r}], check=True)"
    finished = run_measured([sys.executable, "-c", child])
    assert finished.returncode == 0
    assert 0.8 <= finished.cpu_s < finished.wall_s + 0.5


def test_the_cpu_floor_says_whether_the_speed_target_is_within_the_machine_s_cpus():
    peers = [{"engine": "peer", "wall_s": 160.0, "cpu_s": 300.0, "finds_pairs": True}]
    record = {}
    line = cpu_floor_line({"wall_s": 30.0, "cpu_s": 50.0}, peers, 2, record)
    assert line == (
        "CPU: our run used 50.0 CPU s (user + sys; peer used 300.0), so on 2 CPUs it cannot take less "
        "than 25.0 s; the speed target needs 26.7 s — within reach by using the CPUs better"
    )
    assert record["cpu_floor_s"] == {"cpu_s": 50.0, "cpus": 2, "floor_s": 25.0, "target_wall_s": 160.0 / 6}
    assert cpu_floor_line({"wall_s": 30.0, "cpu_s": 60.0}, peers, 2, {}).endswith("out of reach without less work")
    assert cpu_floor_line({"wall_s": 30.0}, peers, 2, {}) is None
