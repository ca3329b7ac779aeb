"""The fault matrix: faults injected into real runs, each with what was injected, what was
observed, how many records were lost and what became of the release.

    .venv/bin/python benchmarks/faults.py            # every case, 1M identical documents at the end
    .venv/bin/python benchmarks/faults.py --quick    # small corpora, at most 100k identical docs
    .venv/bin/python benchmarks/faults.py --only csv_unclosed_quote,missing_input --keep

Release and process faults run the real CLI (``python -m dedup_assets.cli run``) in processes
of their own and kill, stop, race or starve them; input faults run the library
(``run_library``) on small files written here with a known content. "Records lost" is counted
from that known content, never from the pipeline's own counts: input records that are neither a
document nor a reject; a document whose text differs from its source counts as altered. Where
bytes were corrupted, how many records a reader finds in the garbage cannot be known: the records
there count as accounted for when the reader rejected damaged data, and the table says how many
rejects they became.

It needs nothing outside this repository: every input is generated in a temporary folder, deleted
at the end unless ``--keep``. The full-disk and read-only cases mount a tmpfs, so they need root
(otherwise they are reported as skipped). Prints a Markdown table and the totals; exits 1 when a
record was lost or altered without a reject, a release was mixed or corrupt, or a case did not
behave as expected.
"""

from __future__ import annotations

import argparse
import csv
import fcntl
import gzip
import io
import json
import math
import os
import random
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

BENCHMARKS = Path(__file__).resolve().parent

from dedup_assets.core.pipeline import run_library
from dedup_assets.core.release import MANIFEST_FILE, verify_release
from dedup_assets.core.settings import Settings, SettingsError
from dedup_bench.corpus import generate

HEADER = ["doc_id", "source", "domain", "crawled_at", "title", "body"]
FORMULA = "=cmd|' /C calc'!A0"
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet runs as a formula
# the reasons a reader gives for bytes it cannot trust
DAMAGE_REASONS = ("decode_error", "truncated")
STEP_LINES = (
    "documents (",
    "fingerprinted (",
    "band_memberships (",
    "candidate_pairs (",
    "scored_pairs (",
    "duplicate_pairs (",
    "clusters (",
)
CLI_TIMEOUT = 900
# the body a malformed row must not come out with: it must be a reject, not a document
MALFORMED = "(a malformed row is no document)"
TABLES_QUERY = "select table_name from information_schema.tables where table_schema = 'dedup'"


@dataclass
class Outcome:
    """One row of the table."""

    injected: str
    observed: str = ""
    lost: int | None = None  # input records neither a document nor rejected; None: not meaningful
    altered: int = 0  # documents that differ from their source without a reject
    note: str = ""  # how damaged records were accounted for; which records went missing
    release: str = "—"
    release_whole: bool = True  # False: a mixed or corrupt release
    expected: bool = True  # whether the case behaved as the issue asks
    failures: list[str] = field(default_factory=list)

    def expect(self, condition: bool, failure: str) -> None:
        if not condition:
            self.expected = False
            self.failures.append(failure)


@dataclass
class Work:
    """What the cases share (corpora, a finished release to replace, the random draws) and the
    folder of the case being run."""

    root: Path
    quick: bool
    rng: random.Random
    folder: Path = Path()

    @property
    def big_docs(self) -> int:
        return 8_000 if self.quick else 30_000

    @property
    def small_docs(self) -> int:
        return 2_000 if self.quick else 5_000

    def corpus(self, name: str, documents: int, seed: int) -> Path:
        path = self.root / "corpora" / f"{name}.parquet"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            generate(documents, path, seed=seed)
        return path

    @property
    def corpus_a(self) -> Path:
        return self.corpus("a", self.big_docs, 1)

    @property
    def corpus_b(self) -> Path:
        return self.corpus("b", self.big_docs, 2)

    @property
    def corpus_small(self) -> Path:
        return self.corpus("small", self.small_docs, 3)

    @cached_property
    def release_a(self) -> Path:
        """A whole release of the small corpus, copied into place as the old release."""
        folder = self.root / "corpora" / "release-a"
        run_library(str(self.corpus_small), str(folder.with_suffix(".duckdb")), str(folder))
        folder.with_suffix(".duckdb").unlink()
        return folder


# --- the CLI in a process of its own ------------------------------------------------------------


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
    """What lies beside the output folder besides its lock: staging or replaced releases."""
    return sorted(
        path.name
        for path in output.parent.glob(f".{output.name}.*")
        if not path.name.endswith(".lock")
    )


def check_release(folder: Path) -> tuple[str, bool]:
    """What ``verify_release`` says of the folder, and whether the release is whole. A check that
    raises is reported as such (the case then fails), not taken for a corrupt release."""
    try:
        problems = verify_release(folder)
    except Exception as error:
        return f"not verifiable: {describe_error(error)}", True
    if problems:
        return f"CORRUPT: {'; '.join(problems[:3])}", False
    return "verifies", True


def describe_release(output: Path, labels: dict[Path, str]) -> tuple[str, bool]:
    """Which release the folder holds (by its input) and whether it is whole."""
    if not output.exists():
        return "none", True
    said, whole = check_release(output)
    if said != "verifies":
        return said, whole
    source = Path(json.loads((output / MANIFEST_FILE).read_text())["input"]["path"])
    return f"{labels.get(source, source.name)}, {said}", whole


def describe_error(error: BaseException, limit: int = 300) -> str:
    """The error on one line, cut short: some messages quote a whole line of a file."""
    words_ = [
        word if len(word) <= 100 else f"{word[:60]}…({len(word):,} characters)"
        for word in f"{type(error).__name__}: {error}".split()
    ]
    text = " ".join(words_)
    return text if len(text) <= limit else text[:limit] + " …"


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
    return sum(path.stat().st_size for path in folder.iterdir())


# --- the library on generated inputs ------------------------------------------------------------


@dataclass
class LibraryRun:
    documents: list[dict]
    rejects: list[dict]
    error: str | None
    release: str
    release_whole: bool
    tables: list[str]


