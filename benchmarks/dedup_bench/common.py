"""What every part of the benchmark shares: the task's constants, its error, and how a child
process is run and measured."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from dedup_assets.core.pipeline.capabilities import CAPABILITIES, REFERENCE

BENCH_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = BENCH_DIR.parent
INSTALL_HINT = "run `make setup-bench` (or `pip install -e '.[bench]'`) in the repository root"

THRESHOLD = 0.7
SHINGLE_SIZE = 5
ROWS_PER_BAND = 8
STDERR_TAIL_LINES = 40


def engine_of(run: dict) -> str:
    """The engine a run's record names; a record from before engines was the reference's."""
    return run.get("engine") or REFERENCE


def run_label(run: dict, table: bool = False) -> str:
    """Our Dagster run's name in the engines table (``table``) or the target lines: as before
    engines for the reference's, else with its engine."""
    engine = "" if is_reference(engine_of(run)) else engine_of(run)
    if table:
        return f"dedup-assets (Dagster e2e{engine and ', ' + engine})"
    return f"Dagster {engine}".strip()


def is_reference(engine: str | None) -> bool:
    """Whether ``engine`` (None: the settings' default, the reference) is the engine the others are
    compared with: its run keeps the names it had before there were engines, and it is the one
    measured against the machine's floors. A capability of the engine, not its name
    (``capabilities.py``), so that a new engine needs no branch here."""
    return CAPABILITIES[engine or REFERENCE].reference


@dataclass(frozen=True)
class Sketch:
    """The sketch settings our runs take: ``perm`` values in bands of ROWS_PER_BAND rows, or,
    with ``false_negative_weight``, the bands ``auto_bands`` chooses for THRESHOLD."""

    perm: int
    scheme: str = "fss"
    false_negative_weight: float | None = None

    def settings(self) -> dict:
        """The ``dedup`` resource's settings (and ``Settings``' fields) for these."""
        chosen = {} if self.false_negative_weight is None else {
            "auto_bands": True, "false_negative_weight": self.false_negative_weight
        }
        return {
            "num_perm": self.perm, "rows_per_band": ROWS_PER_BAND, "hash_scheme": self.scheme,
            "jaccard_threshold": THRESHOLD, **chosen,
        }

    def bands(self) -> tuple[int, int]:
        """(bands, rows per band) in use."""
        from dedup_assets.core.settings.model import Settings

        params = Settings(**self.settings()).sketch_params()
        return params.bands, params.rows_per_band


class BenchmarkError(RuntimeError):
    """A run failed or an input is unusable; the message says which and why."""


def progress(message: str) -> None:
    print(f"[{datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def truth_path(corpus: Path) -> Path:
    """The planted-pairs sidecar next to ``corpus``."""
    return corpus.with_name(corpus.name.removesuffix(".parquet") + ".truth.parquet")


def child_command(call: str, *args) -> list[str]:
    """The command that runs ``dedup_bench.<call>`` (``module.function``) on ``args`` in a child
    process (``child.py``)."""
    return [sys.executable, "-m", "dedup_bench.child", call, json.dumps(args, default=str)]


@dataclass
class ProcessRun:
    """One finished child process: exit code, whole-process wall time, peak RSS and output, and
    its CPU seconds (user and system, of it and the descendants it waited for)."""

    command: list[str]
    returncode: int
    wall_s: float
    peak_rss_mb: float
    stdout: str
    stderr: str
    memory: dict | None = None  # with sample_memory: the tree's peaks per step (memory.py)
    cpu_s: float | None = None

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        return "\n".join(self.stderr.rstrip().splitlines()[-lines:])


def child_env(extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """This environment with ``extra_env``, and the benchmark's package importable."""
    env = {**os.environ, **(extra_env or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BENCH_DIR), env.get("PYTHONPATH")]))
    return env


def run_measured(
    command: list[str],
    extra_env: dict[str, str] | None = None,
    sample_memory: bool = False,
    nodes: dict[str, list[int]] | None = None,
    timeline: bool = False,
) -> ProcessRun:
    """Run ``command`` from the repository root and wait for it with ``os.wait4``.

    Wall time runs from spawn to exit, so it includes interpreter start and imports. Peak RSS is
    the child's own ``ru_maxrss`` (KiB on Linux): the largest of the child and the descendants it
    waited for, each alone, never their sum. Linux starts that figure at this process's own
    peak when the child execs, so the caller keeps large data out of this process until its last
    measured child. Output goes to temporary files, so a chatty child cannot block on a full pipe.
    Dirty pages of the previous run are flushed first, so that their writeback does not land in
    this run's time. With ``sample_memory``, a thread samples the memory of the child's whole
    process tree while it runs, per Dagster step of its log (``memory.py``),
    and the trees of ``nodes``' processes (the Ray cluster it joins), per node; with ``timeline``,
    every sample's time and figure too.
    """
    env = child_env(extra_env)
    os.sync()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        # a session of its own: the child's whole tree (the Dagster run's processes) is stopped
        # with it if the benchmark ends first
        process = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True
        )
        sampler = None
        try:
            if sample_memory:
                from .memory import start_sampler

                sampler = start_sampler(process.pid, err.fileno(), nodes, timeline)
            _, status, usage = os.wait4(process.pid, 0)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):  # the session may have ended by itself
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            if sampler:
                sampler.stop()
            raise
        wall = time.perf_counter() - start
        memory = sampler.stop() if sampler else None
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = (stream.read().decode("utf-8", errors="replace") for stream in (out, err))
        return ProcessRun(
            command, process.returncode, wall, usage.ru_maxrss / 1024, stdout, stderr, memory, usage.ru_utime + usage.ru_stime
        )


def require_success(run: ProcessRun, what: str) -> None:
    """Raise with the last lines of the child's stderr when it exited non-zero."""
    if run.returncode != 0:
        hint = ""
        missing = re.search(r"No module named '([^'.]+)[^']*'", run.stderr)
        if missing and missing.group(1) != "dedup_assets":
            hint = f"\nMissing module {missing.group(1)!r}: {INSTALL_HINT}."
        raise BenchmarkError(
            f"{what} failed with exit code {run.returncode} after {run.wall_s:.1f}s.\n"
            f"command: {' '.join(run.command)}\n"
            f"--- last {STDERR_TAIL_LINES} lines of stderr ---\n{run.stderr_tail()}{hint}"
        )


def run_json_child(what: str, call: str, *args, extra_env: dict[str, str] | None = None) -> tuple[ProcessRun, dict]:
    """Run ``dedup_bench.<call>`` on ``args`` as a measured child: the run and what it returned."""
    run = run_measured(child_command(call, *args), extra_env)
    require_success(run, what)
    return run, last_json_line(run.stdout, what)


def append_json(path: Path | None, record: dict) -> None:
    """One JSON line for the run, appended to ``--json-out`` if given."""
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")


def cli(name: str) -> str:
    """The path of this environment's ``name`` command (dagster, dedup)."""
    command = Path(sys.executable).parent / name
    if not command.exists():
        raise BenchmarkError(f"{command} not found: {INSTALL_HINT}")
    return str(command)


def last_json_line(text: str, what: str) -> dict:
    """The last line of ``text`` that parses as a JSON object."""
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    raise BenchmarkError(f"{what} printed no JSON result line; stdout ends with:\n{text[-2000:]}")
