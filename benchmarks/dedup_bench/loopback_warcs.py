"""WARC pages and a loopback HTTP server that serves files by byte range, misbehaving where asked:
what the tests, the fault matrix and the fetch benchmark share, so each starts the same server."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

NO_PROXY = ("NO_PROXY", "no_proxy")


def page(title: str, article: str, boilerplate: str = "") -> bytes:
    return (
        f"<html><head><title>{title}</title></head><body><nav>{boilerplate}</nav>"
        f"<article><h1>{title}</h1><p>{article}</p></article>"
        f"<footer>{boilerplate}</footer></body></html>"
    ).encode("utf-8")


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
    """A running server of ``folder`` on a free loopback port (its address in ``url``);
    ``faults`` maps a path (``name`` or ``sub/name``, as requested) to its fault, and may be filled
    once the url is known; ``requests`` counts each path's requests. Stop it with ``shutdown()``
    and ``server_close()``."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _RangeHandler)
    httpd.daemon_threads = True  # a handler still trickling does not hold the process at exit
    httpd.folder, httpd.faults, httpd.requests, httpd.lock = folder, {} if faults is None else faults, Counter(), threading.Lock()
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


@contextmanager
def serving(folder: Path, faults: dict[str, str] | None = None) -> Iterator[ThreadingHTTPServer]:
    """:func:`range_server` for the block."""
    server = range_server(folder, faults)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def reached_directly() -> Iterator[None]:
    """No proxy between the fetches (ours, and a CLI child's, which inherits the environment) and
    the loopback servers, whatever the caller's environment names, for the block."""
    saved = {name: os.environ.get(name) for name in NO_PROXY}
    os.environ.update(dict.fromkeys(NO_PROXY, "127.0.0.1,localhost"))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name)
            else:
                os.environ[name] = value
