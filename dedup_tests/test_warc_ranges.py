"""Targets input: WARC records fetched by byte range from a real loopback HTTP server (or a local
folder), verified, retried, cached, and every target row accounted for."""

from __future__ import annotations

import base64
import dataclasses
import json
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pandas as pd
import pytest
from warcio.archiveiterator import ArchiveIterator

from dedup_assets.cli import main
from dedup_assets.core.read import InputError, InputStats, count_input_records, document_batches, read_documents
from dedup_assets.core.read.csv import READER as CSV_READER
from dedup_assets.core.read.registry import reader_for
from dedup_assets.core.read import http_fetch
from dedup_assets.core.read.http_fetch import is_common_crawl
from dedup_assets.core.settings.model import Settings, SettingsError
from dedup_assets.core.settings.input import COMMON_CRAWL_TERMS, InputPolicy
from dedup_assets.settings_resource import DedupSettings

from .conftest import GraphRunner
from .test_cli import MODULE, cli_env, materialize  # noqa: F401 (cli_env: a fixture)
from .test_disk_full import fill, tmpfs
from .warc_fixtures import range_server, write_crawl, write_pages

TARGET_COLUMNS = ["url", "filename", "offset", "length", "digest", "mime", "status"]
_PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


def offline(env: dict) -> dict:
    """``env`` without proxies, so requests to the loopback servers go straight to them."""
    kept = {name: value for name, value in env.items() if name.upper() not in _PROXIES}
    return {**kept, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch):
    """No proxy between the tests and their loopback servers, and no DEDUP_CACHE of the caller's."""
    monkeypatch.delenv("DEDUP_CACHE", raising=False)
    for name in _PROXIES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    for name, value in offline({}).items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def server(tmp_path):
    folder = tmp_path / "served"
    folder.mkdir()
    httpd = range_server(folder)
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _base_url(httpd) -> str:
    return f"http://127.0.0.1:{httpd.server_address[1]}/"


def target_rows(path: Path, name: str) -> list[dict]:
    """Every record of a WARC.gz as a CDX API target row."""
    rows = []
    with path.open("rb") as stream:
        records = ArchiveIterator(stream)
        for record in records:
            headers = record.rec_headers
            record.content_stream().read()
            rows.append({
                "url": headers.get_header("WARC-Target-URI") or "",
                "filename": name,
                "offset": records.get_record_offset(),
                "length": records.get_record_length(),
                "digest": (headers.get_header("WARC-Payload-Digest") or "").removeprefix("sha1:"),
                "mime": "text/html",
                "status": 200,
            })
    return rows


# the reason each row of the targets file ends with (None: a document)
EXPECTED = {
    1: None, 2: None, 3: None, 4: None, 5: "http_status", 6: "not_html", 7: "not_response",
    8: None, 9: "range_not_honored", 10: "length_mismatch", 11: "fetch_failed", 12: "digest_mismatch",
    13: "fetch_failed", 14: "uri_mismatch", 15: "invalid_target", 16: "not_one_record",
}


def _targets(httpd, folder: Path) -> Path:
    """A targets file of good rows and one of each fault, its files served by ``httpd``."""
    served = httpd.folder
    (served / "crawl-data").mkdir()
    crawl_file = "crawl-data/crawl.warc.gz"
    crawl = target_rows(write_crawl(served / crawl_file, truncate_last=False), crawl_file)
    faulty = {}
    for name, fault in (("flaky", "503 twice"), ("whole", "ignores range"), ("short", "truncated"), ("reset", "reset")):
        faulty[name] = target_rows(write_pages(served / f"{name}.warc.gz", 2), f"{name}.warc.gz")[1]
        httpd.faults[f"{name}.warc.gz"] = fault
    rows = crawl + [faulty["flaky"], faulty["whole"], faulty["short"], faulty["reset"]]
    rows.append({**crawl[0], "digest": "A" * 32})
    rows.append({**crawl[0], "filename": "missing.warc.gz"})
    rows.append({**crawl[1], "url": "https://elsewhere.example.com/"})
    rows.append({**crawl[2], "offset": "twelve"})
    rows.append({**crawl[0], "length": crawl[0]["length"] + crawl[1]["length"]})
    pd.DataFrame(rows, columns=TARGET_COLUMNS).to_csv(folder / "targets.csv", index=False)
    return folder / "targets.csv"


