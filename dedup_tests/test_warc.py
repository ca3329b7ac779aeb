"""WARC input end to end: documents with lineage, and every other record rejected with a reason."""

import json
import os
import subprocess
from io import BytesIO

import duckdb
import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from dedup_assets.core.read import InputPolicy, InputStats, count_input_records, document_batches

from .test_cli import DAGSTER, MODULE, PROJECT_ROOT
from .warc_fixtures import ARTICLE, page, write_crawl, write_edge_records, write_pages


def test_records_become_documents_or_rejects_with_reasons(tmp_path):
    crawl = write_crawl(tmp_path / "crawl.warc.gz")
    stats = InputStats()
    batches = list(document_batches(crawl, stats, 100, InputPolicy()))
    documents = [row for batch in batches for row in batch.to_pylist()]
    assert [d["domain"] for d in documents] == [
        "docs.example.com", "mirror.example.net", "wiki.example.io", "shop.example.org"
    ]
    first = documents[0]
    assert first["title"] == "Incident routing" and first["body"].startswith("Incident routing")
    assert first["doc_id"] == first["warc_record_id"] and first["doc_id"].startswith("<urn:uuid:")
    assert first["warc_filename"] == "crawl.warc.gz" and first["warc_offset"] == 0
    assert str(first["crawled_at"]) == "2026-03-03 10:00:00"
    assert "Careers" not in documents[3]["body"]  # navigation and footer are not main text
    reasons = {(r["input_row"], r["reason"]) for r in stats.rejected}
    assert reasons == {(5, "http_status"), (6, "not_html"), (7, "not_response"), (8, "truncated")}
    assert "ends inside the gzip member starting at compressed byte offset " in stats.rejected[-1]["detail"]
    assert stats.rows == 8 == count_input_records(crawl)


@pytest.mark.slow
def test_cli_run_on_a_crawl_keeps_lineage_and_clusters_mirrors(tmp_path):
    crawl = write_crawl(tmp_path / "crawl.warc.gz")
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "DEDUP_INPUT": str(crawl),
        "DEDUP_DATABASE": str(tmp_path / "db.duckdb"),
        "DEDUP_OUTPUT_DIR": str(tmp_path / "out"),
    }
    run = subprocess.run(
        [DAGSTER, "asset", "materialize", *MODULE, "--select", "group:deduplication"],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["counts"]["input_record_rows"] == 8
    assert manifest["rejected_by_reason"] == {"http_status": 1, "not_html": 1, "not_response": 1, "truncated": 1}
    assert (manifest["counts"]["duplicate_cluster_rows"], manifest["counts"]["representative_rows"]) == (1, 2)
    with duckdb.connect() as connection:
        kept = connection.execute(
            "select warc_target_uri, warc_record_id, cluster_size from read_parquet(?) order by warc_target_uri",
            [str(tmp_path / "out" / "deduped_documents" / "*.parquet")],
        ).fetchall()
    assert [(uri, size) for uri, _, size in kept] == [
        ("https://docs.example.com/routing", 3),
        ("https://shop.example.org/about", 1),
    ]
    assert all(record_id.startswith("<urn:uuid:") for _, record_id, _ in kept)


def test_missing_uri_oversized_page_bad_bytes_and_empty_page(tmp_path):
    crawl = write_edge_records(tmp_path / "edge.warc")
    stats = InputStats()
    rows = [r for b in document_batches(crawl, stats, 10, InputPolicy(max_body_bytes=20_000)) for r in b.to_pylist()]
    assert [(r["input_row"], r["reason"]) for r in stats.rejected] == [
        (1, "missing_field"), (2, "too_large"), (4, "no_text_extracted")
    ]
    latin = rows[0]
    # declared UTF-8 but sent Latin-1: the decoder falls back instead of dropping the text
    assert latin["domain"] == "latin.example.com" and latin["title"] == "Caf\u00e9"
    assert latin["body"].startswith("Caf\u00e9\n\nLe caf\u00e9 ") and latin["replaced_characters"] == 0


def test_an_unreadable_record_in_an_uncompressed_warc_is_one_reject_and_reading_goes_on(tmp_path):
    path = write_pages(tmp_path / "crawl.warc", 4, gzip=False)
    data = path.read_bytes()
    second = data.index(b"WARC/1.", 1)
    # a version warcio does not know, after blank lines warcio would take for a record of their own
    path.write_bytes(b"\r\n\r\n" + data[:second] + b"WARC/9.9" + data[second + 8:])
    stats = InputStats()
    rows = [r for b in document_batches(path, stats, 10, InputPolicy()) for r in b.to_pylist()]
    assert [r["input_row"] for r in rows] == [1, 3, 4]
    assert [(r["input_row"], r["reason"]) for r in stats.rejected] == [(2, "decode_error")]
    assert stats.rejected[0]["detail"] == (
        f"cannot read the record at byte offset {second + 4} (Invalid WARC record, first line: WARC/9.9); "
        "fix or drop it"
    )
    assert stats.rows == 4 == count_input_records(path)


def test_a_response_under_a_uri_that_is_not_http_is_rejected_naming_the_uri_not_its_digest(tmp_path):
    """warcio reads no HTTP headers under urn:, dns: or a bare word, so the payload digest fails
    against the whole block: the reject says what the record is, and the http page beside it is read."""
    path = tmp_path / "other-schemes.warc.gz"
    with path.open("wb") as stream:
        writer = WARCWriter(stream, gzip=True)
        for uri in ("urn:x-page:routing", "dns:example.com", "routing", "https://docs.example.com/routing"):
            headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(
                uri, "response", payload=BytesIO(page("Routing", ARTICLE)), http_headers=headers,
                warc_headers_dict={"WARC-Date": "2026-03-01T00:00:00Z"},
            ))
    stats = InputStats()
    rows = [r for b in document_batches(path, stats, 10, InputPolicy()) for r in b.to_pylist()]
    assert [r["warc_target_uri"] for r in rows] == ["https://docs.example.com/routing"]
    assert [(r["input_row"], r["reason"], r["detail"]) for r in stats.rejected] == [
        (row, "not_http", f"WARC-Target-URI {uri} is not an http(s) URL, so the record holds no HTTP response")
        for row, uri in ((1, "urn:x-page:routing"), (2, "dns:example.com"), (3, "routing"))
    ]
