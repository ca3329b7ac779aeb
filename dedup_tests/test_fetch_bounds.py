"""Targets input against servers that misbehave: every fetch ends within its deadline, a stopped
run ends within seconds, and no request leaves ``warc_base_url``. The bounds on time are loose
(the code they guard against hung for minutes), so a loaded machine does not fail them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import duckdb
import pytest
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from dedup_assets.core.read import InputError

from .conftest import PROJECT_ROOT
from .test_cli import cli_env  # noqa: F401 (a fixture)
from .test_warc_ranges import _clean_environment, server  # noqa: F401 (fixtures)
from .test_warc_ranges import _details, _outcomes, _run, _write_targets, offline, target_rows
from .warc_fixtures import range_server, write_pages


def _served(httpd, name: str = "pages.warc.gz") -> list[dict]:
    """Two records at ``warcs/<name>`` on the server, as target rows relative to ``warcs/``."""
    (httpd.folder / "warcs").mkdir(exist_ok=True)
    return target_rows(write_pages(httpd.folder / "warcs" / name, 2), name)


def _warcs_url(httpd) -> str:
    return f"http://127.0.0.1:{httpd.server_address[1]}/warcs/"


def _misbehaving(httpd, row: dict, **faults: str) -> list[dict]:
    """``row``'s file copied to a file for each fault, named for it: ``row`` in each copy."""
    added = []
    for name, fault in faults.items():
        shutil.copy(httpd.folder / "warcs" / row["filename"], httpd.folder / "warcs" / f"{name}.warc.gz")
        httpd.faults[f"warcs/{name}.warc.gz"] = fault
        added.append({**row, "filename": f"{name}.warc.gz"})
    return added


def test_a_server_trickling_its_headers_is_cut_off_at_fetch_timeout_s_each_attempt(server, tmp_path):
    good = _served(server)
    (stalled,) = _misbehaving(server, good[0], stalled="trickle headers")
    targets = _write_targets(tmp_path / "targets.csv", [stalled, good[1]])
    started = time.monotonic()
    documents, stats = _run(targets, warc_base_url=_warcs_url(server), fetch_retries=1, fetch_timeout_s=3)
    # two attempts of 3 s each (a line a second trips no per-read timeout); the server would go
    # on for two minutes per attempt: far under that, far over the 6 s on a busy machine
    assert time.monotonic() - started < 60
    assert _outcomes(documents, stats) == {1: "fetch_failed", 2: None}
    detail = _details(stats)[1]
    assert "gave up after 2 attempts" in detail and "took over fetch_timeout_s=3 s" in detail
    assert "raise fetch_retries or fetch_timeout_s" in detail
    assert server.requests["warcs/stalled.warc.gz"] == 2


def test_a_run_failing_on_a_reject_does_not_wait_for_a_body_still_trickling(server, tmp_path):
    good = _served(server)
    (slow,) = _misbehaving(server, good[0], slow="trickle 120")
    missing = {**good[0], "filename": "missing.warc.gz"}
    targets = _write_targets(tmp_path / "targets.csv", [missing, slow])
    started = time.monotonic()
    with pytest.raises(InputError, match="record 1 .*fetch_failed"):
        _run(targets, warc_base_url=_warcs_url(server), fetch_retries=0, fetch_timeout_s=120, fail_on_reject=True)
    # row 2's body would take two minutes, its deadline as long; its fetch may not even have
    # begun when row 1 failed the run (a loaded machine), and it is never tried again
    assert time.monotonic() - started < 30
    assert server.requests["warcs/slow.warc.gz"] in (0, 1)


DOT_SEGMENTS = [
    "../secret.warc.gz", "./../secret.warc.gz", "sub/../../secret.warc.gz", "%2e%2e/secret.warc.gz",
    "%2E%2E/secret.warc.gz", ".%2e/secret.warc.gz", "..%2fsecret.warc.gz", "%252e%252e/secret.warc.gz",
    "..\\secret.warc.gz", "./pages.warc.gz", "/../secret.warc.gz",
]


