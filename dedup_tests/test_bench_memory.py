"""The benchmark's per-step memory (benchmarks/dedup_bench/memory.py): which step each sample of
the process tree counts for, read from Dagster's log lines, and the sampler on a real child
process with a child of its own."""

import os
import random
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from dedup_bench.common import Sketch, run_measured
from dedup_bench.targets import cluster_lines
from dedup_bench.memory import OUTSIDE_STEPS, WHOLE_RUN, Sample, ShmFiles, StepPeaks, TreeSampler
from dedup_bench.ours import dagster_config
from dedup_bench.roofline import measure_floors
from dedup_bench.stage_tables import (
    BUSY_SAMPLES,
    busy,
    engines_stages_table,
    nodes_table,
    roofline_table,
    stages_table,
)
from dedup_bench.step_log import LineBuffer, step_events

RUN = "2026-11-30 23:39:01 +0000 - dagster - DEBUG - __ASSET_JOB - 0f3c1d2e-aaaa - 4242"


def line(step: str, event: str, message: str) -> str:
    return f"{RUN} - {step} - {event} - {message}"


def start(step: str) -> str:
    return line(step, "STEP_START", f'Started execution of step "{step}".')


def success(step: str) -> str:
    return line(step, "STEP_SUCCESS", f'Finished execution of step "{step}" in 1.2s.')


def sample(mb: float, processes: int = 1, pss: bool = True) -> Sample:
    return Sample(
        private_mb=mb, pss_mb=mb + 10 if pss else None, rss_mb=mb * 2, shm_mb=0.0, processes=processes
    )


def test_step_events_are_read_from_dagster_log_lines_only():
    log = [
        f"{RUN} - RUN_START - Started execution of run for \"__ASSET_JOB\".",
        start("fingerprinted"),
        line("fingerprinted", "STEP_OUTPUT", 'Yielded output "result" of type "Any".'),
        line("fingerprinted", "LOGS_CAPTURED", "Started capturing logs in process (pid: 4242)."),
        success("fingerprinted"),
        line("clusters", "STEP_FAILURE", 'Execution of step "clusters" failed.'),
        "a worker's own line mentioning STEP_START - in passing",
    ]
    assert step_events(log) == [
        ("fingerprinted", "STEP_START"),
        ("fingerprinted", "STEP_SUCCESS"),
        ("clusters", "STEP_FAILURE"),
    ]


def test_log_lines_split_across_reads_are_joined():
    buffer = LineBuffer()
    text = (start("a") + "\n" + success("a") + "\n").encode()
    assert buffer.feed(text[:10]) == []
    assert buffer.feed(text[10:-5]) == [start("a")]
    assert buffer.feed(text[-5:]) == [success("a")]
    assert buffer.feed(b"tail without newline") == []
    assert buffer.flush() == ["tail without newline"]


def test_each_sample_counts_for_every_step_that_ran_since_the_sample_before():
    peaks = StepPeaks()
    peaks.poll([], sample(100))  # CLI start-up
    peaks.poll([("big", "STEP_START")], sample(900, processes=5))
    peaks.poll([], sample(1500, processes=7, pss=False))  # PSS not read on this one
    peaks.poll([], sample(1200))
    # big ends, two short steps start and end, and a third starts, all within one interval:
    # the sample counts for each of them
    events = [
        ("big", "STEP_SUCCESS"),
        ("short", "STEP_START"),
        ("short", "STEP_SUCCESS"),
        ("check", "STEP_START"),
        ("check", "STEP_FAILURE"),
        ("last", "STEP_START"),
    ]
    assert peaks.poll(events, sample(300)) == ["big", "short", "check"]  # ended, peaks final
    assert peaks.poll([], sample(400)) == []
    assert peaks.poll([("last", "STEP_SUCCESS")], sample(350)) == ["last"]
    peaks.poll([], sample(120))  # teardown
    peaks.poll([("never_sampled", "STEP_START"), ("never_sampled", "STEP_SUCCESS")], None)

    by_step = peaks.by_step()
    assert list(by_step) == ["big", "short", "check", "last", OUTSIDE_STEPS, WHOLE_RUN]
    assert by_step["big"] == {
        "samples": 4, "pss_samples": 3, "private_mb": 1500, "pss_mb": 1210, "rss_mb": 3000, "shm_mb": 0.0,
        "processes": 7,
    }
    assert by_step["short"]["private_mb"] == by_step["check"]["private_mb"] == 300
    assert by_step["short"]["samples"] == 1
    assert by_step["last"]["private_mb"] == 400 and by_step["last"]["samples"] == 3
    assert by_step[OUTSIDE_STEPS]["private_mb"] == 120 and by_step[OUTSIDE_STEPS]["samples"] == 2
    assert by_step[WHOLE_RUN]["private_mb"] == 1500 and by_step[WHOLE_RUN]["samples"] == 8
    assert by_step[WHOLE_RUN]["pss_mb"] == 1210 and by_step[WHOLE_RUN]["pss_samples"] == 7
    assert peaks.running == [] and "never_sampled" in peaks.order


