"""Targets input: WARC records fetched by byte range from a real loopback HTTP server (or a local
folder), verified, retried, cached, and every target row accounted for."""

from __future__ import annotations

import base64
import json
import shutil
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pandas as pd
import pytest
from warcio.archiveiterator import ArchiveIterator

from dedup_assets.cli import main
from dedup_assets.core.readers import InputError, InputStats, count_input_records, document_batches
from dedup_assets.core.readers.registry import reader_for
from dedup_assets.core.settings import COMMON_CRAWL_TERMS, Settings, SettingsError
from dedup_assets.settings import DedupSettings

from .conftest import GraphRunner
from .test_cli import MODULE, cli_env, materialize  # noqa: F401 (cli_env: a fixture)
from .warc_fixtures import range_server, write_crawl, write_pages

TARGET_COLUMNS = ["url", "filename", "offset", "length", "digest", "mime", "status"]


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


def _run(targets: Path, **settings) -> tuple[list[dict], InputStats]:
    stats = InputStats()
    policy = Settings(**settings).input_policy()
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
    # only targets that never gave a record of the right length are asked for again
    assert set(server.requests) == {"whole.warc.gz", "short.warc.gz", "reset.warc.gz", "missing.warc.gz"}

    entries = sorted(path for path in cache.rglob("*") if path.is_file() and path.suffix != ".sha256")
    # the crawl's seven records, the flaky one and the two-record span: each range once
    assert len(entries) == 9
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


@pytest.mark.parametrize(
    "setting", [{"fetch_concurrency": 0}, {"fetch_retries": -1}, {"fetch_timeout_s": 0}, {"warc_base_url": ""}]
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
                            "candidate_pairs", "scored_pairs", "duplicate_pairs", "clusters", "deduped_documents"],
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
    """A CDX API answering recorded JSON lines, in pages of two."""

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        self.server.queries.append(query)
        lines = self.server.lines if url.path == "/CC-MAIN-2026-01-index" and query["url"] == ["example.com/*"] else []
        if not lines:
            self.send_error(404, "No Captures found")
            return
        pages = [lines[start : start + 2] for start in range(0, len(lines), 2)]
        if query.get("showNumPages") == ["true"]:
            body = json.dumps({"pages": len(pages), "pageSize": 2, "blocks": len(pages)})
        else:
            body = "\n".join(json.dumps(line) for line in pages[int(query["page"][0])]) + "\n"
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_cdx_targets_writes_a_targets_file_that_runs(server, tmp_path, capsys):
    served = target_rows(write_pages(server.folder / "pages.warc.gz", 3), "pages.warc.gz")
    cdx = ThreadingHTTPServer(("127.0.0.1", 0), _CdxHandler)
    # as Common Crawl's index answers: every value a string, with fields the targets file leaves out
    cdx.lines = [
        {"urlkey": "com,example)/", "timestamp": "20260101000000", "url": row["url"], "mime": "text/html",
         "status": "200", "digest": row["digest"], "length": str(row["length"]), "offset": str(row["offset"]),
         "filename": row["filename"], "languages": "eng"}
        for row in served
    ]
    cdx.queries = []
    threading.Thread(target=cdx.serve_forever, daemon=True).start()
    out = tmp_path / "targets.csv"
    try:
        code = main([
            "cdx-targets", "--crawl", "CC-MAIN-2026-01", "--cdx-api-url", f"http://127.0.0.1:{cdx.server_address[1]}/",
            "--out", str(out), "example.com/*", "nothing.example/*",
        ])
    finally:
        cdx.shutdown()
        cdx.server_close()
    assert code == 0 and f"{out}: 3 targets." in capsys.readouterr().out
    assert all(query["filter"] == ["=status:200", "=mime:text/html"] for query in cdx.queries)
    assert [query.get("page") for query in cdx.queries] == [None, ["0"], ["1"], None]
    written = pd.read_csv(out)
    assert list(written.columns) == ["url", "filename", "offset", "length", "digest", "timestamp", "mime", "status"]
    documents, stats = _run(out, warc_base_url=_base_url(server))
    assert stats.rejected == [] and [d["target_row"] for d in documents] == [1, 2, 3]


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


def test_cli_run_accounts_for_every_target_and_a_rerun_fetches_from_the_cache(server, tmp_path, cli_env):
    env = {**cli_env, "DEDUP_INPUT": str(_targets(server, tmp_path)), "DEDUP_CACHE": str(tmp_path / "cache")}
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
    # the second run fetched only what never gave a record of the right length
    assert set(server.requests) == {"whole.warc.gz", "short.warc.gz", "reset.warc.gz", "missing.warc.gz"}
