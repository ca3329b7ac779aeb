"""Fetch faults: a targets file (warc_ranges input) whose records come from a loopback server
that misbehaves. Headers trickled a line a second, a filename with dot segments, a redirect to
another port, and SIGTERM to a real CLI run stalled in a fetch. Each fetch must end within its
deadline and stay under warc_base_url. A faulty row becomes its own reject, the other rows
documents; a stop must end the run within seconds and leave nothing half written."""

from __future__ import annotations

import csv
import json
import shutil
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

from dedup_assets.core.read import read_documents
from dedup_assets.core.settings.model import Settings

from ..loopback_warcs import reached_directly, serving
from .fault_runs import Cli, started_runs
from .hostile_input import read_and_rejected, rejected_rows
from .outcome import (
    LibraryRun,
    Outcome,
    Work,
    account,
    library_release,
    library_run,
    read_library_run,
)
from .writers import MALFORMED, write_warc

PAGES = "pages.warc.gz"
STALLED = "warcs/stalled.warc.gz"  # the path whose headers trickle
TARGET_COLUMNS = ("url", "filename", "offset", "length")


def served_records(work: Work, count: int) -> tuple[Path, list[dict]]:
    """A folder to serve, with ``count`` pages in ``warcs/pages.warc.gz``; each record as a
    target row (its doc_id and body, as a local read gives them, beside)."""
    served = work.folder / "served"
    (served / "warcs").mkdir(parents=True)
    write_warc(served / "warcs" / PAGES, count, work.rng)
    return served, [
        {
            "url": document["warc_target_uri"],
            "filename": PAGES,
            "offset": document["warc_offset"],
            "length": document["warc_length"],
            "doc_id": document["doc_id"],
            "body": document["body"],
        }
        for document in read_documents(served / "warcs" / PAGES).to_pylist()
    ]


def write_targets(work: Work, rows: list[dict]) -> tuple[Path, dict[str, dict]]:
    """The targets file of ``rows``, and the content each row must come out with: the record's
    body where the row names ``pages.warc.gz``, a reject where it names anything else."""
    path = work.folder / "targets.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(TARGET_COLUMNS)
        writer.writerows([row[name] for name in TARGET_COLUMNS] for row in rows)
    known = {
        row["doc_id"] if row["filename"] == PAGES else f"target row {number}": {
            "body": row["body"] if row["filename"] == PAGES else MALFORMED
        }
        for number, row in enumerate(rows, start=1)
    }
    return path, known


def faulty(record: dict, filename: str) -> dict:
    return {**record, "filename": filename}


def with_stalled_row(work: Work) -> tuple[Path, list[dict]]:
    """Three target rows, the second of ``stalled.warc.gz`` (a copy of the pages, served at
    ``STALLED``)."""
    served, records = served_records(work, 3)
    shutil.copy(served / "warcs" / PAGES, served / STALLED)
    return served, [records[0], faulty(records[1], Path(STALLED).name), records[2]]


def fetch_rows(
    work: Work, outcome: Outcome, server: ThreadingHTTPServer, rows: list[dict], **settings
) -> LibraryRun:
    """The library run of a targets file of ``rows`` from ``server``'s ``warcs/``, accounted
    for in ``outcome`` against what each row must come out with."""
    targets, known = write_targets(work, rows)
    base = f"{server.url}/warcs/"
    run = library_run(work.folder, targets, Settings(warc_base_url=base, **settings))
    account(outcome, known, run)
    outcome.release, outcome.release_whole = library_release(run)
    return run


def expect_rows(outcome: Outcome, run: LibraryRun, rejected: list, documents: list[int]) -> str:
    """The rejects (row, reason) and the rows that became documents, as the case expects; the
    first reject's detail."""
    outcome.expect(rejected_rows(run) == rejected, f"rejects: {rejected_rows(run)}")
    read = [document["input_row"] for document in run.documents]
    outcome.expect(read == documents, f"documents from rows {read}")
    return run.rejects[0]["detail"] if run.rejects else ""


def fetch_trickled_headers(work: Work) -> Outcome:
    timeout, retries, margin = 2, 1, 20
    served, rows = with_stalled_row(work)
    outcome = Outcome(
        f"target row 2 of 3: the server trickles its headers a line a second (for two minutes); "
        f"fetch_timeout_s {timeout}, fetch_retries {retries}"
    )
    with reached_directly(), serving(served, {STALLED: "trickle headers"}) as server:
        started = time.monotonic()
        run = fetch_rows(
            work, outcome, server, rows, fetch_timeout_s=timeout, fetch_retries=retries
        )
        seconds = time.monotonic() - started
        stalled_requests = server.requests[STALLED]
    bound = timeout * (retries + 1) + margin
    detail = expect_rows(outcome, run, [(2, "fetch_failed")], [1, 3])
    outcome.expect("fetch_timeout_s" in detail, f"the reject names no fetch_timeout_s: {detail}")
    outcome.expect(seconds < bound, f"the run took {seconds:.1f} s, over {bound} s")
    outcome.expect(stalled_requests == retries + 1, f"{stalled_requests} requests for row 2")
    outcome.observed = read_and_rejected(run) + (
        f"; the whole run {seconds:.1f} s (bound: {timeout} s × {retries + 1} attempts + "
        f"{margin} s); row 2 requested {stalled_requests} times"
    )
    return outcome


