"""Small real WARC files, written with warcio's own writer, for the tests, and a real HTTP
server on 127.0.0.1 that serves them by byte range."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import BytesIO
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

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


def page(title: str, article: str, boilerplate: str = "") -> bytes:
    return (
        f"<html><head><title>{title}</title></head><body><nav>{boilerplate}</nav>"
        f"<article><h1>{title}</h1><p>{article}</p></article>"
        f"<footer>{boilerplate}</footer></body></html>"
    ).encode("utf-8")


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


class _RangeHandler(BaseHTTPRequestHandler):
    """Serves the server's folder, honouring Range; a file named in ``faults`` misbehaves: "reset"
    (the connection is reset), "503 twice" (then answers), "503" (always), "slow 404" (after
    0.3 s), "ignores range" (200, the whole file), "truncated" (206 with 100 bytes too few),
    "wrong range" (206 with as many bytes, from one byte on), "trickle" (a byte every 50 ms, for
    5 s) or "trickle <seconds>" (the body spread over that long), "trickle headers" (a header
    line a second, for two minutes), "redirect loop" (302 to itself), or "redirect <url>" (302
    there)."""

    protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
    disable_nagle_algorithm = True  # else the body waits for the headers' delayed ACK (40 ms)

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        server = self.server
        name = self.path.lstrip("/")
        with server.lock:
            server.requests[name] += 1
            seen = server.requests[name]
        fault = server.faults.get(name)
        if fault == "reset":
            # linger 0: closing sends a TCP reset instead of an orderly end
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        if fault == "503" or (fault == "503 twice" and seen <= 2):
            self.send_error(503)
            return
        if fault == "slow 404":
            time.sleep(0.3)
            self.send_error(404)
            return
        if fault == "trickle headers":
            self._trickle_headers()
            return
        if fault and fault.startswith("redirect"):
            location = self.path if fault == "redirect loop" else fault.removeprefix("redirect ")
            self.send_response(302)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path = server.folder / name
        if not path.is_file():
            self.send_error(404)
            return
        if fault == "ignores range":
            self._send(200, path.read_bytes())
            return
        first, last = (int(part) for part in self.headers["Range"].removeprefix("bytes=").split("-"))
        if fault == "wrong range":
            first, last = first + 1, last + 1
        if fault and fault.startswith("trickle"):
            body = path.read_bytes()[first : last + 1]
            seconds = fault.removeprefix("trickle")
            self._trickle(body, float(seconds), float(seconds) / len(body)) if seconds else self._trickle(body, 5, 0.05)
            return
        with path.open("rb") as handle:
            handle.seek(first)
            body = handle.read(last + 1 - first)
        content_range = f"bytes {first}-{last}/{path.stat().st_size}"
        self._send(206, body[:-100] if fault == "truncated" else body, content_range)

    def _send(self, status: int, body: bytes, content_range: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        if content_range:
            self.send_header("Content-Range", content_range)
        self.end_headers()
        self.wfile.write(body)

    def _trickle(self, body: bytes, seconds: float, interval: float) -> None:
        """A 206 whose body comes a byte every ``interval`` s, each before a per-read timeout
        would end it; stops after ``seconds``, or when the client hangs up."""
        self.send_response(206)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        ends = time.monotonic() + seconds
        try:
            for index in range(len(body)):
                if time.monotonic() > ends:
                    break
                self.wfile.write(body[index : index + 1])
                time.sleep(interval)
        except OSError:
            pass
        self.close_connection = True

    def _trickle_headers(self) -> None:
        """A 206 whose headers never end: a line a second, so every read gets one before a
        per-read timeout would end it; stops after two minutes, or when the client hangs up."""
        try:
            self.wfile.write(b"HTTP/1.1 206 Partial Content\r\n")
            for number in range(120):
                time.sleep(1)
                self.wfile.write(f"X-Still-Thinking-{number}: yes\r\n".encode())
        except OSError:
            pass
        self.close_connection = True

    def finish(self) -> None:
        try:
            super().finish()
        except (OSError, ValueError):  # the reset connection is gone
            pass


def range_server(folder: Path, faults: dict[str, str] | None = None) -> ThreadingHTTPServer:
    """A running server of ``folder`` on a free loopback port; ``requests`` counts each path's
    requests. Stop it with ``shutdown()`` and ``server_close()``."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _RangeHandler)
    httpd.folder, httpd.faults, httpd.requests, httpd.lock = folder, faults or {}, Counter(), threading.Lock()
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd
