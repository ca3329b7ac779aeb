"""A loopback HTTP server for the fetch cases: it serves a folder by byte range, logs every
request it gets, and misbehaves for the paths given a fault. Its own module rather than the
tests' range server: ``dedup_tests`` is not importable when the matrix runs as
``benchmarks/faults.py``."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

NO_PROXY = ("NO_PROXY", "no_proxy")
TRICKLE_LINES = 120  # a header line a second for two minutes, far past any case's deadline


class _Handler(BaseHTTPRequestHandler):
    """A path's fault: ``"trickle headers"`` (a 206 whose headers never end, a line a second, so
    no per-read timeout ever fires) or ``"redirect <url>"`` (a 302 there); other paths are files
    of the folder, sent by their Range."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass  # the server's log is ``requests``, not stderr

    def do_GET(self) -> None:
        server: MisbehavingServer = self.server
        with server.lock:
            server.requests.append(self.path)
        fault = server.faults.get(self.path, "")
        if fault == "trickle headers":
            self._trickle_headers()
        elif fault.startswith("redirect "):
            self.send_response(302)
            self.send_header("Location", fault.removeprefix("redirect "))
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._send_range(server.folder / self.path.lstrip("/"))

    def _send_range(self, path: Path) -> None:
        if not path.is_file():
            self.send_error(404)
            return
        first, last = (int(n) for n in self.headers["Range"].removeprefix("bytes=").split("-"))
        with path.open("rb") as handle:
            handle.seek(first)
            body = handle.read(last + 1 - first)
        self.send_response(206)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Range", f"bytes {first}-{last}/{path.stat().st_size}")
        self.end_headers()
        self.wfile.write(body)

    def _trickle_headers(self) -> None:
        try:
            self.wfile.write(b"HTTP/1.1 206 Partial Content\r\n")
            for number in range(TRICKLE_LINES):
                time.sleep(1)
                self.wfile.write(f"X-Still-Thinking-{number}: yes\r\n".encode())
        except OSError:  # the client hung up: what a deadline should do
            pass
        self.close_connection = True


class MisbehavingServer(ThreadingHTTPServer):
    daemon_threads = True  # a handler still trickling does not hold the matrix at exit

    def __init__(self, folder: Path, faults: dict[str, str]):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.folder, self.faults = folder, faults
        self.requests: list[str] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextmanager
def serving(folder: Path, faults: dict[str, str] | None = None) -> Iterator[MisbehavingServer]:
    """A server of ``folder`` on a free loopback port, in a thread, for the block; ``faults`` maps
    a request path (``/name``) to its fault, and may be filled once the server's URL is known."""
    server = MisbehavingServer(folder, faults if faults is not None else {})
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


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