def test_a_filename_with_dot_segments_is_refused_and_never_requested(server, tmp_path):
    good = _served(server)
    # a real WARC file beside warc_base_url's folder, which no target may reach
    shutil.copy(server.folder / "warcs" / "pages.warc.gz", server.folder / "secret.warc.gz")
    rows = [good[0], *({**good[1], "filename": name} for name in DOT_SEGMENTS), good[1]]
    targets = _write_targets(tmp_path / "targets.csv", rows)
    documents, stats = _run(targets, warc_base_url=_warcs_url(server))
    last = len(rows)
    assert _outcomes(documents, stats) == {1: None, last: None, **{row: "invalid_target" for row in range(2, last)}}
    details = _details(stats)
    for row, name in enumerate(DOT_SEGMENTS, start=2):
        assert name in details[row] and "outside warc_base_url" in details[row], details[row]
    assert set(server.requests) == {"warcs/pages.warc.gz"}


def test_redirects_are_followed_only_within_warc_base_url(server, tmp_path):
    good = _served(server)
    elsewhere = range_server(server.folder)  # the same files on another port
    try:
        other_port = f"http://127.0.0.1:{elsewhere.server_address[1]}"
        here = f"http://127.0.0.1:{server.server_address[1]}"
        shutil.copy(server.folder / "warcs" / "pages.warc.gz", server.folder / "secret.warc.gz")
        # the two redirected within the base lead to the file's two records
        faulty = _misbehaving(server, good[0], within=f"redirect {here}/warcs/pages.warc.gz")
        faulty += _misbehaving(server, good[1], relative="redirect /warcs/pages.warc.gz")
        faulty += _misbehaving(
            server, good[0],
            port=f"redirect {other_port}/warcs/pages.warc.gz",
            above="redirect /secret.warc.gz",
            encoded="redirect /warcs/%2e%2e/secret.warc.gz",
            scheme=f"redirect https://127.0.0.1:{server.server_address[1]}/warcs/pages.warc.gz",
        )
        targets = _write_targets(tmp_path / "targets.csv", faulty)
        documents, stats = _run(targets, warc_base_url=_warcs_url(server), fetch_retries=0)
        assert _outcomes(documents, stats) == {1: None, 2: None, **{row: "fetch_failed" for row in range(3, 7)}}
        details = _details(stats)
        for row, where in ((3, other_port), (4, "/secret.warc.gz"), (5, "secret.warc.gz"), (6, "https://")):
            assert "redirected outside warc_base_url" in details[row] and where in details[row], details[row]
        assert not elsewhere.requests
        assert set(server.requests) == {"warcs/pages.warc.gz", *(f"warcs/{row['filename']}" for row in faulty)}
        assert server.requests["warcs/pages.warc.gz"] == 2  # the two redirects within the base
    finally:
        elsewhere.shutdown()
        elsewhere.server_close()


@pytest.mark.faults
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_ends_a_cli_run_stalled_in_a_fetch_within_seconds(server, tmp_path, cli_env, signum):  # noqa: F811
    good = _served(server)
    (stalled,) = _misbehaving(server, good[0], stalled="trickle headers")
    targets = _write_targets(tmp_path / "targets.csv", [good[0], stalled, good[1]])
    config = {"warc_base_url": _warcs_url(server), "fetch_retries": 0, "fetch_timeout_s": 300}
    # PYTHONPATH: this checkout's code, whichever one the virtualenv installed
    env = {**offline(cli_env), "DEDUP_INPUT": str(targets), "PYTHONPATH": str(PROJECT_ROOT)}
    command = ["-m", "dedup_assets.cli", "run", "--config-json", json.dumps({"resources": {"dedup": {"config": config}}})]
    process = subprocess.Popen(
        [sys.executable, *command], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 240
        while not server.requests["warcs/stalled.warc.gz"] and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert server.requests["warcs/stalled.warc.gz"], "the run never asked for the stalled record"
        time.sleep(1)  # inside the headers
        os.kill(process.pid, signum)
        # the server would go on for two minutes, the deadline for five
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 1
    assert "Error: the run was stopped (SIGTERM or Ctrl-C)." in stderr and "Traceback" not in stderr, stderr[-3000:]
    with DagsterInstance.from_config(cli_env["DAGSTER_HOME"]) as instance:
        assert instance.get_run_records(RunsFilter(statuses=[DagsterRunStatus.STARTED])) == []
    # the run failed as a whole: no documents, no rejects, no half of either
    with duckdb.connect(cli_env["DEDUP_DATABASE"], read_only=True) as connection:
        tables = connection.execute("select table_name from information_schema.tables").fetchall()
    assert not {"documents", "rejected_documents"} & {name for (name,) in tables}