def moved(read_mb: float | None, written_mb: float | None, cpu_s: float | None = None) -> Sample:
    return Sample(
        private_mb=1, pss_mb=None, rss_mb=1, shm_mb=0, processes=1,
        read_bytes=None if read_mb is None else int(read_mb * 2**20),
        written_bytes=None if written_mb is None else int(written_mb * 2**20),
        cpu_seconds=cpu_s,
    )


def test_bytes_moved_count_once_for_every_step_that_ran_since_the_sample_before():
    peaks = StepPeaks()
    peaks.poll([], moved(10, 1, 2.0))  # start-up: imports
    peaks.poll([("read", "STEP_START")], moved(110, 1, 3.5))
    peaks.poll([("read", "STEP_SUCCESS"), ("write", "STEP_START")], moved(120, 51, 4.0))
    # a process left the tree unreaped: its bytes and seconds stay counted, and are not counted
    # again when the sum comes back
    peaks.poll([], moved(90, 41, 3.0))
    peaks.poll([], moved(None, None))  # counters unreadable: nothing, and no new baseline
    peaks.poll([("write", "STEP_SUCCESS")], moved(90, 141, 6.0))
    peaks.poll([], moved(125, 141, 6.25))  # teardown

    by_step = peaks.by_step()
    # the boundary interval (10 MB read, 50 written) counts for both steps
    assert (by_step["read"]["read_mb"], by_step["read"]["written_mb"]) == (110, 50)
    assert (by_step["write"]["read_mb"], by_step["write"]["written_mb"]) == (10, 140)
    assert (by_step[OUTSIDE_STEPS]["read_mb"], by_step[OUTSIDE_STEPS]["written_mb"]) == (15, 1)
    assert (by_step[WHOLE_RUN]["read_mb"], by_step[WHOLE_RUN]["written_mb"]) == (125, 141)
    cpu = {step: figures["cpu_s"] for step, figures in by_step.items()}
    assert cpu == {"read": 2.0, "write": 2.5, OUTSIDE_STEPS: 2.25, WHOLE_RUN: 6.25}


def on_nodes(head_cpu: float | None, other_cpu: float | None, mb: float = 100.0) -> Sample:
    return Sample(
        private_mb=1, pss_mb=None, rss_mb=1, shm_mb=0, processes=1,
        nodes=(("head", mb, 3, head_cpu), ("other", mb / 2, 2, other_cpu)),
    )


def test_a_nodes_cpu_seconds_count_from_its_first_sample_for_the_steps_that_ran():
    peaks = StepPeaks()
    peaks.poll([], on_nodes(500.0, 80.0))  # the cluster ran before this run: a baseline
    peaks.poll([("pairs", "STEP_START")], on_nodes(503.0, 81.0))
    peaks.poll([], on_nodes(None, 85.0))  # the head unreadable: no baseline moves
    # a worker left unreaped: the head's sum drops, and is not counted again when it comes back
    peaks.poll([("pairs", "STEP_SUCCESS")], on_nodes(502.0, 85.5, mb=300.0))
    peaks.poll([], on_nodes(506.0, 86.0))

    by_step = peaks.by_step()
    cpu = {step: {node: figures["cpu_s"] for node, figures in by_step[step]["nodes"].items()} for step in by_step}
    assert cpu == {
        "pairs": {"head": 3.0, "other": 5.5},
        OUTSIDE_STEPS: {"head": 3.0, "other": 0.5},
        WHOLE_RUN: {"head": 6.0, "other": 6.0},
    }
    assert by_step[WHOLE_RUN]["nodes"]["head"]["private_mb"] == 300.0


def test_a_cluster_run_is_set_against_the_local_run_its_driver_share_and_its_busiest_node():
    local = {**run("duckdb", {"a": 2.0}, {WHOLE_RUN: 500.0}, 40.0), "cpu_s": 70.0}
    cluster = {**run("ray", {"a": 6.0}, {WHOLE_RUN: 900.0}, 100.0), "cpu_s": 12.0}
    cluster["memory"]["steps"][WHOLE_RUN]["nodes"] = {
        "node 0 (head)": {"private_mb": 5000.0, "processes": 9, "cpu_s": 60.0},
        "node 1": {"private_mb": 3000.0, "processes": 7, "cpu_s": 48.0},
    }
    targets: dict = {}
    lines = cluster_lines(local, [cluster], targets)
    assert lines[0].startswith("Dagster ray on 2 nodes vs Dagster: 2.50× the wall time (100.0 s against 40.0 s; target ≤ 2× at 1M)")
    assert lines[0].endswith("NOT met") and lines[1].endswith("— met") and lines[2].endswith("NOT met"), lines
    assert lines[1].startswith("Dagster ray: the Dagster process used 10.0% of the run's CPU seconds (12.0 of 120.0")
    assert lines[2].startswith("Dagster ray: busiest node node 0 (head) peaked at 5,000 MB (target ≤ 4,096 at 5M)")
    (record,) = targets["cluster"]
    assert (record["nodes"], record["nodes_cpu_s"], record["busiest_node"]) == (2, 108.0, "node 0 (head)")
    # a local run beside no cluster: no lines
    assert cluster_lines(local, [run("ray", {"a": 1.0}, {WHOLE_RUN: 1.0}, 1.0)], {}) == []


def test_the_roofline_sets_each_step_against_its_bytes_at_the_measured_rates():
    floors = {"read_mb_s": 1000.0, "write_mb_s": 100.0, "hash_mb_s": 500.0, "body_mb": 1000.0, "measured_mb": 64.0}
    timed = run("duckdb", {"documents": 4.0, "fingerprinted": 9.0, "checks": 0.5}, {}, 15.0)
    timed["memory"]["steps"] = {
        "documents": {"read_mb": 1000.0, "written_mb": 100.0, "cpu_s": 6.0, "samples": 20},  # floor 1 + 1 s
        "fingerprinted": {"read_mb": 500.0, "written_mb": 50.0},  # 0.5 + 0.5 + 2 s of hashing
        WHOLE_RUN: {"read_mb": 1600.0, "written_mb": 160.0, "cpu_s": 24.0, "samples": 75},
    }
    table = roofline_table(timed, floors).splitlines()
    assert table[2] == "| documents | 4.00 | 6.0 | 1.50 | 1,000 | 100 | - | 2.00 | 2.0× | yes |"
    # no CPU seconds sampled (a record from before they were)
    assert table[3] == "| fingerprinted | 9.00 | - | - | 500 | 50 | 1,000 | 3.00 | 3.0× | yes |"
    # checks: timed, but no bytes sampled; the whole process: its own bytes, and the bodies
    # hashed once by fingerprinted (1.6 + 1.6 + 2 s)
    assert table[4] == "| **whole process** | 15.00 | 24.0 | 1.60 | 1,600 | 160 | 1,000 | 5.20 | 2.9× | yes |"
    assert len(table) == 5
    # a step of fewer samples is mostly boundary intervals, counted for its neighbours too
    assert busy({"cpu_s": 0.4, "samples": BUSY_SAMPLES - 1}, 0.1) == "-"
    assert busy({"cpu_s": 0.4, "samples": BUSY_SAMPLES}, 0.25) == "1.60"
    timed["steps"]["documents"] = 6.5
    assert roofline_table(timed, floors).splitlines()[2].endswith("| 3.2× | no |")