def _run(targets: Path, backoff_s: float = 0.01, **settings) -> tuple[list[dict], InputStats]:
    """The documents and rejects of a targets file, retries waiting ``backoff_s`` and up."""
    stats = InputStats()
    policy = Settings(**settings).input_policy()
    policy = dataclasses.replace(policy, fetch=dataclasses.replace(policy.fetch, backoff_s=backoff_s))
    documents = [row for batch in document_batches(targets, stats, 5, policy) for row in batch.to_pylist()]
    return documents, stats


def _outcomes(documents: list[dict], stats: InputStats) -> dict[int, str | None]:
    return {
        **{document["input_row"]: None for document in documents},
        **{rejected["input_row"]: rejected["reason"] for rejected in stats.rejected},
    }


def test_every_target_row_is_a_document_or_a_named_reject_and_a_rerun_fetches_from_the_cache(server, tmp_path):
    targets = _targets(server, tmp_path)
    cache = tmp_path / "cache"
    settings = {"warc_base_url": _base_url(server), "fetch_retries": 2, "fetch_concurrency": 4, "fetch_cache": str(cache)}
    assert reader_for(targets).name == "warc_ranges"  # by its columns, source_format unset

    documents, stats = _run(targets, **settings)
    assert stats.rows == len(EXPECTED) == count_input_records(targets) == len(documents) + len(stats.rejected)
    assert _outcomes(documents, stats) == EXPECTED
    assert [document["input_row"] for document in documents] == [1, 2, 3, 4, 8]  # the targets' order
    flaky = documents[-1]
    assert server.requests["flaky.warc.gz"] == 3  # two 503s, then the record
    assert (flaky["target_row"], flaky["warc_filename"], flaky["domain"]) == (8, "flaky.warc.gz", "pages.example.com")
    details = {rejected["input_row"]: rejected["detail"] for rejected in stats.rejected}
    assert "HTTP 404" in details[13] and "gave up after 3 attempts" in details[11]
    assert "Error" in details[11].partition("the last: ")[2]  # the reset, not an HTTP status
    assert "twelve" in details[15] and "offset" in details[15]

    server.requests.clear()
    again, stats_again = _run(targets, **settings)
    assert (again, stats_again.rejected) == (documents, stats.rejected)
    # only targets that never gave a record that checks out are asked for again: the two-record
    # span (not_one_record) is the only range of the crawl's file not kept
    assert set(server.requests) == {
        "whole.warc.gz", "short.warc.gz", "reset.warc.gz", "missing.warc.gz", "crawl-data/crawl.warc.gz",
    }
    assert server.requests["crawl-data/crawl.warc.gz"] == 1

    entries = sorted(path for path in cache.rglob("*") if path.is_file() and path.suffix != ".sha256")
    # the crawl's seven records and the flaky one: each range once
    assert len(entries) == 8
    for entry in entries:
        data = entry.read_bytes()
        entry.write_bytes(data[:20] + bytes([data[20] ^ 0xFF]) + data[21:])
    server.requests.clear()
    repaired, _ = _run(targets, **settings)
    assert repaired == documents
    # every damaged entry is fetched again (a range two rows share may be fetched by both); the
    # cleared counter makes the flaky file answer 503 twice again
    assert server.requests["flaky.warc.gz"] == 3 and server.requests["crawl-data/crawl.warc.gz"] >= 8


def test_common_crawls_endpoint_needs_its_terms_acknowledged_before_any_fetch(tmp_path):
    targets = pd.DataFrame([{"url": "https://a.example/", "filename": "x.warc.gz", "offset": 0, "length": 10}])
    targets.to_csv(tmp_path / "targets.csv", index=False)
    with pytest.raises(InputError) as refused:
        _run(tmp_path / "targets.csv")
    message = str(refused.value)
    assert COMMON_CRAWL_TERMS in message and "acknowledge_common_crawl_terms" in message
    assert "Nothing was fetched" in message
    # the setting that lets it fetch, which the launch layer writes for the command that was run
    assert refused.value.fix == {"acknowledge_common_crawl_terms": True}