def library_run(
    folder: Path, input_path: Path, settings: Settings | None = None, release: bool = True
) -> LibraryRun:
    """``run_library`` into the case's folder; the documents and rejects its database holds."""
    database, output = folder / "db.duckdb", folder / "out"
    folder.mkdir(parents=True, exist_ok=True)
    error = None
    try:
        run_library(
            str(input_path), str(database), str(output) if release else None, settings or Settings()
        )
    except Exception as failure:  # the message is the observation
        error = describe_error(failure)
    documents, rejects, tables = [], [], []
    if database.exists():
        with duckdb.connect(str(database), read_only=True) as connection:
            tables = [name for name, in connection.sql(TABLES_QUERY).fetchall()]
            if error is None:
                documents = table_rows(connection, "documents")
                rejects = table_rows(connection, "rejected_documents")
    said, whole = check_release(output) if release and error is None else ("—", True)
    return LibraryRun(documents, rejects, error, said, whole, tables)


def table_rows(connection: duckdb.DuckDBPyConnection, table: str) -> list[dict]:
    query = f"select * from dedup.{table} order by source_file, input_row"
    return connection.sql(query).to_arrow_table().to_pylist()


def account(
    outcome: Outcome, known: dict[str, dict], run: LibraryRun, damaged: set[str] = frozenset()
) -> None:
    """Add to the outcome the records of ``known`` (doc_id -> the fields it must keep) that are
    neither documents nor rejects, and the documents that differ from ``known``.

    ``damaged`` are the records whose bytes were corrupted: how many records a reader finds in
    garbage cannot be known, so they are accounted for when the reader rejected damaged data;
    every other record must come out as a document or a reject of its own. A run that failed
    published nothing, so it loses nothing; whether its error was the right one is the case's
    to judge."""
    if run.error is not None:
        return
    altered = sum(
        1
        for document in run.documents
        if (source := known.get(document["doc_id"])) is None
        or any(document[name] != value for name, value in source.items())
    )
    damage_rejects = sum(reject["reason"] in DAMAGE_REASONS for reject in run.rejects)
    if damaged and damage_rejects:
        intact = sum(document["doc_id"] not in damaged for document in run.documents)
        lost = len(known) - len(damaged) - intact - (len(run.rejects) - damage_rejects)
        outcome.note += ("; " if outcome.note else "") + (
            f"damaged records: {len(damaged):,} in, {damage_rejects:,} rejects out"
        )
    else:
        lost = len(known) - len(run.documents) - len(run.rejects)
    if lost > 0:
        read = {document["doc_id"] for document in run.documents}
        missing = [doc_id for doc_id in known if doc_id not in read and doc_id not in damaged]
        outcome.note += ("; " if outcome.note else "") + f"not documents: {', '.join(missing[:5])}"
    outcome.lost = (outcome.lost or 0) + lost
    outcome.altered += altered


def reasons(run: LibraryRun) -> str:
    found: dict[str, int] = {}
    for reject in run.rejects:
        found[reject["reason"]] = found.get(reject["reason"], 0) + 1
    return ", ".join(f"{reason} {count}" for reason, count in sorted(found.items())) or "none"


def library_release(run: LibraryRun) -> tuple[str, bool]:
    if run.error is not None:
        return "none (refused)", True
    return run.release, run.release_whole


def words(rng: random.Random, count: int) -> str:
    return " ".join(
        "".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(count)
    )


def rows_of(rng: random.Random, count: int, prefix: str = "d") -> list[dict]:
    return [
        {
            "doc_id": f"{prefix}{number}",
            "source": "faults",
            "domain": f"site{number}.example.com",
            "crawled_at": "2026-01-31T12:00:00Z",
            "title": f"Page {number}",
            "body": words(rng, 60),
        }
        for number in range(1, count + 1)
    ]


def csv_lines(rows: list[dict]) -> list[str]:
    """Each row as one CSV line (quoted where needed), without its line end."""
    lines = []
    for row in rows:
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="").writerow([row[name] for name in HEADER])
        lines.append(buffer.getvalue())
    return lines