def test_the_floors_are_measured_on_this_machine(tmp_path):
    corpus = tmp_path / "c.parquet"
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(7)
    bodies = [" ".join(f"{rng.getrandbits(40):x}" for _ in range(200)) for _ in range(2_000)]  # 4 MB, incompressible
    pq.write_table(pa.table({"doc_id": list(range(2_000)), "body": bodies}), corpus)
    floors = measure_floors(corpus, tmp_path, floor_mb=1)
    assert floors.read_mb_s > 0 and floors.write_mb_s > 0 and floors.hash_mb_s > 0
    assert 0.9 < floors.measured_mb <= 1  # the first MB of the file, whole words
    # the body column's uncompressed bytes: the text, and its offsets and page headers
    text_mb = sum(len(body) for body in bodies) / 2**20
    assert text_mb <= floors.body_mb <= text_mb * 1.01
    assert list(tmp_path.iterdir()) == [corpus]  # the write probe's file is gone


def test_the_ray_run_measures_the_engine_not_the_checks_second_duckdb_run():
    sketch = Sketch(128)
    ray = dagster_config(sketch, "ray")["resources"]
    assert ray["dedup"]["config"]["engine"] == "ray"
    assert ray["engine"] == {"config": {"compare_up_to_documents": 0}}
    compared = dagster_config(sketch, "ray", compare_engines=True)["resources"]
    assert "engine" not in compared
    duckdb = dagster_config(sketch, "duckdb")["resources"]
    assert duckdb["dedup"]["config"]["engine"] == "duckdb" and "engine" not in duckdb
    assert "engine" not in dagster_config(sketch)["resources"]["dedup"]["config"]


def run(engine: str, steps: dict[str, float], peaks: dict[str, float], wall: float) -> dict:
    return {
        "engine": engine,
        "wall_s": wall,
        "steps": steps,
        "memory": {
            "steps": {
                step: {"private_mb": mb, "pss_mb": mb, "rss_mb": mb, "shm_mb": 0.0, "processes": 1, "samples": 1}
                for step, mb in peaks.items()
            }
        },
    }


def test_the_stage_tables_put_each_step_beside_its_peak_and_the_ratio():
    duckdb = run("duckdb", {"a": 2.0, "b": 1.0}, {"a": 400.0, "b": 500.0, WHOLE_RUN: 500.0}, 5.0)
    ray = run("ray", {"a": 6.0, "b": 1.0}, {"a": 2000.0, WHOLE_RUN: 2000.0}, 10.0)
    single = stages_table(ray).splitlines()
    assert single[2].startswith("| a | 6.000 | 2,000 |")
    assert single[3].startswith("| b | 1.000 | - |")  # timed but never sampled
    assert single[4].startswith("| (outside steps) | 3.000 |")
    side = engines_stages_table(duckdb, ray).splitlines()
    assert side[0].startswith("| step | duckdb s | ray s | ray ÷ duckdb s |")
    assert side[2] == "| a | 2.000 | 6.000 | 3.00× | 400 | 2,000 | 5.00× |"
    assert side[3] == "| b | 1.000 | 1.000 | 1.00× | 500 | - | - |"
    assert side[-1] == "| **whole process** | 5.000 | 10.000 | 2.00× | 500 | 2,000 | 4.00× |"


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="needs /dev/shm")
def test_a_descriptor_number_reused_between_samples_is_looked_at_again(tmp_path):
    shm = ShmFiles()
    pid = [os.getpid()]
    before = shm.held_bytes(pid)
    with open(tmp_path / "plain", "wb") as plain:
        plain.write(b"p" * 2**20)
        number = plain.fileno()
        assert shm.held_bytes(pid) == before  # a file elsewhere does not count
    # the lowest free number: the one the plain file just gave back
    with tempfile.TemporaryFile(dir="/dev/shm") as held:
        assert held.fileno() == number
        held.write(b"o" * 2**20)
        held.flush()
        assert shm.held_bytes(pid) == before + 2**20
    with open(tmp_path / "plain", "rb") as plain:
        assert plain.fileno() == number
        assert shm.held_bytes(pid) == before