@pytest.mark.parametrize(
    "setting",
    [
        {"fetch_concurrency": 0}, {"fetch_concurrency": 65}, {"fetch_retries": -1}, {"fetch_retries": 21},
        {"fetch_timeout_s": 0}, {"warc_base_url": ""},
    ],
)
def test_a_bad_fetch_setting_is_refused_at_launch(setting):
    (name,) = setting
    with pytest.raises(SettingsError, match=name):
        Settings(**setting)
    with pytest.raises(Exception, match=name):
        DedupSettings(**setting)


def test_columnar_index_targets_read_from_a_local_folder(tmp_path):
    folder = tmp_path / "warcs"
    folder.mkdir()
    rows = target_rows(write_pages(folder / "pages.warc.gz", 3), "pages.warc.gz")
    columnar = pd.DataFrame({
        "url": [row["url"] for row in rows],
        "warc_filename": [row["filename"] for row in rows],
        "warc_record_offset": [row["offset"] for row in rows],
        "warc_record_length": [row["length"] for row in rows],
        # Common Crawl's base32, with its "sha1:" prefix, and as hex: the same digest
        "content_digest": [
            rows[0]["digest"], "sha1:" + rows[1]["digest"], base64.b32decode(rows[2]["digest"]).hex(),
        ],
        "fetch_status": [200] * 3,
    })
    columnar.to_parquet(tmp_path / "targets.parquet")
    for base in (str(folder), folder.as_uri()):
        documents, stats = _run(tmp_path / "targets.parquet", warc_base_url=base)
        assert stats.rejected == [] and [d["target_row"] for d in documents] == [1, 2, 3]
        assert [(d["warc_offset"], d["warc_length"]) for d in documents] == [(r["offset"], r["length"]) for r in rows]
    shutil.rmtree(folder)
    with pytest.raises(InputError, match=r"all 3 records were rejected \(fetch_failed 3\)"):
        _run(tmp_path / "targets.parquet", warc_base_url=str(folder), source_format="warc_ranges")


def test_lineage_of_fetched_records_reaches_deduped_documents(server, tmp_path):
    targets = _targets(server, tmp_path)
    runner = GraphRunner(tmp_path)
    result = runner.run(
        targets, selection=["documents", "rejected_documents", "fingerprinted", "band_memberships",
                            "candidate_pairs", "scored_pairs", "duplicate_pairs", "reference_matches", "clusters",
                            "deduped_documents"],
        warc_base_url=_base_url(server), fetch_retries=2,
    )
    assert result.success
    kept = runner.table("deduped_documents").sort_values("target_row")
    rejected = runner.table("rejected_documents")
    assert len(runner.table("documents")) + len(rejected) == len(EXPECTED)
    assert set(rejected["reason"]) == {reason for reason in EXPECTED.values() if reason}
    # the crawl's three routing pages and the flaky file's page (the same article) are one
    # cluster, of which the newest is kept; the shop page is its own
    assert list(kept["target_row"]) == [1, 4]
    assert list(kept["cluster_size"]) == [4, 1]
    for row in kept.itertuples():
        # each kept document names the one record its bytes are: it can be fetched again
        with (server.folder / row.warc_filename).open("rb") as stream:
            stream.seek(row.warc_offset)
            record = next(iter(ArchiveIterator(stream)))
            assert record.rec_headers.get_header("WARC-Record-ID") == row.doc_id
        assert row.input_row == row.target_row


class _CdxHandler(BaseHTTPRequestHandler):
    """A CDX API answering recorded JSON lines (a line given as text is sent as it is), in pages
    of two, after ``unavailable`` answers of 503."""

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        self.server.queries.append(query)
        if self.server.unavailable:
            self.server.unavailable -= 1
            self.send_error(503)
            return
        lines = self.server.lines if url.path == "/CC-MAIN-2026-01-index" and query["url"] == ["example.com/*"] else []
        if not lines:
            self.send_error(404, "No Captures found")
            return
        pages = [lines[start : start + 2] for start in range(0, len(lines), 2)]
        if query.get("showNumPages") == ["true"]:
            body = json.dumps({"pages": len(pages), "pageSize": 2, "blocks": len(pages)})
        else:
            body = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in pages[int(query["page"][0])]) + "\n"
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _cdx_lines(rows: list[dict]) -> list[dict]:
    """As Common Crawl's index answers: every value a string, with fields the targets file leaves out."""
    return [
        {"urlkey": "com,example)/", "timestamp": "20260101000000", "url": row["url"], "mime": "text/html",
         "status": "200", "digest": row["digest"], "length": str(row["length"]), "offset": str(row["offset"]),
         "filename": row["filename"], "languages": "eng"}
        for row in rows
    ]