def fetch_dot_segment_filename(work: Work) -> Outcome:
    served, records = served_records(work, 4)
    # a real WARC file above warc_base_url's folder, which a request would get
    shutil.copy(served / "warcs" / PAGES, served / "x.warc.gz")
    escapes = ["../x.warc.gz", "%2e%2e/x.warc.gz"]
    outcome = Outcome(f"target rows 2 and 3 of 4 name `{escapes[0]}` and `{escapes[1]}`")
    rows = [records[0], *map(faulty, records[1:3], escapes), records[3]]
    with reached_directly(), serving(served) as server:
        run = fetch_rows(work, outcome, server, rows)
        requested = list(server.requests.elements())
    expect_rows(outcome, run, [(2, "invalid_target"), (3, "invalid_target")], [1, 4])
    reached = sorted({path for path in requested if "x.warc.gz" in path})
    outcome.expect(not reached, f"the server was asked for {reached}")
    outcome.observed = read_and_rejected(run) + (
        f"; the server's log: {len(requested)} requests, all for "
        f"{', '.join(sorted(set(requested))) or 'nothing'}"
    )
    return outcome


def fetch_redirect_other_port(work: Work) -> Outcome:
    served, records = served_records(work, 3)
    outcome = Outcome("target row 2 of 3 answers 302 to the same file on another port")
    rows = [records[0], faulty(records[1], "moved.warc.gz"), records[2]]
    # the other server holds the same files: followed, the redirect would give a document
    with reached_directly(), serving(served) as other, serving(served) as server:
        server.faults["warcs/moved.warc.gz"] = f"redirect {other.url}/warcs/{PAGES}"
        run = fetch_rows(work, outcome, server, rows, fetch_retries=0)
        other_requests = list(other.requests.elements())
    detail = expect_rows(outcome, run, [(2, "fetch_failed")], [1, 3])
    outcome.expect("redirected outside warc_base_url" in detail, f"the reject says: {detail}")
    outcome.expect(not other_requests, f"the other server was asked for {other_requests}")
    outcome.observed = read_and_rejected(run) + (
        f"; requests to the other port: {len(other_requests)}"
    )
    return outcome


def stall(cli: Cli, server: ThreadingHTTPServer, path: str, timeout: float) -> bool:
    """Until the run has asked for ``path`` (False if it ended first or took ``timeout``), and a
    second more, so it waits inside the headers."""
    deadline = time.monotonic() + timeout
    while path not in server.requests and cli.process.poll() is None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    time.sleep(1)
    return cli.process.poll() is None


def sigterm_stalled_fetch(work: Work) -> Outcome:
    # generous: the CLI takes seconds to start on a loaded machine, and a stop should take ~10 s
    start_within, exit_within = 240, 20
    served, rows = with_stalled_row(work)
    targets, _ = write_targets(work, rows)
    outcome = Outcome(
        "SIGTERM to a CLI run 1 s into a fetch whose headers trickle a line a second "
        "(fetch_timeout_s 300, fetch_retries 0)"
    )
    with reached_directly(), serving(served, {STALLED: "trickle headers"}) as server:
        config = {"warc_base_url": f"{server.url}/warcs/", "fetch_retries": 0}
        run_config = {"resources": {"dedup": {"config": {**config, "fetch_timeout_s": 300}}}}
        cli = Cli(work.folder, targets, args=("--config-json", json.dumps(run_config)))
        stalled = stall(cli, server, STALLED, start_within)
        returncode, exit_seconds = cli.terminate(timeout=120)
    left = started_runs(work.folder)
    tables = set(read_library_run(cli.database, None, "stopped").tables)
    written = sorted({"documents", "rejected_documents"} & tables)
    stopped = cli.said("the run was stopped (SIGTERM or Ctrl-C)")
    outcome.expect(stalled, f"the run never stalled in the fetch: {cli.error}")
    outcome.expect(exit_seconds < exit_within, f"exited {exit_seconds:.1f} s after SIGTERM")
    outcome.expect(returncode == 1 and stopped, f"exit {returncode}, not stopped: {cli.error}")
    outcome.expect("Traceback" not in "\n".join(cli.lines), "printed a traceback")
    outcome.expect(not left, f"{len(left)} run(s) left started")
    outcome.expect(not written, f"tables written: {written}")
    outcome.release = "a release was written" if cli.output.exists() else "none"
    outcome.expect(not cli.output.exists(), "a release was written")
    outcome.observed = (
        f"exit {returncode} {exit_seconds:.1f} s after SIGTERM ({cli.error}); runs left "
        f"started: {len(left)}; documents or rejects tables: {', '.join(written) or 'none'}"
    )
    return outcome