BLOCK_MB = 200  # a worker's anonymous memory: far above what a bare interpreter holds

# The module the measured tree's processes wait with: ``sampled(n)`` returns once the sampler has
# taken n samples wholly after the call (the first sample to end after it may have begun before
# it; each later one began after the one before ended).
SAMPLED = """
import os, time

def sampled(samples=1):
    seen, deadline = os.path.getsize({counter!r}), time.monotonic() + 120  # only against a hang
    while os.path.getsize({counter!r}) < seen + samples + 1:
        assert time.monotonic() < deadline, "the sampler took no samples"
        time.sleep(0.01)
"""


@pytest.fixture
def waits_for_samples(tmp_path, monkeypatch) -> dict[str, str]:
    """The environment in which the measured tree can ``from sampled import sampled``. The tree
    waits for samples where it would sleep, so which processes and steps each sample sees does
    not depend on how busy the machine is."""
    counter = tmp_path / "samples"
    counter.touch()
    take = TreeSampler.sample

    def counted(sampler):
        taken = take(sampler)
        with counter.open("a") as dots:
            dots.write(".")
        return taken

    monkeypatch.setattr(TreeSampler, "sample", counted)
    (tmp_path / "sampled.py").write_text(SAMPLED.format(counter=str(counter)))
    return {"PYTHONPATH": str(tmp_path)}


# a Ray worker stand-in: its memory, half a CPU second of spinning, and held until sampled
WORKER = textwrap.dedent(
    f"""
    import time
    from sampled import sampled
    block = b"x" * ({BLOCK_MB} * 2**20)
    end = time.process_time() + 0.5
    while time.process_time() < end:
        pass
    sampled()
    """
)

HOLDER = textwrap.dedent(
    """
    import subprocess, sys, tempfile
    # 64 MB in an unlinked /dev/shm file held open, as raylet holds Ray's object store, and a
    # worker (argv[1]) below this process, as a worker below raylet
    shm = tempfile.TemporaryFile(dir="/dev/shm")
    shm.write(b"o" * (64 * 2**20))
    shm.flush()
    subprocess.run([sys.executable, "-c", sys.argv[1]], check=True)
    """
)

