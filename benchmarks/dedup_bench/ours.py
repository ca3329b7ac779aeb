"""Our two runs, each in its own measured process: the real ``dagster asset materialize`` CLI
end to end (on either engine, duckdb or ray), and the library core (``run_library``, DuckDB only)
without Dagster."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .common import REFERENCE, BenchmarkError, ProcessRun, Sketch, cli, is_reference, progress, require_success, run_json_child, run_measured

CORE_STAGES = ("fingerprint", "candidates", "verify", "cluster")
DUCKDB_MEMORY = "2GB"
WARMUP_ROWS = 500
STEP_SUCCESS = re.compile(r'Finished execution of step "([^"]+)" in ([0-9.hms ]+)')
STEPS_IN_PROCESS = re.compile(r"Finished steps in process \(pid: \d+\) in ([0-9.hms ]+)")
DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|h|m|s)")
ASSET_STEP = re.compile(r" - (\S+) - ASSET_MATERIALIZATION - ")
# the warning dedup_assets.launch.warm.step_compiled words, which the executor logs
STEP_COMPILED = re.compile(r"(\S+) compiled (\d+) kernel signature\(s\) inside the step")
COMPILED_AT_START = "Compiling the fast kernels"  # dedup_assets.launch.warm.COMPILE_LINE, before any step
# the steps that check or measure the run rather than make it (asset checks: the steps that
# materialize no asset, found in its log)
AUDIT_STEPS = ("recall_audit", "evaluation", "boilerplate", "template_clusters")
RELEASE_STEPS = ("deduped_documents", "manifest")
UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def dagster_config(sketch: Sketch, engine: str | None = None, compare_engines: bool = False) -> dict:
    """The run's resource config. With ``engine``, the ``dedup`` resource's engine; for one that is
    not the reference (ray), the ``engine_matches_duckdb`` check compares with a DuckDB run only
    when ``compare_engines`` (else ``compare_up_to_documents: 0``: the run measures the engine,
    not the check's second engine)."""
    settings = sketch.settings() if engine is None else {**sketch.settings(), "engine": engine}
    resources: dict = {"dedup": {"config": settings}}
    if not is_reference(engine) and not compare_engines:
        resources["engine"] = {"config": {"compare_up_to_documents": 0}}
    return {"resources": resources}


def duration_seconds(duration: str) -> float:
    """Seconds of a duration as Dagster formats them: 0.83ms, 533ms, 5.6s, 4m52s or 1h4m."""
    return sum(
        float(value) * UNIT_SECONDS[unit] for value, unit in DURATION_PART.findall(duration)
    )


def parse_step_seconds(log: str) -> dict[str, float]:
    """Seconds per step from lines like ``Finished execution of step "fingerprinted" in 1.2s``."""
    return {step: duration_seconds(duration) for step, duration in STEP_SUCCESS.findall(log)}


def parse_in_process_seconds(log: str) -> float | None:
    """The run's time inside Dagster's executor, from ``Finished steps in process (pid: N) in
    4.1s``: the steps plus resource start-up and Dagster's bookkeeping between them, without the
    CLI's imports and definitions load (the log's RUN_START and RUN_SUCCESS have whole seconds
    only)."""
    found = STEPS_IN_PROCESS.search(log)
    return duration_seconds(found.group(1)) if found else None


def fresh_dir(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


@contextmanager
def dagster_home() -> Iterator[str]:
    """A throwaway DAGSTER_HOME with telemetry off, its storage made before any run is timed
    (``dagster instance migrate``): a user's instance has it already, and making it cost a first
    run about 0.4 s."""
    with tempfile.TemporaryDirectory(prefix="bench-dagster-home-") as home:
        Path(home, "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
        try:
            made = subprocess.run(
                [cli("dagster"), "instance", "migrate"], env={**os.environ, "DAGSTER_HOME": home}, capture_output=True,
                text=True, check=False, timeout=300,
            )
        except subprocess.TimeoutExpired:
            raise BenchmarkError(f"dagster instance migrate did not end within 300 s in {home}") from None
        if made.returncode:
            raise BenchmarkError(f"dagster instance migrate failed in {home}: {made.stderr.strip()[-2000:]}")
        yield home


def dagster_times(run: ProcessRun) -> dict:
    """A CLI run's whole-process wall time and peak RSS, Dagster's own times from its log, its
    steps that materialized an asset (the others are asset checks), the steps that compiled kernels (none, once warmed), and, when sampled,
    its process tree's memory per step."""
    return {
        "wall_s": run.wall_s,
        "cpu_s": run.cpu_s,
        "peak_rss_mb": run.peak_rss_mb,
        "steps": parse_step_seconds(run.stderr),
        "in_process_s": parse_in_process_seconds(run.stderr),
        "asset_steps": sorted(set(ASSET_STEP.findall(run.stderr))),
        "compiled_at_start": COMPILED_AT_START in run.stderr,
        "compiled_in_steps": {step: int(count) for step, count in STEP_COMPILED.findall(run.stderr)},
        "memory": run.memory,
    }


def step_kind(run: dict, step: str) -> str:
    """What a step of our Dagster run does: check or audit (the assurance steps), release, or
    deduplication."""
    if "asset_steps" in run and step not in run["asset_steps"]:
        return "check"
    if step in AUDIT_STEPS:
        return "audit"
    return "release" if step in RELEASE_STEPS else "deduplication"


def assurance_steps(run: dict) -> dict[str, float]:
    """The seconds of the run's assurance steps: its checks and its audit."""
    return {step: seconds for step, seconds in run["steps"].items() if step_kind(run, step) in ("check", "audit")}


def run_folder(engine: str | None) -> str:
    """The run's folder in the workdir: ``run`` for the reference, duckdb (as before engines),
    ``run-ray``."""
    return "run" if is_reference(engine) else f"run-{engine}"


def run_dagster(
    corpus: Path,
    workdir: Path,
    sketch: Sketch,
    engine: str | None = None,
    compare_engines: bool = False,
    cluster: dict | None = None,
) -> dict:
    """Materialize the one-shot graph of ``corpus`` (a file or a folder) with the real CLI into a
    fresh database, on ``engine`` (None: the resource's default, duckdb), sampling the memory of
    its process tree per step. For ray, ``cluster`` (``ray_cluster.py``'s line) is a running
    cluster to join, whose nodes are sampled one by one; without it a local Ray starts under the
    CLI."""
    run_dir = fresh_dir(workdir / run_folder(engine))
    database, output_dir = run_dir / "pipeline.duckdb", run_dir / "out"
    with dagster_home() as home:
        env = {
            "DAGSTER_HOME": home,
            "DEDUP_INPUT": str(corpus),
            "DEDUP_DATABASE": str(database),
            "DEDUP_OUTPUT_DIR": str(output_dir),
            # engine ray: a local Ray under the CLI (whose tree the sampler measures) or the
            # benchmark's cluster, and its tables where recall.py reads first_copies, whatever
            # the caller's environment says
            "DEDUP_RAY_ADDRESS": cluster["address"] if cluster else "",
            "DEDUP_DATASETS": f"{database}.datasets",
        }
        # the resources read every path from the environment, so none falls back to a default
        env["DEDUP_DUCKDB_MEMORY"] = DUCKDB_MEMORY
        config = json.dumps(dagster_config(sketch, engine, compare_engines))
        command = [cli("dagster"), "asset", "materialize", "-m", "dedup_assets.definitions", "--select", "group:deduplication"]
        what = "Dagster run" if engine is None else f"Dagster run (engine {engine})"
        progress(f"{what}: {' '.join(command[1:])}")
        run = run_measured([*command, "--config-json", config], env, True, cluster["nodes"] if cluster else None)
        require_success(run, what)
    counts = json.loads((output_dir / "manifest.json").read_text(encoding="utf-8"))["counts"]
    return {
        **dagster_times(run),
        "engine": engine or REFERENCE,
        "counts": counts,
        "candidates": counts["candidate_pair_rows"],
        "accepted": counts["duplicate_pair_rows"],
        "database": str(database),
    }


def run_library_core(corpus: Path, run_dir: Path, sketch: Sketch, head_rows: int | None = None) -> dict:
    """Run the library core in a child process and time its core stages; with ``head_rows``,
    on a sample of the corpus's first rows that the child writes into ``run_dir``."""
    fresh_dir(run_dir)
    database = run_dir / "pipeline.duckdb"
    job = {
        "input_path": str(corpus), "database_path": str(database), "output_dir": str(run_dir / "out"),
        "settings": sketch.settings(), "head_rows": head_rows,
    }
    sample = f" on the first {head_rows} documents" if head_rows else ""
    progress(f"library: dedup_assets.core.pipeline.library.run_library{sample}")
    run, result = run_json_child("library run", "ours.library_child", job)
    stages = result["stages"]
    missing = [stage for stage in CORE_STAGES if stage not in stages]
    if missing:
        raise BenchmarkError(
            f"run_library reported no time for stage(s) {', '.join(missing)}; "
            f"it reported {', '.join(stages)}"
        )
    core_s = sum(stages[stage] for stage in CORE_STAGES)
    return {
        "wall_s": run.wall_s, "cpu_s": run.cpu_s, "peak_rss_mb": run.peak_rss_mb, "stages": stages, "core_s": core_s,
        "core_docs_per_s": result["documents"] / core_s if core_s else None, "documents": result["documents"],
        "compiled_kernels": result["compiled_kernels"], "candidates": result["candidates"],
        "accepted": result["duplicates"], "database": str(database),
    }


def warm_installation() -> None:
    """Compile the kernels if numba's cache lacks them (a plain pip install), before any mode of
    the benchmark times anything; it says so on stderr while it does."""
    run = subprocess.run([sys.executable, "-m", "dedup_assets.launch.warm", "--if-needed"], stdout=sys.stderr, check=False)
    if run.returncode:
        raise BenchmarkError(f"python -m dedup_assets.launch.warm --if-needed failed with exit code {run.returncode}")


def warm_kernels(corpus: Path, workdir: Path, sketch: Sketch) -> float:
    """Run the library on the corpus's first rows so numba's on-disk cache holds every kernel
    before anything is timed; returns how long that took."""
    return run_library_core(corpus, workdir / "warmup", sketch, WARMUP_ROWS)["wall_s"]


def library_child(job: dict) -> dict:
    """The library run's child side: ``run_library`` on the job's corpus (or its first rows)."""
    # imported here, not above: the measuring parent imports this module and stays small
    import pyarrow.parquet as pq

    from dedup_assets.core.pipeline.library import run_library
    from dedup_assets.core.settings.model import Settings
    from dedup_assets.launch.warm import compiled_here

    input_path = job["input_path"]
    if job["head_rows"]:
        input_path = str(Path(job["database_path"]).with_name("sample.parquet"))
        head = pq.ParquetFile(job["input_path"]).read_row_group(0).slice(0, job["head_rows"])
        pq.write_table(head, input_path)
    result = run_library(
        input_path, job["database_path"], job["output_dir"], Settings(**job["settings"]),
        duckdb_memory=DUCKDB_MEMORY, log=lambda message: print(message, file=sys.stderr, flush=True),
    )
    return {**result, "compiled_kernels": compiled_here()}
