"""Faults injected into real runs of the CLI: a kill -9 while the release is written, two runs
writing the same output folder, a held lock, a reader reading while runs replace the release. The release folder must always hold one whole
release, and the run history must not keep a dead run as started."""

from __future__ import annotations

import csv
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.release.publish import remains
from dedup_assets.core.release.files import MANIFEST_FILE, verify_release
from dedup_assets.core.release.pointer import release_ids
from dedup_assets.core.settings.model import Settings
from dedup_bench.corpus import generate

from .conftest import FIXTURE, PROJECT_ROOT

pytestmark = pytest.mark.faults


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> tuple[Path, Path]:
    """Two inputs large enough that writing their release takes a moment."""
    folder = tmp_path_factory.mktemp("corpora")
    generate(30_000, folder / "a.parquet", seed=1)
    generate(30_000, folder / "b.parquet", seed=2)
    return folder / "a.parquet", folder / "b.parquet"


def _env(tmp_path: Path, input_path: Path, database: str = "db.duckdb") -> dict:
    return {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
        "DEDUP_INPUT": str(input_path),
        "DEDUP_DATABASE": str(tmp_path / database),
        "DEDUP_OUTPUT_DIR": str(tmp_path / "out"),
        "DEDUP_DUCKDB_MEMORY": "1GB",
    }


