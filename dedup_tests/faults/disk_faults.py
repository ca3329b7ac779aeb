"""Full-disk faults on real tmpfs mounts: the database's disk full before an incremental batch or
before its payload file, `dedup run` on a full database disk, the temporary payload a killed run
left, `dedup cdx-targets` writing to a full disk. A refusal must be one sentence naming the place
and the setting that moves it, leave no temporary or empty file, and the run once there is room
must keep every record the case wrote."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from unittest import mock
from urllib.parse import parse_qs, urlsplit

import duckdb
import pyarrow as pa

from dedup_assets.core.read.batches import key_path_name
from dedup_assets.core.read.cdx import TARGET_COLUMNS

from .fault_runs import run_cli, tmpfs
from .outcome import LibraryRun, Outcome, Work, account, describe_release, read_library_run
from .writers import bodies, csv_lines, rows_of, write_csv

KEYS = ("2026-11-01", "2026-11-02")
NO_SPACE = "no space is left on the device"
DISK_BYTES = 64 * 2**20
SKIPPED = "skipped: mounting not permitted"


def fill(disk: Path, leave: int) -> Path:
    """A file taking all of ``disk``'s free space but ``leave`` bytes."""
    filler = disk / "filler"
    with open(filler, "wb") as handle:
        os.posix_fallocate(handle.fileno(), 0, max(shutil.disk_usage(disk).free - leave, 1))
    return filler


