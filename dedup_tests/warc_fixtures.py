"""Small real WARC files, written with warcio's own writer, for the tests; the real HTTP server on
127.0.0.1 that serves them by byte range is ``loopback_warcs``'s."""

from __future__ import annotations

from io import BytesIO
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from .loopback_warcs import page, range_server  # noqa: F401 (the tests' server)

ARTICLE = (
    "Incident routing sends every alert to the team that owns the failing service. The router "
    "reads the service catalogue each minute, matches the alert labels against ownership rules, "
    "and pages the primary on-call engineer for that team. When nobody acknowledges within ten "
    "minutes the page escalates to the secondary, and after twenty minutes to the engineering "
    "manager. Alerts without an owner go to the platform queue, where they are triaged during "
    "business hours and assigned an owner before the next release. Every routing decision is "
    "logged with the rule that matched, so reviewers can replay why a page reached a person."
)
NAV = "Home Products Pricing Docs Blog Careers Contact Sign in " * 6


def _response(writer, uri, status, content_type, payload, date):
    headers = StatusAndHeaders(status, [("Content-Type", content_type)], protocol="HTTP/1.1")
    record = writer.create_warc_record(
        uri,
        "response",
        payload=BytesIO(payload),
        http_headers=headers,
        warc_headers_dict={"WARC-Date": date},
    )
    writer.write_record(record)


def write_crawl(path: Path, truncate_last: bool = True) -> Path:
    """Mirrored pages on two domains, a one-word revision, a boilerplate-heavy page, a 404, an
    image, a request record and (optionally) a last record cut off mid-payload."""
    with path.open("wb") as stream:
        writer = WARCWriter(stream, gzip=True)
        _response(writer, "https://docs.example.com/routing", "200 OK", "text/html; charset=utf-8",
                  page("Incident routing", ARTICLE), "2026-03-03T10:00:00Z")
        _response(writer, "https://mirror.example.net/routing", "200 OK", "text/html",
                  page("Incident routing", ARTICLE), "2026-03-02T10:00:00Z")
        _response(writer, "https://wiki.example.io/routing", "200 OK", "text/html; charset=utf-8",
                  page("Incident routing", ARTICLE.replace("ten minutes", "fifteen minutes")),
                  "2026-03-01T10:00:00Z")
        _response(writer, "https://shop.example.org/about", "200 OK", "text/html",
                  page("About us", "We sell handmade ceramic mugs from a small studio by the sea.", NAV),
                  "2026-03-01T11:00:00Z")
        _response(writer, "https://docs.example.com/missing", "404 Not Found", "text/html",
                  page("Not found", "Nothing here."), "2026-03-01T12:00:00Z")
        _response(writer, "https://docs.example.com/logo.png", "200 OK", "image/png",
                  b"\x89PNG\r\n\x1a\n" + bytes(200), "2026-03-01T12:00:00Z")
        request = writer.create_warc_record(
            "https://docs.example.com/routing", "request", payload=BytesIO(b"GET /routing HTTP/1.1\r\n\r\n")
        )
        writer.write_record(request)
        if truncate_last:
            _response(writer, "https://docs.example.com/cut", "200 OK", "text/html",
                      page("Cut off", ARTICLE * 3), "2026-03-01T13:00:00Z")
    if truncate_last:
        data = path.read_bytes()
        path.write_bytes(data[:-120])
    return path


def write_edge_records(path: Path) -> Path:
    """A response without WARC-Target-URI, a page larger than a small max_body_bytes, a page in
    Latin-1 with a byte that is not UTF-8, and an HTML page with no main text."""
    with path.open("wb") as stream:
        writer = WARCWriter(stream, gzip=False)
        headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
        record = writer.create_warc_record(
            "", "response", payload=BytesIO(page("No URI", ARTICLE)), http_headers=headers,
            warc_headers_dict={"WARC-Date": "2026-03-01T00:00:00Z"},
        )
        record.rec_headers.remove_header("WARC-Target-URI")
        writer.write_record(record)
        _response(writer, "https://big.example.com/", "200 OK", "text/html",
                  page("Big", ARTICLE * 40), "2026-03-01T00:00:00Z")
        _response(writer, "https://latin.example.com/", "200 OK", "text/html; charset=utf-8",
                  page("Caf\xe9", "Le caf\xe9 " + ARTICLE).decode("utf-8").encode("latin-1"),
                  "2026-03-01T00:00:00Z")
        _response(writer, "https://empty.example.com/", "200 OK", "text/html",
                  b"<html><head><title>Empty</title></head><body></body></html>", "2026-03-01T00:00:00Z")
    return path


def write_pages(path: Path, count: int, gzip: bool = True) -> Path:
    """``count`` HTML responses with pages of their own, one gzip member each when gzipped."""
    with path.open("wb") as stream:
        writer = WARCWriter(stream, gzip=gzip)
        for number in range(count):
            _response(writer, f"https://pages.example.com/{number}", "200 OK", "text/html",
                      page(f"Page {number}", f"Page {number} of the crawl. {ARTICLE}"), "2026-03-01T00:00:00Z")
    return path