def _start(tmp_path: Path, env: dict) -> subprocess.Popen:
    (tmp_path / "dagster_home").mkdir(exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", "dedup_assets.cli", "run"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _run(tmp_path: Path, env: dict) -> subprocess.CompletedProcess:
    process = _start(tmp_path, env)
    stdout, stderr = process.communicate(timeout=600)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def _wait_for_staging_file(tmp_path: Path, process: subprocess.Popen) -> None:
    """Until the killed-to-be run has started writing a release file."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if any(any(path.iterdir()) for path in tmp_path.glob(".out.staging-*")):
            return
        time.sleep(0.005)
    raise AssertionError(f"the run never wrote into a staging folder: {process.poll()}")


def test_a_kill_while_the_release_is_written_leaves_the_old_release_whole(tmp_path, corpora):
    first, second = corpora
    assert _run(tmp_path, _env(tmp_path, first)).returncode == 0
    before = (tmp_path / "out" / MANIFEST_FILE).read_text()

    victim = _start(tmp_path, _env(tmp_path, second))
    _wait_for_staging_file(tmp_path, victim)
    victim.kill()
    victim.wait()

    assert (tmp_path / "out" / MANIFEST_FILE).read_text() == before
    assert verify_release(tmp_path / "out") == []
    with DagsterInstance.from_config(str(tmp_path / "dagster_home")) as instance:
        started = instance.get_run_records(RunsFilter(statuses=[DagsterRunStatus.STARTED]))
    assert len(started) == 1  # until someone notices the process is gone

    again = _run(tmp_path, _env(tmp_path, second))
    assert again.returncode == 0, again.stderr
    assert f"run {started[0].dagster_run.run_id}: its process ({victim.pid}) is gone; marked failed" in again.stderr
    assert "removed what a killed run left beside" in again.stderr
    assert json.loads((tmp_path / "out" / MANIFEST_FILE).read_text())["input"]["path"] == str(second)
    assert verify_release(tmp_path / "out") == []
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(".out")) == [".out.lock", ".out.releases"]
    with DagsterInstance.from_config(str(tmp_path / "dagster_home")) as instance:
        failed = instance.get_run_by_id(started[0].dagster_run.run_id)
    assert failed.status == DagsterRunStatus.FAILURE


def test_two_runs_writing_one_folder_never_mix_their_releases(tmp_path, corpora):
    first, second = corpora
    runs = [
        _start(tmp_path, _env(tmp_path, first, "a.duckdb")),
        _start(tmp_path, _env(tmp_path, second, "b.duckdb")),
    ]
    results = [(run.wait(timeout=600), run.stderr.read()) for run in runs]
    for returncode, stderr in results:
        assert returncode == 0 or "Another run is writing a release to" in stderr, stderr
    assert any(returncode == 0 for returncode, _ in results)
    assert verify_release(tmp_path / "out") == []


def test_a_run_finding_the_folder_locked_fails_at_once_naming_the_holder(tmp_path, corpora):
    first, _ = corpora
    with open(tmp_path / ".out.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.write(json.dumps({"pid": 4242, "host": "crawler-7", "started": 0, "database": "x.duckdb"}))
        lock.flush()
        result = _run(tmp_path, _env(tmp_path, first))
    assert result.returncode == 1
    assert (
        f"Error: Another run is writing a release to {tmp_path / 'out'} (process 4242 on crawler-7, since "
        "1970-01-01 00:00:00 UTC, database x.duckdb)."
    ) in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("when", ["after a step", "while the release is written"])
def test_a_sigterm_ends_the_run_as_failed_with_one_sentence(tmp_path, corpora, when):
    first, _ = corpora
    process = _start(tmp_path, _env(tmp_path, first))
    if when == "after a step":
        for line in process.stderr:
            if line.startswith("  fingerprinted ("):
                break
    else:  # DuckDB, streaming a release file, says "Query interrupted" in its own words
        _wait_for_staging_file(tmp_path, process)
    process.send_signal(signal.SIGTERM)
    stderr = process.stderr.read()
    assert process.wait(timeout=120) == 1
    assert stderr.strip().splitlines()[-1] == (
        "Error: the run was stopped (SIGTERM or Ctrl-C). The steps that finished are kept in the database "
        "and the release folder holds the last whole release; run again to finish."
    )
    with DagsterInstance.from_config(str(tmp_path / "dagster_home")) as instance:
        assert instance.get_run_records(RunsFilter(statuses=[DagsterRunStatus.STARTED])) == []
    assert remains(tmp_path / "out") == []


def test_a_read_only_checkout_with_a_read_only_home_runs_and_caches_its_kernels_once(tmp_path):
    """A container image: the code and the home cannot be written (as root, without the
    capabilities that write past file modes), so numba can cache the kernels neither beside the
    code nor in ~/.cache; the run caches them in the temporary folder, says so once, and the next
    run loads them from there."""
    code, home, temporary = tmp_path / "code", tmp_path / "home", tmp_path / "tmp"
    shutil.copytree(PROJECT_ROOT / "dedup_assets", code / "dedup_assets", ignore=shutil.ignore_patterns("__pycache__"))
    home.mkdir()
    temporary.mkdir()
    for folder in (code, home):
        for path in (folder, *folder.rglob("*")):
            path.chmod(path.stat().st_mode & ~0o222)
    command = [sys.executable, "-c", "import sys; from dedup_assets.cli import main; sys.exit(main(['run']))"]
    if os.geteuid() == 0:
        dropped = "-dac_override,-dac_read_search"
        command = ["setpriv", f"--inh-caps={dropped}", f"--bounding-set={dropped}", *command]
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith(("DEDUP_", "NUMBA_", "XDG_"))},
        "PYTHONPATH": str(code), "HOME": str(home), "TMPDIR": str(temporary), "DEDUP_SETTINGS": os.devnull,
        "DEDUP_INPUT": str(FIXTURE), "DEDUP_DATABASE": str(tmp_path / "run" / "db.duckdb"),
        "DEDUP_OUTPUT_DIR": str(tmp_path / "run" / "out"), "DAGSTER_HOME": "",
    }
    (tmp_path / "run").mkdir()
    first = subprocess.run(command, cwd=tmp_path / "run", env=env, capture_output=True, text=True, timeout=1200)
    assert first.returncode == 0, first.stderr[-3000:]
    cached_in = temporary / f"dedup-assets-numba-{os.getuid()}"
    assert first.stderr.count(f"so they are cached in {cached_in} (set NUMBA_CACHE_DIR") == 1, first.stderr[-3000:]
    assert any(cached_in.rglob("*.nbi"))
    again = subprocess.run(command, cwd=tmp_path / "run", env=env, capture_output=True, text=True, timeout=1200)
    assert again.returncode == 0 and "Compiling" not in again.stderr, again.stderr[-3000:]


def _without_row(folder: Path, index: int) -> Path:
    """The fixture without its document ``index``: every run's release differs in its files."""
    with FIXTURE.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    path = folder / f"without-{index}.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows([rows[0], *rows[1:index], *rows[index + 1:]])
    return path


class _Readers:
    """Two readers of a release folder, each in a loop until stopped: one resolves the link
    each time and checks the release it names against its manifest (by path); the other opens
    the current release's folder once and reads its manifest and every file it lists through
    that open folder. Whatever they find amiss is in ``problems``."""

    def __init__(self, out: Path):
        self.out, self.stop, self.problems = out, threading.Event(), []
        self.seen: set[str] = set()  # the releases read by path
        self.reads = {"path": 0, "open folder": 0}

    def by_path(self) -> None:
        while not self.stop.is_set():
            release = Path(os.path.realpath(self.out))
            try:
                self.problems += [f"{release.name}: {problem}" for problem in verify_release(release)]
            except OSError as error:
                self.problems.append(f"{release.name}: {error}")
            self.seen.add(release.name)
            self.reads["path"] += 1

    def by_open_folder(self) -> None:
        folder = os.open(self.out, os.O_RDONLY | os.O_DIRECTORY)
        try:
            while not self.stop.is_set():
                try:
                    manifest = json.loads(_read_at(folder, MANIFEST_FILE))
                    for output in manifest["outputs"]:
                        if hashlib.sha256(_read_at(folder, output["file"])).hexdigest() != output["sha256"]:
                            self.problems.append(f"open folder: {output['file']} is not the file its manifest lists")
                except OSError as error:
                    self.problems.append(f"open folder: {error}")
                self.reads["open folder"] += 1
        finally:
            os.close(folder)


def _read_at(folder: int, name: str) -> bytes:
    with open(os.open(name, os.O_RDONLY, dir_fd=folder), "rb") as handle:
        return handle.read()


def test_a_reader_never_sees_files_of_two_releases_while_six_runs_replace_it(tmp_path):
    """The release is read in a loop, by path and through a folder opened once, while six real
    runs, each on another input, replace it."""
    out, database = tmp_path / "out", str(tmp_path / "db.duckdb")
    settings = Settings(releases_kept=7)  # the folder opened first is kept through all six
    run_library(str(_without_row(tmp_path, 0)), database, str(out), settings)
    readers = _Readers(out)
    threads = [threading.Thread(target=readers.by_path), threading.Thread(target=readers.by_open_folder)]
    for thread in threads:
        thread.start()
    try:
        for index in range(1, 7):
            run_library(str(_without_row(tmp_path, index)), database, str(out), settings)
    finally:
        readers.stop.set()
        for thread in threads:
            thread.join()
    assert readers.problems == []
    assert len(release_ids(out)) == 7 and verify_release(out) == []
    # the readers read meanwhile, by path more than one release
    assert readers.reads["open folder"] > 0 and len(readers.seen) > 1, (readers.reads, readers.seen)
    # the default keeps three, and the next run removes the rest, under the lock
    run_library(str(_without_row(tmp_path, 7)), database, str(out))
    assert len(release_ids(out)) == 3 and remains(out) == []