class Index:
    """Two batches of known rows, a CSV each, materialized into ``database`` by the incremental
    assets in this process, as `dagster asset materialize --partition KEY` runs them."""

    def __init__(self, work: Work, database: Path, documents: int):
        self.folder = work.folder / "batches"
        self.rows = {key: rows_of(work.rng, documents, prefix=f"{key}-") for key in KEYS}
        for key, rows in self.rows.items():
            write_csv(self.folder / f"{key}.csv", csv_lines(rows))
        self.database = database
        self.payloads = Path(f"{database}.payloads")
        self.output = work.folder / "out"

    def materialize(self, key: str, steps: slice = slice(None)) -> list[str]:
        """The batch's ``steps`` of the assets (all by default): what each failed step says."""
        # imported here: the other families need no Dagster
        from dagster import DagsterInstance, materialize

        from dedup_assets.assets.batch_graph import INCREMENTAL_ASSETS
        from dedup_assets.engine_resource import EngineResource
        from dedup_assets.launch.user_messages import user_message
        from dedup_assets.settings_resource import DedupSettings
        from dedup_assets.stored_tables.warehouse import DuckDBWarehouse

        resources = {
            "dedup": DedupSettings(output_dir=str(self.output)),
            "warehouse": DuckDBWarehouse(database=str(self.database), memory_limit="1GB"),
            "engine": EngineResource(),
        }
        chosen = INCREMENTAL_ASSETS[steps]
        with mock.patch.dict(os.environ, {"DEDUP_BATCHES": str(self.folder)}):
            with DagsterInstance.ephemeral() as instance:
                instance.add_dynamic_partitions("batches", list(KEYS))
                result = materialize(
                    INCREMENTAL_ASSETS,
                    selection=[key for asset in chosen for key in asset.keys],
                    partition_key=key,
                    instance=instance,
                    resources=resources,
                    raise_on_error=False,
                    # a failure is the observation: Dagster's log of it is noise in the matrix's
                    run_config={"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}},
                )
        failures = result.get_step_failure_events()
        return [user_message(event.step_failure_data.error) for event in failures]

    def listing(self) -> list[str]:
        return sorted(os.listdir(self.payloads)) if self.payloads.is_dir() else []

    def temporary(self) -> list[str]:
        return [name for name in self.listing() if name.startswith(".")]

    def held(self, key: str) -> LibraryRun:
        """Batch ``key`` as the index holds it: its documents as its payload file has them (the
        bodies are there only), and its rejects."""
        query = "select {} from incremental.{} where batch_key = ?"
        with duckdb.connect(str(self.database), read_only=True) as connection:
            named = connection.execute(query.format("payload_file", "batches"), [key]).fetchall()
            rejects = connection.execute(query.format("reason", "rejected"), [key]).fetchall()
        documents = []
        for (payload,) in named:
            with pa.memory_map(str(self.payloads / payload)) as source:  # closed: the disk unmounts
                table = pa.ipc.open_file(source).read_all()
                documents = table.select(["doc_id", "body"]).to_pylist()
        rejects = [{"reason": reason} for reason, in rejects]
        return LibraryRun(documents, rejects, None, "—", True, [])

    def account(self, outcome: Outcome, keys: tuple[str, ...]) -> None:
        """Records lost and altered over ``keys``, and what their releases verify as."""
        said = []
        for key in keys:
            account(outcome, bodies(self.rows[key]), self.held(key))
            folder = self.output / "batches" / key_path_name(key)
            verdict, whole = describe_release(folder, {self.folder / f"{key}.csv": key})
            said.append(f"batch {verdict}")
            outcome.release_whole &= whole
        outcome.release = "; ".join(said)


def database_full_before_batch(work: Work) -> Outcome:
    return full_database_batch(work, before_payload=False)


def database_full_before_payload(work: Work) -> Outcome:
    return full_database_batch(work, before_payload=True)


def full_database_batch(work: Work, before_payload: bool) -> Outcome:
    """The database's disk filled before batch 1, or with ``before_payload`` once batch 2 is
    staged on batch 1, but 256 KB (room for a transaction, not for a payload of megabytes); the
    batch's remaining steps, then again once the filler is gone."""
    disk = work.folder / "disk"
    with tmpfs(disk, DISK_BYTES) as mounted:
        if not mounted:
            return Outcome("database on a full tmpfs before a batch", SKIPPED)
        index = Index(work, disk / "index.duckdb", 2_000)
        rows = f"({len(index.rows[KEYS[0]]):,} rows)"
        if before_payload:
            keys, steps, leave = KEYS, slice(-1, None), 256 * 1024
            prepared = index.materialize(KEYS[0]) + index.materialize(KEYS[1], slice(-1))
            place = f"the payload of batch {KEYS[1]} to {index.payloads}"
            when = f"{KEYS[0]} indexed, {KEYS[1]} {rows} staged, filled but 256 KB: its last step"
        else:
            keys, steps, leave, prepared = KEYS[:1], slice(None), 0, []
            place, when = str(index.database), f"filled before batch {KEYS[0]} {rows}: the batch"
        outcome = Outcome(
            f"database on a {DISK_BYTES >> 20} MB tmpfs, {when}, again once freed"
        )
        outcome.expect(not prepared, f"the steps before the fault failed: {prepared}")
        filler = fill(disk, leave)
        said = index.materialize(keys[-1], steps)
        left, complete = index.temporary(), index.listing()
        filler.unlink()
        again = index.materialize(keys[-1], steps)
        outcome.expect(
            len(said) == 1
            and said[0].startswith(f"Cannot write {place}: {NO_SPACE}. ")
            and "DEDUP_DATABASE" in said[0],
            f"not one sentence naming {place} and DEDUP_DATABASE: {said}",
        )
        outcome.expect(not left, f"temporary payloads left: {left}")
        outcome.expect(not again, f"the rerun failed: {again}")
        index.account(outcome, keys)
    outcome.observed = (
        f"{' / '.join(said) or 'the batch succeeded'}; .payloads after it: "
        f"{', '.join(complete) or 'empty'}; rerun: {again[0] if again else 'succeeded'}"
    )
    return outcome


def dedup_run_full_database(work: Work) -> Outcome:
    rows = rows_of(work.rng, 300)
    input_path = write_csv(work.folder / "pages.csv", csv_lines(rows))
    disk = work.folder / "disk"
    with tmpfs(disk, DISK_BYTES) as mounted:
        if not mounted:
            return Outcome("`dedup run` with the database on a full tmpfs", SKIPPED)
        database = disk / "run.duckdb"
        filler = fill(disk, leave=0)
        code, full = run_cli(work.folder, input_path, database=str(database))
        left = sorted(path.name for path in disk.iterdir() if path != filler)
        empty = database.exists() and database.stat().st_size == 0
        filler.unlink()
        again_code, again = run_cli(work.folder, input_path, database=str(database))
        outcome = Outcome(
            f"`dedup run` ({len(rows)} rows) with its database on a {DISK_BYTES >> 20} MB tmpfs "
            "filled to the last byte; again once freed"
        )
        text = "\n".join(full.lines)
        outcome.expect(
            code == 1
            and full.error.startswith(f"Error: Cannot write {database}: {NO_SPACE}. ")
            and "DEDUP_DATABASE" in full.error,
            f"not exit 1 naming {database} and DEDUP_DATABASE: exit {code}, {full.error}",
        )
        outcome.expect(text.count(NO_SPACE) == 1, f"said {text.count(NO_SPACE)} times")
        outcome.expect("Traceback" not in text, "printed a traceback")
        outcome.expect(not empty, "left a 0-byte database file")
        outcome.expect(again_code == 0, f"the run once freed failed: {again.error}")
        if again_code == 0:  # a failed run published nothing, so lost nothing
            account(outcome, bodies(rows), read_library_run(database, again.output, None))
    outcome.release, outcome.release_whole = describe_release(again.output, {input_path: "A"})
    outcome.observed = (
        f"exit {code}: {full.error} (said {text.count(NO_SPACE)} time(s), "
        f"{'a' if 'Traceback' in text else 'no'} traceback); left on the disk: "
        f"{', '.join(left) or 'nothing'}; once freed: exit {again_code}"
    )
    return outcome


def killed_run_temporary_payload(work: Work) -> Outcome:
    index = Index(work, work.folder / "db" / "index.duckdb", 300)
    said = index.materialize(KEYS[0])
    # what a kill -9 of batch 2 in the middle of its payload leaves: its input's name, a pid
    digest = hashlib.sha256((index.folder / f"{KEYS[1]}.csv").read_bytes()).hexdigest()
    left = index.payloads / f".{key_path_name(KEYS[1])}.{digest[:16]}.arrow.4242"
    left.write_bytes(b"half a payload")
    said += index.materialize(KEYS[1])
    outcome = Outcome(
        f"`{left.name}` (a killed run's temporary payload) in .payloads before batch {KEYS[1]}"
    )
    outcome.expect(not said, f"a batch failed: {said}")
    outcome.expect(not left.exists(), "the temporary payload is still there")
    outcome.expect(
        not index.temporary() and len(index.listing()) == 2, f".payloads: {index.listing()}"
    )
    index.account(outcome, KEYS)
    outcome.observed = (
        f"batches: {said[0] if said else 'succeeded'}; the temporary payload "
        f"{'is still there' if left.exists() else 'removed'}; "
        f".payloads: {', '.join(index.listing())}"
    )
    return outcome


class _Cdx(BaseHTTPRequestHandler):
    """A CDX API answering every query with the server's captures, on one page."""

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        if "showNumPages" in parse_qs(urlsplit(self.path).query):
            body = json.dumps({"pages": 1})
        else:
            body = "".join(json.dumps(capture) + "\n" for capture in self.server.captures)
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def cdx_server(captures: list[dict]) -> Iterator[str]:
    """A local CDX API serving ``captures``: its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Cdx)
    server.captures = captures
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def cdx_targets_full_disk(work: Work) -> Outcome:
    # as a CDX API answers (every value a string), in the targets file's columns
    captures = [
        dict(zip(TARGET_COLUMNS, (f"https://example.com/{n}", "p.warc.gz", str(100 * n), "100")))
        | {"digest": "A" * 32, "timestamp": "20260101000000", "mime": "text/html", "status": "200"}
        for n in range(300)
    ]
    disk = work.folder / "disk"
    with tmpfs(disk, 64 * 1024) as mounted, cdx_server(captures) as url:
        if not mounted:
            return Outcome("`dedup cdx-targets --out` on a full tmpfs", SKIPPED)
        out = disk / "targets.csv"
        command = [
            sys.executable, "-m", "dedup_assets.cli", "cdx-targets", "--crawl", "CC-MAIN-2026-01",
            "--cdx-api-url", url, "--out", str(out), "example.com/*",
        ]
        filler = fill(disk, leave=4096)
        full = subprocess.run(command, capture_output=True, text=True, timeout=120)
        left = sorted(path.name for path in disk.iterdir() if path != filler)
        filler.unlink()
        again = subprocess.run(command, capture_output=True, text=True, timeout=120)
        written = list(csv.DictReader(out.read_text().splitlines())) if out.exists() else []
    outcome = Outcome(
        f"`dedup cdx-targets --out` on a 64 KB tmpfs with 4 KB free, {len(captures)} captures "
        "served; again once freed"
    )
    lines = full.stderr.splitlines()
    outcome.expect(
        full.returncode == 2
        and len(lines) == 1
        and lines[0].startswith(f"Error: Cannot write {out}: {NO_SPACE}. ")
        and "--out" in lines[0],
        f"not exit 2 and one line naming {out} and --out: exit {full.returncode}, {lines[-3:]}",
    )
    outcome.expect(not left, f"left on the disk: {left}")
    outcome.expect(again.returncode == 0, f"the run once freed failed: {again.stderr[-300:]}")
    served = {capture["url"]: capture for capture in captures}
    outcome.lost = len(served) - sum(row == served.get(row["url"]) for row in written)
    outcome.release = f"targets file: none after the full disk, {len(written)} rows once freed"
    outcome.observed = (
        f"exit {full.returncode}, {len(lines)} line(s): {lines[0] if lines else '(nothing)'}; "
        f"left on the disk: {', '.join(left) or 'nothing'}; once freed: exit {again.returncode}"
    )
    return outcome
