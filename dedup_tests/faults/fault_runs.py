"""Runs in processes of their own: the CLI (:class:`Cli`, to kill, stop, race or starve), what
its Dagster instance and output folder keep afterwards, a tmpfs to fill or make read-only, and
``run_library`` in a child (:func:`library_in_child`) so its time and peak memory are its own."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.release.publish import remains as publish_remains
from dedup_assets.core.release.files import MANIFEST_FILE
from dedup_assets.core.settings.model import Settings

from .outcome import LibraryRun, describe_error, read_library_run

CLI_TIMEOUT = 900
# the checkout's root, where ``python -m dedup_tests.faults`` is found: the tests are not installed
CHECKOUT = Path(__file__).resolve().parents[2]


class Cli:
    """One ``python -m dedup_assets.cli run``; its stderr lines are collected as they come, so a
    case can act when a step is reported."""

    running: list[Cli] = []  # ended by the case runner if a case fails midway

    def __init__(
        self,
        folder: Path,
        input_path: Path,
        database: str = "db.duckdb",
        output: Path | None = None,
        args: tuple[str, ...] = (),
    ):
        home = folder / "dagster_home"
        home.mkdir(parents=True, exist_ok=True)
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        self.output = output or folder / "out"
        self.database = folder / database
        env = {
            **os.environ,
            "DAGSTER_HOME": str(home),
            "DEDUP_INPUT": str(input_path),
            "DEDUP_DATABASE": str(self.database),
            "DEDUP_OUTPUT_DIR": str(self.output),
            "DEDUP_DUCKDB_MEMORY": "1GB",
        }
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dedup_assets.cli", "run", *args],
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        Cli.running.append(self)

    def _read(self) -> None:
        for line in self.process.stderr:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for_line(self, start: str, timeout: float = CLI_TIMEOUT) -> bool:
        """Until a line ``  <start>…`` is printed; False if the process ended first."""
        with self._changed:
            found = self._changed.wait_for(
                lambda: any(line.startswith(f"  {start}") for line in self.lines)
                or not self._reader.is_alive(),
                timeout,
            )
            return found and any(line.startswith(f"  {start}") for line in self.lines)

    def wait_for_staging_file(self, timeout: float = CLI_TIMEOUT) -> str | None:
        """Until the run has begun writing a release file: that file's name."""
        deadline = time.monotonic() + timeout
        pattern = f".{self.output.name}.staging-*"
        while time.monotonic() < deadline and self.process.poll() is None:
            for staging in self.output.parent.glob(pattern):
                try:
                    written = next(staging.iterdir(), None)
                except FileNotFoundError:  # switched in meanwhile
                    continue
                if written is not None:
                    return written.name
            time.sleep(0.002)
        return None

    def signal(self, number: int) -> None:
        os.kill(self.process.pid, number)

    def terminate(self, timeout: float) -> tuple[int, float]:
        """SIGTERM; the exit status and the seconds it took to exit. A run still there after
        ``timeout`` is killed, so a case that hangs ends."""
        signalled = time.monotonic()
        self.signal(signal.SIGTERM)
        try:
            returncode = self.finish(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            returncode = self.finish()
        return returncode, time.monotonic() - signalled

    def finish(self, timeout: float = CLI_TIMEOUT) -> int:
        returncode = self.process.wait(timeout)
        self._reader.join()
        self.seconds = time.monotonic() - self.started
        Cli.running.remove(self)
        return returncode

    @property
    def error(self) -> str:
        """The run's ``Error:`` line, or its last line."""
        errors = [line for line in self.lines if line.startswith("Error:")]
        return (errors or self.lines[-1:] or ["(nothing on stderr)"])[0]

    def said(self, text: str) -> bool:
        return any(text in line for line in self.lines)


def run_cli(folder: Path, input_path: Path, **options) -> tuple[int, Cli]:
    cli = Cli(folder, input_path, **options)
    return cli.finish(), cli


def started_runs(folder: Path) -> list:
    """Runs the Dagster instance of the case still records as started."""
    # imported here: the library-level cases need no Dagster
    from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

    with DagsterInstance.from_config(str(folder / "dagster_home")) as instance:
        return instance.get_run_records(RunsFilter(statuses=[DagsterRunStatus.STARTED]))


def run_status(folder: Path, run_id: str) -> str:
    from dagster import DagsterInstance

    with DagsterInstance.from_config(str(folder / "dagster_home")) as instance:
        return instance.get_run_by_id(run_id).status.value


def remains(output: Path) -> list[str]:
    """What a killed run left beside the output folder and among its releases, as the run that
    cleans them sees it (the lock and the releases kept are no remains)."""
    return [str(path.relative_to(output.parent)) for path in publish_remains(output)]


def place_release(source: Path, output: Path) -> str:
    """Copy a whole release into place; its manifest's text, to compare with later."""
    shutil.copytree(source, output)
    return (output / MANIFEST_FILE).read_text()


@contextmanager
def tmpfs(mount_point: Path, size_bytes: int) -> Iterator[bool]:
    """A small tmpfs at ``mount_point`` (True), or False where mounting is not permitted."""
    mount_point.mkdir(parents=True, exist_ok=True)
    size = f"size={max(size_bytes // 1024, 64)}k"
    command = ["mount", "-t", "tmpfs", "-o", size, "tmpfs", str(mount_point)]
    mounted = subprocess.run(command, capture_output=True).returncode == 0
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", str(mount_point)], check=True)


def folder_bytes(folder: Path) -> int:
    """The bytes of every file under ``folder`` (the deduped documents' parts too)."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def library_in_child(
    input_path: Path, database: Path, output: Path | None, timeout: float | None = None
) -> dict:
    """``run_library`` in a process of its own (``--library-run``): its answer."""
    command = [sys.executable, "-m", "dedup_tests.faults", "--library-run", str(input_path)]
    child = subprocess.run(
        [*command, str(database), str(output or "")],
        cwd=CHECKOUT,  # the paths are absolute: under the matrix's work folder
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = child.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {"error": f"exit {child.returncode}: {child.stderr}"}


def library_run_in_child(
    folder: Path, input_path: Path, release: bool = False, timeout: float | None = None
) -> tuple[LibraryRun, dict]:
    """:func:`library_in_child` into the case's folder: the documents and rejects its database
    holds, and the child's answer (its seconds and peak RSS)."""
    database, output = folder / "db.duckdb", folder / "out"
    result = library_in_child(input_path, database, output if release else None, timeout)
    return read_library_run(database, output if release else None, result.get("error")), result


def library_child(input_path: str, database: str, output: str) -> None:
    """``--library-run``: one ``run_library`` in this process; prints its counts, seconds and peak
    RSS (this process's own high-water mark, not inherited from the parent) as JSON."""
    started = time.perf_counter()
    try:
        result = run_library(input_path, database, output or None, Settings())
    except Exception as error:  # reported to the parent, which judges it
        print(json.dumps({"error": describe_error(error)}))
        return
    seconds = time.perf_counter() - started
    status = Path("/proc/self/status").read_text()
    peak_kb = int(
        next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))
    )
    print(
        json.dumps({"counts": result["counts"], "seconds": seconds, "peak_rss_mb": peak_kb / 1024})
    )