def _cdx_targets(lines: list, out: Path, unavailable: int = 0) -> tuple[int, list[dict]]:
    """``dedup cdx-targets`` against a local CDX API serving ``lines``: its exit code, and the queries."""
    cdx = ThreadingHTTPServer(("127.0.0.1", 0), _CdxHandler)
    cdx.lines, cdx.queries, cdx.unavailable = lines, [], unavailable
    threading.Thread(target=cdx.serve_forever, daemon=True).start()
    try:
        code = main([
            "cdx-targets", "--crawl", "CC-MAIN-2026-01", "--cdx-api-url", f"http://127.0.0.1:{cdx.server_address[1]}/",
            "--out", str(out), "example.com/*", "nothing.example/*",
        ])
    finally:
        cdx.shutdown()
        cdx.server_close()
    return code, cdx.queries


def test_cdx_targets_writes_a_targets_file_that_runs(server, tmp_path, capsys):
    served = target_rows(write_pages(server.folder / "pages.warc.gz", 3), "pages.warc.gz")
    out = tmp_path / "targets.csv"
    # the index is busy at first: asked again, as a record fetch is
    code, queries = _cdx_targets(_cdx_lines(served), out, unavailable=1)
    assert code == 0 and f"{out}: 3 targets." in capsys.readouterr().out
    assert all(query["filter"] == ["=status:200", "=mime:text/html"] for query in queries)
    assert [query.get("page") for query in queries] == [None, None, ["0"], ["1"], None]
    written = pd.read_csv(out)
    assert list(written.columns) == ["url", "filename", "offset", "length", "digest", "timestamp", "mime", "status"]
    documents, stats = _run(out, warc_base_url=_base_url(server))
    assert stats.rejected == [] and [d["target_row"] for d in documents] == [1, 2, 3]


@pytest.mark.faults
def test_cdx_targets_on_a_full_disk_says_so_in_one_line_and_leaves_no_temporary_file(tmp_path, capsys):
    rows = [
        {"url": f"https://example.com/{i}", "digest": "A" * 32, "length": 100, "offset": 100 * i,
         "filename": "p.warc.gz"}
        for i in range(200)
    ]
    with tmpfs(tmp_path / "disk", "64k") as disk:
        fill(disk, leave=4096)
        out = disk / "targets.csv"
        code, _ = _cdx_targets(_cdx_lines(rows), out)
        assert (code, capsys.readouterr().err) == (
            2,
            f"Error: Cannot write {out}: no space is left on the device. Free space or fix the folder's "
            "permissions, or set --out to a file on a disk with room, then run again.\n",
        )
        assert [path.name for path in disk.iterdir()] == ["filler"]


def test_cdx_targets_from_common_crawls_index_needs_the_terms_acknowledged(tmp_path, capsys):
    code = main(["cdx-targets", "--crawl", "CC-MAIN-2026-01", "--out", str(tmp_path / "t.csv"), "example.com/*"])
    error = capsys.readouterr().err
    assert code == 2 and COMMON_CRAWL_TERMS in error and "--acknowledge-common-crawl-terms" in error
    assert not (tmp_path / "t.csv").exists()


def test_dedup_cache_comes_from_the_environment_unless_fetch_cache_is_set(monkeypatch, tmp_path):
    monkeypatch.setenv("DEDUP_CACHE", str(tmp_path / "env-cache"))
    assert DedupSettings().settings().fetch_cache == str(tmp_path / "env-cache")
    assert DedupSettings(fetch_cache=str(tmp_path / "mine")).settings().fetch_cache == str(tmp_path / "mine")
    monkeypatch.delenv("DEDUP_CACHE")
    assert DedupSettings().settings().fetch_cache is None