def write_csv(
    path: Path, lines: list[str], encoding: str = "utf-8", header: list[str] = HEADER
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes("\n".join([",".join(header), *lines, ""]).encode(encoding))
    return path


def bodies(rows: list[dict]) -> dict[str, dict]:
    return {row["doc_id"]: {"body": row["body"]} for row in rows}


def html_page(title: str, text: str) -> bytes:
    return (
        f"<html><head><title>{title}</title></head><body><article><h1>{title}</h1><p>{text}</p>"
        "</article></body></html>"
    ).encode()


def write_warc(path: Path, pages: int, rng: random.Random) -> list[int]:
    """A .warc.gz of distinct HTML responses, one gzip member each; the offset of every record."""
    offsets = []
    with path.open("wb") as stream:
        writer = WARCWriter(stream, gzip=True)
        for number in range(pages):
            offsets.append(stream.tell())
            headers = StatusAndHeaders(
                "200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1"
            )
            record = writer.create_warc_record(
                f"https://site{number}.example.com/page",
                "response",
                payload=io.BytesIO(html_page(f"Page {number}", words(rng, 120))),
                http_headers=headers,
                warc_headers_dict={"WARC-Date": "2026-03-01T10:00:00Z"},
            )
            writer.write_record(record)
    return offsets


# --- release and process faults (the CLI) ------------------------------------------------------


def kill_during_release(work: Work) -> Outcome:
    out = work.folder / "out"
    before = place_release(work.release_a, out)
    labels = {work.corpus_small: "A", work.corpus_a: "B"}
    victim = Cli(work.folder, work.corpus_a)
    written = victim.wait_for_staging_file()
    victim.signal(signal.SIGKILL)
    victim.finish()
    outcome = Outcome(
        f"kill -9 of run B once `{written}` is in its staging folder, old release A in place"
    )
    outcome.expect(written is not None, "the run never wrote into a staging folder")
    after_kill, whole = describe_release(out, labels)
    intact = (out / MANIFEST_FILE).read_text() == before
    outcome.expect(intact and whole, "release A changed")
    left_started = started_runs(work.folder)
    returncode, again = run_cli(work.folder, work.corpus_a)
    marked = again.said(f"its process ({victim.process.pid}) is gone; marked failed")
    killed_run = left_started[0].dagster_run.run_id if left_started else None
    status = run_status(work.folder, killed_run) if killed_run else "not recorded"
    cleaned = again.said("removed what a killed run left beside")
    outcome.release, outcome.release_whole = describe_release(out, labels)
    outcome.release = f"after kill: {after_kill}; after rerun: {outcome.release}"
    outcome.release_whole &= whole
    outcome.expect(returncode == 0, f"rerun failed: {again.error}")
    outcome.expect(outcome.release.endswith("B, verifies"), "the rerun's release is not B")
    outcome.expect(marked and status == "FAILURE", f"the dead run is {status}")
    outcome.expect(cleaned and not remains(out), f"remains: {remains(out)}")
    outcome.observed = (
        f"release A {'intact' if intact else 'CHANGED'} after the kill ({len(left_started)} run "
        f"left started); rerun exit {returncode}, "
        f"{'cleaned the remains' if cleaned else 'did not report remains'}, "
        f"{'marked the dead run failed' if marked else 'did not mark the dead run'} "
        f"(now {status}); "
        f"remains now: {remains(out) or 'none'}"
    )
    return outcome


def kill_at_a_step(work: Work) -> Outcome:
    step = work.rng.choice(STEP_LINES)
    returncode, clean = run_cli(
        work.folder, work.corpus_a, database="clean.duckdb", output=work.folder / "clean"
    )
    victim = Cli(work.folder, work.corpus_a)
    reached = victim.wait_for_line(step)
    victim.signal(signal.SIGKILL)
    victim.finish()
    again_code, again = run_cli(work.folder, work.corpus_a)
    out = work.folder / "out"
    outcome = Outcome(
        f"kill -9 right after the `{step.strip(' (')}` step, then a rerun on the same database"
    )
    outcome.expect(returncode == 0, f"undisturbed run failed: {clean.error}")
    outcome.expect(reached, f"the run ended before the step: {victim.error}")
    outcome.expect(again_code == 0, f"rerun failed: {again.error}")
    identical, differing = [], []
    if again_code == 0 and returncode == 0:

        def hashes(folder: Path) -> dict:
            return {
                entry["file"]: entry["sha256"]
                for entry in json.loads((folder / MANIFEST_FILE).read_text())["outputs"]
            }

        ours, theirs = hashes(out), hashes(work.folder / "clean")
        identical = [name for name in theirs if ours.get(name) == theirs[name]]
        differing = sorted(set(theirs) - set(identical))
    outcome.expect(
        again_code == 0 and not differing, f"files differ from the undisturbed run: {differing}"
    )
    left = started_runs(work.folder)
    outcome.expect(not left, f"{len(left)} run(s) still started")
    outcome.release, outcome.release_whole = describe_release(out, {work.corpus_a: "B"})
    outcome.release += (
        f"; {len(identical)}/{len(identical) + len(differing)} files byte-identical to an "
        "undisturbed run"
    )
    marked = again.said("is gone; marked failed")
    outcome.observed = (
        f"rerun exit {again_code}{'' if again_code == 0 else ': ' + again.error}; "
        f"{'the dead run marked failed' if marked else 'no dead run reported'}; "
        f"started runs after the rerun: {len(left)}"
    )
    return outcome


def sigterm_during_release(work: Work) -> Outcome:
    out = work.folder / "out"
    before = place_release(work.release_a, out)
    labels = {work.corpus_small: "A", work.corpus_a: "B"}
    victim = Cli(work.folder, work.corpus_a)
    written = victim.wait_for_staging_file()
    signalled = time.monotonic()
    victim.signal(signal.SIGTERM)
    try:
        returncode = victim.finish(timeout=60)
    except subprocess.TimeoutExpired:
        victim.signal(signal.SIGKILL)
        returncode = victim.finish()
    exit_seconds = time.monotonic() - signalled
    status = [record.dagster_run.status.value for record in started_runs(work.folder)]
    intact = (out / MANIFEST_FILE).read_text() == before
    after_term, whole = describe_release(out, labels)
    left_beside = remains(out)
    again_code, again = run_cli(work.folder, work.corpus_a)
    still_started = started_runs(work.folder)
    outcome = Outcome(
        f"SIGTERM to run B once `{written}` is in its staging folder, old release A in place"
    )
    outcome.expect(written is not None, "the run never wrote into a staging folder")
    outcome.expect(exit_seconds < 60, "the run did not exit within 60 s of SIGTERM")
    outcome.expect(intact and whole, "release A changed")
    outcome.expect(
        not still_started, f"{len(still_started)} run(s) still started after the next run"
    )
    outcome.expect(again_code == 0, f"next run failed: {again.error}")
    outcome.release, next_whole = describe_release(out, labels)
    outcome.release = f"after SIGTERM: {after_term}; after the next run: {outcome.release}"
    outcome.release_whole = whole and next_whole
    outcome.observed = (
        f"exit {returncode} {exit_seconds:.1f} s after SIGTERM ({victim.error}); runs left "
        f"started: {len(status)}; staging left: {left_beside or 'none'}; next run exit "
        f"{again_code}, started runs then: {len(still_started)}"
    )
    return outcome


def concurrent_runs(work: Work) -> Outcome:
    out = work.folder / "out"
    runs = [
        Cli(work.folder, work.corpus_a, database="a.duckdb"),
        Cli(work.folder, work.corpus_b, database="b.duckdb"),
    ]
    codes = [run.finish() for run in runs]
    outcome = Outcome(
        "two runs (inputs B and C, two databases) started together on one output folder"
    )
    for code, run in zip(codes, runs):
        outcome.expect(
            code == 0 or run.said("Another run is writing a release to"),
            f"a run failed otherwise: {run.error}",
        )
    outcome.expect(0 in codes, "neither run wrote a release")
    outcome.release, outcome.release_whole = describe_release(
        out, {work.corpus_a: "B", work.corpus_b: "C"}
    )
    outcome.expect(not remains(out), f"remains: {remains(out)}")
    outcome.observed = (
        "; ".join(
            f"{name}: exit {code}" + ("" if code == 0 else f" ({run.error})")
            for name, code, run in zip("BC", codes, runs)
        )
        + f"; remains: {remains(out) or 'none'}"
    )
    return outcome


def held_lock(work: Work) -> Outcome:
    out = work.folder / "out"
    with open(work.folder / ".out.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.write(
            json.dumps({"pid": 4242, "host": "crawler-7", "started": 0, "database": "x.duckdb"})
        )
        lock.flush()
        cli = Cli(work.folder, work.corpus_small)
        cli.wait_for_line("deduped_documents (")
        reached = time.monotonic()
        returncode = cli.finish()
    waited = time.monotonic() - reached
    outcome = Outcome("another process holds the output folder's lock (flock) for the whole run")
    named = cli.said(f"Another run is writing a release to {out} (process 4242 on crawler-7")
    outcome.expect(returncode == 1 and named, f"not refused naming the holder: {cli.error}")
    outcome.expect(waited < 10, f"waited {waited:.1f} s at the release step")
    outcome.expect("Traceback" not in "\n".join(cli.lines), "printed a traceback")
    outcome.release, outcome.release_whole = describe_release(out, {})
    outcome.observed = (
        f"exit {returncode} {waited:.1f} s after the last step (run {cli.seconds:.0f} s): "
        f"{cli.error}"
    )
    return outcome


def full_disk(work: Work) -> Outcome:
    disk = work.folder / "disk"
    out = disk / "out"
    # room for the old release and half of the new one's largest file
    size = folder_bytes(work.release_a) + work.corpus_a.stat().st_size // 2
    with tmpfs(disk, size) as mounted:
        if not mounted:
            return Outcome("output folder on a full tmpfs", "skipped: mounting not permitted")
        before = place_release(work.release_a, out)
        returncode, cli = run_cli(work.folder, work.corpus_a, output=out)
        outcome = Outcome(
            f"output folder on a {size / 2**20:.0f} MB tmpfs holding old release A; "
            "run B needs more"
        )
        outcome.expect(
            returncode == 1 and "no space" in cli.error.lower() and str(disk) in cli.error,
            f"not a clear no-space error naming the path: {cli.error}",
        )
        outcome.expect((out / MANIFEST_FILE).read_text() == before, "release A changed")
        outcome.expect(not remains(out), f"remains: {remains(out)}")
        outcome.release, outcome.release_whole = describe_release(
            out, {work.corpus_small: "A", work.corpus_a: "B"}
        )
        outcome.observed = f"exit {returncode}: {cli.error}; remains: {remains(out) or 'none'}"
    return outcome


def read_only_output(work: Work) -> Outcome:
    disk = work.folder / "disk"
    out = disk / "out"
    with tmpfs(disk, folder_bytes(work.release_a) + 2**20) as mounted:
        if not mounted:
            return Outcome(
                "output folder on a read-only file system", "skipped: mounting not permitted"
            )
        before = place_release(work.release_a, out)
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        returncode, cli = run_cli(work.folder, work.corpus_small, output=out)
        outcome = Outcome("output folder on a tmpfs remounted read-only, old release A in it")
        outcome.expect(
            returncode == 1 and "read-only" in cli.error,
            f"not a clear read-only error: {cli.error}",
        )
        outcome.expect((out / MANIFEST_FILE).read_text() == before, "release A changed")
        outcome.release, outcome.release_whole = describe_release(out, {work.corpus_small: "A"})
        outcome.observed = f"exit {returncode}: {cli.error}"
    return outcome


# --- input faults (the library) -----------------------------------------------------------------


def csv_unclosed_quote(work: Work) -> Outcome:
    rows = rows_of(work.rng, 3)
    broken = csv_lines(rows[:1])[0].rsplit(",", 1)[0] + ',"' + rows[0]["body"]
    path = write_csv(work.folder / "unclosed.csv", [broken, *csv_lines(rows[1:])])
    run = library_run(work.folder, path)
    outcome = Outcome("row 1 of 3: body opens a quote that is never closed")
    account(outcome, {**bodies(rows), "d1": {"body": MALFORMED}}, run)
    read = sorted(document["doc_id"] for document in run.documents)
    outcome.expect(run.error is None and read == ["d2", "d3"], f"rows read: {read}")
    outcome.release, outcome.release_whole = library_release(run)
    outcome.observed = (
        run.error
        or f"read {', '.join(read) or 'nothing'}; rejects: {reasons(run)}"
        + (f" ({run.rejects[0]['detail']})" if run.rejects else "")
    )
    return outcome


def csv_short_row(work: Work) -> Outcome:
    rows = rows_of(work.rng, 4)
    short = ",".join([rows[1]["doc_id"], "faults", "example.com", "2026-01-31", rows[1]["body"]])
    lines = csv_lines(rows)
    lines[1] = short
    run = library_run(work.folder, write_csv(work.folder / "short.csv", lines))
    outcome = Outcome("row 2 of 4 has 5 fields, the header 6")
    account(outcome, {**bodies(rows), "d2": {"body": MALFORMED}}, run)
    outcome.expect(
        run.error is None and [r["input_row"] for r in run.rejects] == [2],
        "row 2 is not the one reject",
    )
    outcome.release, outcome.release_whole = library_release(run)
    outcome.observed = run.error or f"{len(run.documents)} documents; rejects: {reasons(run)}" + (
        f" ({run.rejects[0]['detail']})" if run.rejects else ""
    )
    return outcome


def csv_huge_body(work: Work) -> Outcome:
    rows = rows_of(work.rng, 3)
    rows[1]["body"] = "lorem " * (50 * 2**20 // 6)
    run = library_run(work.folder, write_csv(work.folder / "huge.csv", csv_lines(rows)))
    outcome = Outcome(
        f"row 2 of 3 has a {len(rows[1]['body']) / 2**20:.0f} MB body (max_body_bytes 10,000,000)"
    )
    account(outcome, bodies(rows), run)
    outcome.expect(
        run.error is None and [r["reason"] for r in run.rejects] == ["too_large"],
        "no too_large reject",
    )
    outcome.release, outcome.release_whole = library_release(run)
    outcome.observed = (
        run.error or f"run succeeded: {len(run.documents)} documents; rejects: {reasons(run)}"
    )
    return outcome


def jsonl_gz_flipped_byte(work: Work) -> Outcome:
    rows = rows_of(work.rng, 2_000)
    lines = [
        json.dumps({"id": row["doc_id"], "text": row["body"], "timestamp": row["crawled_at"]})
        + "\n"
        for row in rows
    ]
    outcome = Outcome(
        "2,000-line .jsonl.gz, one byte inverted in the middle of a gzip member's data: "
        "in a file of 20 members (100 lines each), and in a file of one member"
    )
    seen, releases = [], []
    for per_member in (100, 2_000):
        members = [
            gzip.compress("".join(lines[start : start + per_member]).encode(), mtime=0)
            for start in range(0, len(lines), per_member)
        ]
        hit = len(members) // 2
        data = bytearray(b"".join(members))
        data[sum(map(len, members[:hit])) + len(members[hit]) // 2] ^= 0xFF
        path = work.folder / f"members-{len(members)}" / "lines.jsonl.gz"
        path.parent.mkdir()
        path.write_bytes(bytes(data))
        run = library_run(path.parent, path)
        label = f"{len(members)} members" if len(members) > 1 else "one member"
        damaged = {row["doc_id"] for row in rows[hit * per_member : (hit + 1) * per_member]}
        account(outcome, bodies(rows), run, damaged)
        seen.append(
            f"{label}: " + (run.error or f"{len(run.documents):,} read, rejects {reasons(run)}")
        )
        outcome.expect(
            run.error is None or run.error.startswith("InputError"),
            f"{label}: not a clear error: {run.error}",
        )
        outcome.expect(
            len(run.documents) == len(rows) - len(damaged) or run.error is not None,
            f"{label}: {len(run.documents):,} of the "
            f"{len(rows) - len(damaged):,} intact lines read",
        )
        said, whole = library_release(run)
        outcome.release_whole &= whole
        releases.append(f"{label}: {said}")
    outcome.observed, outcome.release = "; ".join(seen), "; ".join(releases)
    return outcome


def warc_cut_in_last_record(work: Work) -> Outcome:
    path = work.folder / "crawl.warc.gz"
    offsets = write_warc(path, 20, work.rng)
    intact = library_run(work.folder / "intact", path, release=False)
    path.write_bytes(path.read_bytes()[: offsets[-1] + 38])
    run = library_run(work.folder / "cut", path)
    outcome = Outcome("20-record .warc.gz cut 38 bytes into its last record")
    outcome.expect(
        len(intact.documents) == 20, f"the intact file gave {len(intact.documents)} documents"
    )
    account(outcome, bodies(intact.documents), run, {intact.documents[-1]["doc_id"]})
    last = run.rejects[-1] if run.rejects else {}
    outcome.expect(
        run.error is None
        and len(run.documents) == 19
        and last.get("reason") == "truncated"
        and last.get("input_row") == 20,
        "record 20 is not one truncated reject beside 19 documents",
    )
    outcome.release, outcome.release_whole = library_release(run)
    outcome.observed = run.error or (
        f"{len(run.documents)} documents; rejects: {reasons(run)}"
        + (f" (record {last['input_row']}: {last['detail']})" if last else "")
    )
    return outcome


def warc_corrupt_member(work: Work) -> Outcome:
    path = work.folder / "crawl.warc.gz"
    offsets = write_warc(path, 200, work.rng)
    intact = library_run(work.folder / "intact", path, release=False)
    data = bytearray(path.read_bytes())
    middle = (offsets[99] + offsets[100]) // 2
    for position in range(middle, middle + 8):
        data[position] ^= 0xFF
    path.write_bytes(bytes(data))
    run = library_run(work.folder / "damaged", path)
    outcome = Outcome("200-record .warc.gz, 8 bytes inverted inside record 100's gzip member")
    outcome.expect(
        len(intact.documents) == 200, f"the intact file gave {len(intact.documents)} documents"
    )
    account(outcome, bodies(intact.documents), run, {intact.documents[99]["doc_id"]})
    after = sum(document["input_row"] > 100 for document in run.documents)
    damaged = [reject for reject in run.rejects if reject["input_row"] == 100]
    outcome.expect(run.error is None and after == 100, f"{after} of the 100 records after it read")
    outcome.expect(
        bool(damaged) and damaged[0]["reason"] == "decode_error", "record 100 is not a decode_error"
    )
    outcome.release, outcome.release_whole = library_release(run)
    outcome.observed = run.error or (
        f"{len(run.documents)} documents, {after} of them after the damage; rejects: "
        f"{reasons(run)}" + (f" ({run.rejects[0]['detail']})" if run.rejects else "")
    )
    return outcome


def glob_symlink_loop(work: Work) -> Outcome:
    root = work.folder / "tree"
    rows = rows_of(work.rng, 6)
    write_csv(root / "a.csv", csv_lines(rows[:3]))
    write_csv(root / "sub" / "b.csv", csv_lines(rows[3:]))
    (root / "sub" / "loop").symlink_to(root, target_is_directory=True)
    (root / "again").symlink_to(root / "sub", target_is_directory=True)
    (root / "link.csv").symlink_to(root / "a.csv")
    database = work.folder / "db.duckdb"
    outcome = Outcome(
        "glob `**/*.csv` over a folder with a symlink loop, a linked folder and a linked file"
    )
    started = time.monotonic()
    try:
        result = library_in_child(root / "**" / "*.csv", database, None, timeout=120)
    except subprocess.TimeoutExpired:
        outcome.expect(False, "did not end within 120 s")
        outcome.observed = "did not end within 120 s"
        return outcome
    seconds = time.monotonic() - started
    run = LibraryRun([], [], result.get("error"), "—", True, [])
    if run.error is None:
        with duckdb.connect(str(database), read_only=True) as connection:
            run.documents = table_rows(connection, "documents")
            run.rejects = table_rows(connection, "rejected_documents")
    account(outcome, bodies(rows), run)
    # a file reached by several paths is named by its first in sorted order, so compare real paths
    files = sorted(
        {Path(document["source_file"]).relative_to(root).as_posix() for document in run.documents}
    )
    real = sorted(
        {
            Path(document["source_file"]).resolve().relative_to(root).as_posix()
            for document in run.documents
        }
    )
    outcome.expect(
        run.error is None and real == ["a.csv", "sub/b.csv"] and not run.rejects,
        f"files read: {files}, rejects: {reasons(run)}",
    )
    outcome.observed = run.error or (
        f"ended in {seconds:.1f} s; read {', '.join(files)} (really "
        f"{', '.join(real)}); rejects: {reasons(run)}"
    )
    return outcome


def reserved_columns(work: Work) -> Outcome:
    rows = rows_of(work.rng, 2)
    with_cluster = work.folder / "cluster" / "input.csv"
    write_csv(
        with_cluster, [line + ",c1" for line in csv_lines(rows)], header=[*HEADER, "cluster_id"]
    )
    with_source = work.folder / "source" / "input.parquet"
    with_source.parent.mkdir()
    pq.write_table(
        pa.Table.from_pylist([{**row, "source_file": "elsewhere.csv"} for row in rows]), with_source
    )
    outcome = Outcome(
        "a CSV with a `cluster_id` column; a Parquet file with a `source_file` column"
    )
    seen = []
    for name, path in (("cluster_id", with_cluster), ("source_file", with_source)):
        run = library_run(path.parent, path)
        before_work = run.error is not None and "documents" not in run.tables
        outcome.expect(
            before_work and name in run.error, f"{name}: not refused before any work: {run.error}"
        )
        seen.append(run.error or f"{name}: accepted, {len(run.documents)} documents")
    outcome.release = "none (refused)" if outcome.expected else "—"
    outcome.observed = " / ".join(seen)
    return outcome


def crawled_at_values(work: Work) -> Outcome:
    values = {
        "d1": ("2026-02-30", None),
        "d2": ("2026-01-31T12:00:00.123456Z", datetime(2026, 1, 31, 12, 0, 0, 123456)),
        "d3": ("2026-01-31 12:00:00.000001", datetime(2026, 1, 31, 12, 0, 0, 1)),
        "d4": ("2026-01-31T12:00:00.5+02:00", datetime(2026, 1, 31, 10, 0, 0, 500000)),
    }
    rows = rows_of(work.rng, 4)
    for row in rows:
        row["crawled_at"] = values[row["doc_id"]][0]
    path = write_csv(work.folder / "dates.csv", csv_lines(rows))
    known = {
        row["doc_id"]: {"body": row["body"], "crawled_at": values[row["doc_id"]][1]} for row in rows
    }
    outcome = Outcome(
        "crawled_at `2026-02-30` beside three values with microseconds; batch_size 1 and 4096"
    )
    tables, releases = {}, []
    for batch_size in (1, 4096):
        run = library_run(
            work.folder / f"batch-{batch_size}", path, Settings(batch_size=batch_size)
        )
        account(outcome, known, run)
        tables[batch_size] = (
            [(d["doc_id"], d["crawled_at"]) for d in run.documents],
            [(r["input_row"], r["reason"]) for r in run.rejects],
        )
        outcome.expect(run.error is None, f"batch_size {batch_size}: {run.error}")
        said, whole = library_release(run)
        outcome.release_whole &= whole
        releases.append(f"batch {batch_size}: {said}")
    outcome.expect(tables[1] == tables[4096], "batch sizes 1 and 4096 give different tables")
    outcome.expect(
        tables[4096][1] == [(1, "invalid_crawled_at")], "2026-02-30 is not the one reject"
    )
    shown = {
        size: ", ".join(
            f"{doc}={stamp.isoformat(timespec='microseconds') if stamp else None}"
            for doc, stamp in documents
        )
        for size, (documents, _) in tables.items()
    }
    outcome.observed = (
        f"batch 1: {shown[1]}; "
        + ("batch 4096 the same" if tables[1] == tables[4096] else f"batch 4096: {shown[4096]}")
        + f"; rejects: {tables[4096][1]}"
    )
    outcome.release = "; ".join(releases)
    return outcome


def utf16_csv(work: Work) -> Outcome:
    path = write_csv(work.folder / "wide.csv", csv_lines(rows_of(work.rng, 3)), encoding="utf-16")
    run = library_run(work.folder, path)
    outcome = Outcome(
        "a UTF-16 CSV (with its byte-order mark)",
        run.error or f"accepted: {len(run.documents)} documents",
    )
    outcome.expect(run.error is not None and "UTF-16" in run.error, "no error naming UTF-16")
    outcome.release = library_release(run)[0]
    return outcome


def missing_input(work: Work) -> Outcome:
    run = library_run(work.folder, work.folder / "no-such-folder")
    outcome = Outcome("DEDUP_INPUT is a folder that does not exist", run.error or "accepted")
    outcome.expect(
        run.error is not None
        and any(words_ in run.error for words_ in ("no such", "does not exist")),
        "no clear error",
    )
    outcome.release = library_release(run)[0]
    return outcome


def formula_cells(work: Work) -> Outcome:
    rows = rows_of(work.rng, 6)
    rows[0].update(doc_id=FORMULA, title=FORMULA)
    rows[1].update(doc_id="@SUM(1+1)*" + FORMULA[1:])
    # a duplicate of the one before, so both reach the pair and cluster files
    rows[2].update(doc_id="-2+3+" + FORMULA[1:], body=rows[1]["body"])
    # a reject, for rejected_documents.csv
    rows[3].update(doc_id="+" + FORMULA[1:], crawled_at="2026-02-30")
    run = library_run(work.folder, write_csv(work.folder / "formulas.csv", csv_lines(rows)))
    outcome = Outcome(
        f"doc_ids and a title such as `{FORMULA}` (a singleton, a duplicate pair, a reject)"
    )
    account(outcome, bodies(rows), run)
    outcome.release, outcome.release_whole = library_release(run)
    if run.error is not None:
        outcome.expect(False, run.error)
        outcome.observed = run.error
        return outcome
    out = work.folder / "out"
    raw, quoted = [], 0
    for path in sorted(out.glob("*.csv")):
        with path.open(newline="", encoding="utf-8") as handle:
            for cell in (cell for row in csv.reader(handle) for cell in row if "cmd|" in cell):
                if cell.startswith(FORMULA_STARTS):
                    raw.append(f"{path.name}: {cell}")
                elif cell.startswith("'") and cell[1:].startswith(FORMULA_STARTS):
                    quoted += 1
    parquet_ids = set(
        pq.read_table(out / "fingerprinted.parquet", columns=["doc_id"]).column(0).to_pylist()
    )
    titles = set(
        pq.read_table(out / "deduped_documents.parquet", columns=["title"]).column(0).to_pylist()
    )
    raw_in_parquet = {row["doc_id"] for row in rows[:3]} <= parquet_ids and FORMULA in titles
    outcome.expect(not raw and quoted > 0, f"cells a spreadsheet would run: {raw[:3]}")
    outcome.expect(raw_in_parquet, "Parquet does not keep the values as they are")
    outcome.observed = (
        f"{quoted} CSV cells written with a leading ', {len(raw)} raw"
        + (f" ({'; '.join(raw[:2])})" if raw else "")
        + f"; Parquet keeps them raw: {'yes' if raw_in_parquet else 'NO'}"
    )
    return outcome


BAD_SETTINGS = {
    "batch_size": 0,
    "max_body_bytes": -1,
    "max_pair_slots": -1,
    "memory_budget_mb": 0,
    "shingle_size": 100_000,
    "jaccard_threshold": 1.5,
}


def bad_settings(work: Work) -> Outcome:
    through_cli = ["batch_size"] if work.quick else ["batch_size", "jaccard_threshold"]
    outcome = Outcome(
        ", ".join(f"{name} {value}" for name, value in BAD_SETTINGS.items())
        + f" (each alone; {' and '.join(through_cli)} through the CLI too)"
    )
    accepted = []
    for name, value in BAD_SETTINGS.items():
        try:
            Settings(**{name: value})
        except SettingsError:
            continue
        accepted.append(f"{name}={value}")
    outcome.expect(not accepted, f"accepted: {accepted}")
    said = []
    for name in through_cli:
        config = json.dumps({"resources": {"dedup": {"config": {name: BAD_SETTINGS[name]}}}})
        folder = work.folder / name
        folder.mkdir()
        returncode, cli = run_cli(folder, work.corpus_small, args=("--config-json", config))
        outcome.expect(
            returncode == 1 and name in cli.error, f"CLI {name}: exit {returncode}: {cli.error}"
        )
        outcome.expect(
            not cli.database.exists(), f"CLI {name}: the run made its database before refusing"
        )
        said.append(
            f"CLI {name}: exit {returncode}, {cli.error}"
            + ("" if cli.database.exists() else " (no database made)")
        )
    outcome.observed = (
        f"Settings refused {len(BAD_SETTINGS) - len(accepted)} of {len(BAD_SETTINGS)}"
        + (f" (accepted {', '.join(accepted)})" if accepted else "")
        + "; "
        + "; ".join(said)
    )
    outcome.release = "none (refused)" if outcome.expected else "—"
    return outcome


def identical_documents(work: Work) -> Outcome:
    sizes = (20_000, 100_000) if work.quick else (100_000, 300_000, 1_000_000)
    outcome = Outcome(
        f"N identical documents + 1,000 distinct ones, N = {', '.join(f'{n:,}' for n in sizes)}"
    )
    measured, releases = [], []
    for copies in sizes:
        folder = work.folder / f"n{copies}"
        folder.mkdir()
        path = write_identical(folder / "input.parquet", copies, work.rng)
        # in a child, so that its time and peak memory are the run's alone
        result = library_in_child(path, folder / "db.duckdb", folder / "out")
        if "error" in result:
            outcome.expect(False, f"N={copies:,}: {result['error']}")
            releases.append(f"N={copies:,}: none (the run failed)")
            break
        counts = result["counts"]
        records = copies + 1_000
        lost = records - counts["document_rows"] - counts["rejected_document_rows"]
        outcome.lost = (outcome.lost or 0) + lost
        outcome.expect(
            counts["representative_rows"] == 1_001,
            f"N={copies:,}: kept {counts['representative_rows']:,}",
        )
        measured.append(
            (copies, result["seconds"], result["peak_rss_mb"], counts["representative_rows"])
        )
        said, whole = check_release(folder / "out")
        outcome.release_whole &= whole
        releases.append(f"N={copies:,}: {said}")
        shutil.rmtree(folder)  # the disk is small
    if len(measured) >= 2:
        (small, small_s, *_), (large, large_s, *_) = measured[0], measured[-1]
        exponent = math.log(large_s / small_s) / math.log(large / small)
        outcome.expect(exponent <= 1.2, f"time grows as N^{exponent:.2f}")
        linear = f"time ~ N^{exponent:.2f}"
    else:
        linear = "too few sizes to tell"
    outcome.observed = (
        "; ".join(
            f"N={copies:,}: {seconds:.1f} s ({seconds / (copies + 1_000) * 1e6:.1f} µs/doc), "
            f"peak RSS {rss:,.0f} MB, kept {kept:,}"
            for copies, seconds, rss, kept in measured
        )
        + f"; {linear}"
    )
    outcome.release = "; ".join(releases)
    return outcome


def write_identical(path: Path, copies: int, rng: random.Random) -> Path:
    """``copies`` documents with one body, then 1,000 with bodies of their own, as Parquet."""
    body = words(rng, 200)
    schema = pa.schema(
        [(name, pa.timestamp("us") if name == "crawled_at" else pa.string()) for name in HEADER]
    )

    def table(ids: list[str], texts: list[str]) -> pa.Table:
        count = len(ids)
        return pa.table(
            {
                "doc_id": ids,
                "source": ["faults"] * count,
                "domain": [f"site{i % 997}.example.com" for i in range(count)],
                "crawled_at": pa.array([datetime(2026, 1, 31, 12)] * count, pa.timestamp("us")),
                "title": ["The same page"] * count,
                "body": texts,
            },
            schema=schema,
        )

    chunk = 50_000
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, copies, chunk):
            count = min(chunk, copies - start)
            writer.write_table(
                table([f"copy-{i}" for i in range(start, start + count)], [body] * count)
            )
        writer.write_table(
            table([f"own-{i}" for i in range(1_000)], [words(rng, 200) for _ in range(1_000)])
        )
    return path


def library_in_child(
    input_path: Path, database: Path, output: Path | None, timeout: float | None = None
) -> dict:
    """``run_library`` in a process of its own (``--library-run``): its answer."""
    command = [sys.executable, __file__, "--library-run", str(input_path), str(database)]
    child = subprocess.run(
        [*command, str(output or "")], capture_output=True, text=True, timeout=timeout
    )
    lines = child.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {"error": f"exit {child.returncode}: {child.stderr}"}


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


CASES: list[tuple[str, Callable[[Work], Outcome]]] = [
    ("kill_during_release", kill_during_release),
    ("kill_at_a_step", kill_at_a_step),
    ("sigterm_during_release", sigterm_during_release),
    ("concurrent_runs", concurrent_runs),
    ("held_lock", held_lock),
    ("full_disk", full_disk),
    ("read_only_output", read_only_output),
    ("csv_unclosed_quote", csv_unclosed_quote),
    ("csv_short_row", csv_short_row),
    ("csv_huge_body", csv_huge_body),
    ("jsonl_gz_flipped_byte", jsonl_gz_flipped_byte),
    ("warc_cut_in_last_record", warc_cut_in_last_record),
    ("warc_corrupt_member", warc_corrupt_member),
    ("glob_symlink_loop", glob_symlink_loop),
    ("reserved_columns", reserved_columns),
    ("crawled_at_values", crawled_at_values),
    ("utf16_csv", utf16_csv),
    ("missing_input", missing_input),
    ("formula_cells", formula_cells),
    ("bad_settings", bad_settings),
    ("identical_documents", identical_documents),
]


def run_case(name: str, case: Callable[[Work], Outcome], work: Work) -> Outcome:
    work.folder = work.root / name
    work.folder.mkdir()
    try:
        outcome = case(work)
    except Exception as error:  # an unexpected error is a row too
        outcome = Outcome("(see the case)", f"ERROR {describe_error(error)}")
        outcome.expect(False, "the case raised")
    else:
        outcome.expect("not verifiable" not in outcome.release, "verify_release raised")
    finally:
        for cli in list(Cli.running):  # a case that failed midway leaves no process behind
            cli.process.kill()
            cli.finish()
    return outcome


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def lost_cell(outcome: Outcome) -> str:
    if outcome.lost is None and not outcome.altered:
        return "—"
    parts = [f"{outcome.lost or 0:,}"]
    if outcome.altered:
        parts.append(f"{outcome.altered:,} altered")
    text = ", ".join(parts)
    return text + (f" ({outcome.note})" if outcome.note else "")


def print_table(rows: list[tuple[str, Outcome]]) -> None:
    print("| case | injected | observed | records lost | release | as expected |")
    print("|---|---|---|---|---|---|")
    for name, outcome in rows:
        verdict = "yes" if outcome.expected else "NO: " + "; ".join(outcome.failures)
        print(
            f"| {name} | {cell(outcome.injected)} | {cell(outcome.observed)} | "
            f"{cell(lost_cell(outcome))} | "
            f"{cell(outcome.release)} | {cell(verdict)} |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="small corpora; 100k identical documents at most"
    )
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument(
        "--only", help="comma-separated case names: " + ", ".join(name for name, _ in CASES)
    )
    parser.add_argument(
        "--seed", type=int, help="for the step a run is killed at (default: random, printed)"
    )
    parser.add_argument("--library-run", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.library_run:
        library_child(*args.library_run)
        return 0
    chosen = CASES
    if args.only:
        names = args.only.split(",")
        unknown = sorted(set(names) - {name for name, _ in CASES})
        if unknown:
            parser.error(f"no such case: {', '.join(unknown)}")
        chosen = [(name, case) for name, case in CASES if name in names]
    seed = args.seed if args.seed is not None else random.randrange(10**6)
    root = Path(tempfile.mkdtemp(prefix="dedup-faults-"))
    print(f"work folder {root}, seed {seed}", file=sys.stderr)
    work = Work(root, args.quick, random.Random(seed))
    started = time.monotonic()
    rows = []
    try:
        for name, case in chosen:
            case_started = time.monotonic()
            print(f"{name} …", file=sys.stderr, flush=True)
            rows.append((name, run_case(name, case, work)))
            print(f"{name}: {time.monotonic() - case_started:.1f} s", file=sys.stderr, flush=True)
    finally:
        if args.keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    print_table(rows)
    # more rows out than records in (a record counted twice) is as wrong as fewer
    lost = sum(abs(outcome.lost or 0) + outcome.altered for _, outcome in rows)
    mixed = sum(not outcome.release_whole for _, outcome in rows)
    unexpected = [name for name, outcome in rows if not outcome.expected]
    print()
    print(f"records lost or altered without a reject: {lost}")
    print(f"mixed or corrupt releases: {mixed}")
    print(
        f"cases not as expected: {len(unexpected)}"
        + (f" ({', '.join(unexpected)})" if unexpected else "")
    )
    print(
        f"({len(rows)} cases in {time.monotonic() - started:.0f} s, seed {seed}"
        f"{', --quick' if args.quick else ''})"
    )
    return 1 if lost or mixed or unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