# a Dagster run stand-in: its step lines on stderr, step small, whose child writes 48 MB and
# exits at once, a sample outside steps, then step big, with argv[2:] run below it
CHILD = textwrap.dedent(
    """
    import subprocess, sys
    from sampled import sampled
    def log(step, event, message):
        print(f"{sys.argv[1]} - {step} - {event} - {message}", file=sys.stderr, flush=True)
    log("small", "STEP_START", 'Started execution of step "small".')
    sampled()  # small's start is read before its child runs
    writer = "import os; os.write(os.open(os.devnull, os.O_WRONLY), b'w' * (48 * 2**20))"
    subprocess.run([sys.executable, "-c", writer], check=True)
    log("small", "STEP_SUCCESS", 'Finished execution of step "small" in 0.6s.')
    sampled(2)  # small's end is read, then a sample counts for no step
    log("big", "STEP_START", 'Started execution of step "big".')
    sampled()
    subprocess.run([sys.executable, "-c", *sys.argv[2:]], check=True)
    log("big", "STEP_SUCCESS", 'Finished execution of step "big" in 1.2s.')
    sampled()  # big's end is read while the child runs, so its peaks are printed as it ends
    """
)


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="needs /dev/shm")
def test_the_sampler_sums_the_childs_process_tree_per_step(waits_for_samples):
    finished = run_measured([sys.executable, "-c", CHILD, RUN, HOLDER, WORKER], waits_for_samples, sample_memory=True)
    assert finished.returncode == 0, finished.stderr
    memory = finished.memory
    assert memory["error"] is None
    steps = memory["steps"]
    assert list(steps) == ["small", "big", OUTSIDE_STEPS, WHOLE_RUN]
    # small's writer may or may not be alive at a sample, but small never sees big's holder and
    # worker, and big sees the child, the holder and the worker
    assert steps["small"]["processes"] in (1, 2) and steps["big"]["processes"] == 3
    # the /dev/shm file the holder keeps open, once, and the worker's memory below the child's child
    assert 64 <= steps["big"]["shm_mb"] < 70 and steps["small"]["shm_mb"] == 0
    assert steps["big"]["private_mb"] >= BLOCK_MB + steps["big"]["shm_mb"]
    assert steps[WHOLE_RUN]["private_mb"] == steps["big"]["private_mb"]
    # PSS, read on every sample of a small tree, has the worker's memory; not the file, written,
    # not mapped
    assert steps["big"]["pss_samples"] == steps["big"]["samples"]
    assert steps["big"]["rss_mb"] >= steps["big"]["pss_mb"] >= BLOCK_MB
    # the holder's 64 MB write(), and in small the 48 MB of a child that writes and exits at
    # once: counted whether or not a sample saw it alive, as its parent reaps it
    assert steps["big"]["written_mb"] >= 64 and 48 <= steps["small"]["written_mb"] < 64
    assert memory["samples"] >= 5
    # the worker's half CPU second, counted once its parent reaps it even if no sample saw it alive
    assert steps["big"]["cpu_s"] >= 0.45 and steps["small"]["cpu_s"] < steps["big"]["cpu_s"]
    # sampled from /proc in whole clock ticks, so at most the exact figure (and rounding)
    assert steps[WHOLE_RUN]["cpu_s"] <= finished.cpu_s + 0.1


NODE = textwrap.dedent(
    f"""
    import subprocess, sys
    # a Ray node stand-in outside the measured child's tree, with a worker below it
    worker = "b = b'x' * ({BLOCK_MB} * 2**20); print('ready', flush=True); import sys; sys.stdin.read()"
    subprocess.run([sys.executable, "-c", worker], check=True)
    """
)


def test_the_nodes_of_a_joined_cluster_are_measured_apart_from_the_child(capfd, waits_for_samples):
    import subprocess

    node = subprocess.Popen([sys.executable, "-c", NODE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert node.stdout.readline().strip() == "ready"
        finished = run_measured(
            [sys.executable, "-c", CHILD, RUN, "pass"], waits_for_samples, sample_memory=True,
            nodes={"node 0 (head)": [node.pid]},
        )
    finally:
        node.stdin.close()
        node.wait(timeout=30)
    assert finished.returncode == 0, finished.stderr
    steps = finished.memory["steps"]
    for step in ("small", "big", WHOLE_RUN):
        peak = steps[step]["nodes"]["node 0 (head)"]
        assert peak["processes"] == 2 and peak["private_mb"] >= BLOCK_MB
        assert steps[step]["private_mb"] < BLOCK_MB  # the child's own tree does not have the node's
    run = {
        "steps": {"small": 0.6, "big": 1.2},
        "wall_s": 3.0,
        "memory": finished.memory,
        "ray_cluster": {"nodes": {"node 0 (head)": [node.pid], "node 1": []}},
    }
    table = nodes_table(run).splitlines()
    assert table[0] == "| step | seconds | node 0 (head): peak MB (processes) | node 1: peak MB (processes) |"
    big = steps["big"]["nodes"]["node 0 (head)"]["private_mb"]
    assert table[3] == f"| big | 1.200 | {big:,.0f} (2) | - |"
    # each step's peaks were printed as it ended, so a run stopped later would have kept them
    printed = [text for text in capfd.readouterr().err.splitlines() if text.startswith("[memory] big ended")]
    assert printed == [f"[memory] big ended: tree {steps['big']['private_mb']:,.0f} MB, node 0 (head) {big:,.0f} MB"]