@pytest.mark.slow
def test_cli_run_accounts_for_every_target_and_a_rerun_fetches_from_the_cache(server, tmp_path, cli_env):
    env = {**offline(cli_env), "DEDUP_INPUT": str(_targets(server, tmp_path)), "DEDUP_CACHE": str(tmp_path / "cache")}
    config = json.dumps({"resources": {"dedup": {"config": {"warc_base_url": _base_url(server), "fetch_retries": 2}}}})
    for selection in ("group:deduplication", "documents,rejected_documents"):
        server.requests.clear()
        run = materialize(env, *MODULE, "--select", selection, "--config-json", config)
        assert run.returncode == 0, run.stderr[-3000:]
        if selection == "group:deduplication":
            manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
            counts = manifest["counts"]
            assert counts["input_record_rows"] == len(EXPECTED) == counts["document_rows"] + counts["rejected_document_rows"]
            assert manifest["rejected_by_reason"] == dict(Counter(reason for reason in EXPECTED.values() if reason))
            assert server.requests["flaky.warc.gz"] == 3
    # the second run fetched only what never gave a record that checks out
    assert set(server.requests) == {
        "whole.warc.gz", "short.warc.gz", "reset.warc.gz", "missing.warc.gz", "crawl-data/crawl.warc.gz",
    }
    assert server.requests["crawl-data/crawl.warc.gz"] == 1  # the two-record span (not_one_record)


def _write_targets(path: Path, rows: list[dict]) -> Path:
    """A targets file of ``rows``, every value as text (Parquet keeps a NUL in a filename)."""
    frame = pd.DataFrame(rows, columns=TARGET_COLUMNS).astype(str)
    if path.suffix == ".parquet":
        frame.to_parquet(path)
    else:
        frame.to_csv(path, index=False)
    return path


def _details(stats: InputStats) -> dict[int, str]:
    return {rejected["input_row"]: rejected["detail"] for rejected in stats.rejected}


def test_a_failing_fetch_or_cache_is_the_rows_reject_not_the_runs_crash(server, tmp_path):
    good = target_rows(write_pages(server.folder / "pages.warc.gz", 2), "pages.warc.gz")
    for name, fault in (
        ("loop", "redirect loop"),  # TooManyRedirects: an httpx error that is not a TransportError
        ("shifted", "wrong range"),  # 206 with the right length, but another span
        ("moved", "redirect https://data.commoncrawl.org/crawl-data/moved.warc.gz"),
    ):
        shutil.copy(server.folder / "pages.warc.gz", server.folder / f"{name}.warc.gz")
        server.faults[f"{name}.warc.gz"] = fault
    rows = [good[0], *({**good[1], "filename": f"{name}.warc.gz"} for name in ("loop", "shifted", "moved")), good[1]]
    targets = _write_targets(tmp_path / "targets.csv", rows)
    not_a_folder = tmp_path / "cache"
    not_a_folder.write_text("a file where the cache folder should be")
    documents, stats = _run(targets, warc_base_url=_base_url(server), fetch_retries=0, fetch_cache=str(not_a_folder))
    assert _outcomes(documents, stats) == {1: None, 2: "fetch_failed", 3: "length_mismatch", 4: "fetch_failed", 5: None}
    details = _details(stats)
    assert "TooManyRedirects" in details[2] and "loop.warc.gz" in details[2]
    assert "bytes " in details[3] and "honours Range" in details[3]
    # a redirect to Common Crawl's own servers needs the terms as much as warc_base_url there does
    assert COMMON_CRAWL_TERMS in details[4] and "data.commoncrawl.org" not in server.requests
    assert not_a_folder.read_text() == "a file where the cache folder should be"


def test_odd_targets_in_a_local_folder_are_rejected_with_a_reason(tmp_path):
    folder = tmp_path / "warcs"
    folder.mkdir()
    good = target_rows(write_pages(folder / "pages.warc.gz", 2), "pages.warc.gz")
    # a real WARC file beside the folder, which no target may reach
    shutil.copy(folder / "pages.warc.gz", tmp_path / "outside.warc.gz")
    rows = [
        good[0],
        {**good[1], "filename": "pa\0ges.warc.gz"},
        {**good[1], "offset": 10**30},
        {**good[1], "offset": "\u00b2"},  # "²".isdigit() is True, but int() refuses it
        {**good[1], "filename": "../outside.warc.gz"},
        {**good[1], "filename": str(tmp_path / "outside.warc.gz")},
        {**good[1], "length": 10**12},
        good[1],
    ]
    targets = _write_targets(tmp_path / "targets.parquet", rows)
    documents, stats = _run(targets, warc_base_url=str(folder))
    assert _outcomes(documents, stats) == {
        1: None, 2: "fetch_failed", 3: "fetch_failed", 4: "invalid_target", 5: "invalid_target",
        6: "invalid_target", 7: "too_large", 8: None,
    }
    details = _details(stats)
    assert "outside warc_base_url" in details[5] and "outside warc_base_url" in details[6]
    assert "max_body_bytes" in details[7] and "nothing was fetched" in details[7]


def test_targets_in_a_local_folder_never_load_the_http_client(tmp_path):
    """httpx is loaded by the source that fetches over HTTP, not by every target's outcome: a run
    of local files, its rejects included, never imports it."""
    folder = tmp_path / "warcs"
    folder.mkdir()
    good = target_rows(write_pages(folder / "pages.warc.gz", 2), "pages.warc.gz")
    targets = _write_targets(tmp_path / "targets.parquet", [good[0], {**good[1], "offset": 10**30}, good[1]])
    script = (
        "import sys\nfrom pathlib import Path\n"
        "from dedup_assets.core.read import InputStats, document_batches\n"
        "from dedup_assets.core.settings.model import Settings\n"
        "stats = InputStats()\n"
        f"policy = Settings(warc_base_url={str(folder)!r}).input_policy()\n"
        f"rows = sum(batch.num_rows for batch in document_batches(Path({str(targets)!r}), stats, 5, policy))\n"
        "print(rows, [r['reason'] for r in stats.rejected], 'httpx' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split("\n")[0] == "2 ['fetch_failed'] False"


def test_only_records_that_check_out_are_cached(server, tmp_path):
    good = target_rows(write_pages(server.folder / "pages.warc.gz", 3), "pages.warc.gz")
    targets = _write_targets(
        tmp_path / "targets.csv",
        [{**good[0], "digest": "A" * 32}, {**good[1], "url": "https://elsewhere.example/"}, good[2]],
    )
    cache = tmp_path / "cache"
    documents, stats = _run(targets, warc_base_url=_base_url(server), fetch_cache=str(cache))
    assert _outcomes(documents, stats) == {1: "digest_mismatch", 2: "uri_mismatch", 3: None}
    # the good record only: a bad mirror leaves no entry that a re-run would trust
    assert len([path for path in cache.rglob("*") if path.is_file() and path.suffix != ".sha256"]) == 1


def test_a_trickling_answer_is_cut_off_at_fetch_timeout_s(server, tmp_path):
    good = target_rows(write_pages(server.folder / "pages.warc.gz", 1), "pages.warc.gz")
    shutil.copy(server.folder / "pages.warc.gz", server.folder / "slow.warc.gz")
    server.faults["slow.warc.gz"] = "trickle 300"  # the record over five minutes: no single read times out
    targets = _write_targets(tmp_path / "targets.csv", [{**good[0], "filename": "slow.warc.gz"}, good[0]])
    started = time.monotonic()
    documents, stats = _run(targets, warc_base_url=_base_url(server), fetch_retries=0, fetch_timeout_s=0.5)
    # far under the trickle's five minutes, far over what the deadline takes on a busy machine
    assert time.monotonic() - started < 60
    assert _outcomes(documents, stats) == {1: "fetch_failed", 2: None}
    assert "fetch_timeout_s=0.5" in _details(stats)[1]


def test_a_stopping_run_does_not_wait_for_retries_asleep(server, tmp_path, monkeypatch):
    good = target_rows(write_pages(server.folder / "pages.warc.gz", 1), "pages.warc.gz")
    for name, fault in (("slow.warc.gz", "slow 404"), ("down.warc.gz", "503")):
        shutil.copy(server.folder / "pages.warc.gz", server.folder / name)
        server.faults[name] = fault
    targets = _write_targets(
        tmp_path / "targets.csv", [{**good[0], "filename": "slow.warc.gz"}, {**good[0], "filename": "down.warc.gz"}]
    )
    # row 1 fails the run after 0.3 s, while row 2 waits 150 s or more before its first retry
    monkeypatch.setattr(http_fetch, "_MAX_BACKOFF_S", 300.0)
    started = time.monotonic()
    with pytest.raises(InputError, match="record 1 .*fetch_failed"):
        _run(targets, backoff_s=300.0, warc_base_url=_base_url(server), fetch_retries=20, fail_on_reject=True)
    # far under that sleep, far over what ending the run takes on a busy machine
    assert time.monotonic() - started < 60
    assert server.requests["down.warc.gz"] == 1


@pytest.mark.parametrize(
    "url",
    [
        "https://data.commoncrawl.org/", "https://DATA.CommonCrawl.org./", "https://commoncrawl.org/",
        "https://index.commoncrawl.org/", "http://ds5q9oxwqwsfj.commoncrawl.org/",
        "https://commoncrawl.s3.amazonaws.com/", "https://CommonCrawl.S3.amazonaws.com./",
        "https://commoncrawl.s3.us-east-1.amazonaws.com/", "https://commoncrawl.s3-us-east-1.amazonaws.com/",
        "https://s3.amazonaws.com/commoncrawl/", "https://s3.amazonaws.com/commoncrawl",
        "https://s3.us-east-1.amazonaws.com/commoncrawl/", "https://s3.dualstack.us-east-1.amazonaws.com/commoncrawl/",
    ],
)
def test_every_spelling_of_common_crawls_servers_needs_the_terms(url, tmp_path):
    targets = _write_targets(tmp_path / "targets.csv", [{"url": "", "filename": "x.warc.gz", "offset": 0, "length": 10}])
    assert is_common_crawl(url)
    with pytest.raises(InputError, match="Nothing was fetched"):
        _run(targets, warc_base_url=url)


@pytest.mark.parametrize(
    "url",
    [
        "https://mirror.example.org/", "https://notcommoncrawl.org/", "https://commoncrawl.org.example.com/",
        "https://s3.amazonaws.com/othercrawl/", "https://s3.amazonaws.com/commoncrawl-mirror/",
        "https://mybucket.s3.amazonaws.com/commoncrawl/",
    ],
)
def test_other_servers_are_not_common_crawls(url):
    assert not is_common_crawl(url)


def test_a_documents_file_is_never_taken_for_targets_and_its_columns_are_read_once(tmp_path, monkeypatch):
    path = tmp_path / "documents.csv"
    row = {"doc_id": "d1", "source": "s", "domain": "example.com", "crawled_at": "2026-01-01T00:00:00Z",
           "title": "T", "text": "Some words of a page.", "url": "https://example.com/", "filename": "a.warc.gz",
           "offset": 0, "length": 10}
    pd.DataFrame([row]).to_csv(path, index=False)
    reads = []
    schema = CSV_READER.schema
    monkeypatch.setattr(CSV_READER, "schema", lambda path_: reads.append(path_) or schema(path_))
    # its body is in "text": the fields mapping names a column the file has
    assert reader_for(path, None, {"body": "text"}).name == "csv"
    for _ in range(5):
        assert reader_for(path).name == "warc_ranges"  # unmapped, it has no documents' body
    assert reads == [path]
    documents = read_documents(path, policy=InputPolicy(fields={"body": "text"}))
    assert documents["doc_id"].to_pylist() == ["d1"]
    pd.DataFrame([{**row, "body": row["text"]}]).to_csv(path, index=False)  # a new version of the file
    assert reader_for(path).name == "csv" and len(reads) >= 2


@pytest.mark.parametrize(
    "bad, message",
    [
        ("<html>busy</html>", "line 2 of page 0 of example.com/* is not JSON"),
        (
            {"url": "https://example.com/", "filename": "a.warc.gz", "length": "10"},
            "line 2 of page 0 of example.com/* has no offset",
        ),
        ('["a", "list"]', "has no filename, offset, length"),
    ],
)
def test_cdx_targets_names_the_line_the_server_got_wrong_and_leaves_the_old_file(bad, message, tmp_path, capsys):
    capture = {"url": "https://example.com/", "digest": "", "length": 10, "offset": 0, "filename": "a.warc.gz"}
    lines = _cdx_lines([capture] * 3)
    lines[1] = bad
    out = tmp_path / "targets.csv"
    out.write_text("the last good targets file\n")
    code, _ = _cdx_targets(lines, out)
    error = capsys.readouterr().err
    assert code == 2 and message in error and "Traceback" not in error
    assert out.read_text() == "the last good targets file\n" and list(tmp_path.iterdir()) == [out]
