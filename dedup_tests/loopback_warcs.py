"""The tests' and the fault matrix's loopback WARC server: the fetch benchmark's Range server
(``dedup_bench.warc_fetch``), misbehaving where asked, and counting every path's requests."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path

from dedup_bench.warc_fetch import RangeHandler, page
from dedup_bench.warc_fetch import range_server as plain_server

NO_PROXY = ("NO_PROXY", "no_proxy")
__all__ = ["page", "range_server", "reached_directly", "serving"]


class _FaultyHandler(RangeHandler):
    """The benchmark's Range handler, but a file named in ``faults`` misbehaves: "reset" (the
    connection is reset), "503 twice" (then answers), "503" (always), "slow 404" (after 0.3 s),
    "ignores range" (200, the whole file), "truncated" (206 with 100 bytes too few), "wrong range"
    (206 with as many bytes, from one byte on), "trickle" (a byte every 50 ms, for 5 s) or
    "trickle <seconds>" (the body spread over that long), "trickle headers" (a header line a
    second, for two minutes), "redirect loop" (302 to itself), or "redirect <url>" (302 there)."""

    def do_GET(self) -> None:
        server = self.server
        name = self.path.lstrip("/")
        with server.lock:
            server.requests[name] += 1
            seen = server.requests[name]
        fault = self.fault = server.faults.get(name)
        if fault == "reset":
            # linger 0: closing sends a TCP reset instead of an orderly end
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
        elif fault == "503" or (fault == "503 twice" and seen <= 2):
            self.send_error(503)
        elif fault == "slow 404":
            time.sleep(0.3)
            self.send_error(404)
        elif fault == "trickle headers":
            self._trickle_headers()
        elif fault and fault.startswith("redirect"):
            location = self.path if fault == "redirect loop" else fault.removeprefix("redirect ")
            self.send_response(302)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            super().do_GET()

    def send_range(self, path: Path, first: int, last: int) -> None:
        fault = self.fault
        if fault == "ignores range":
            self.send_body(200, path.read_bytes())
        elif fault and fault.startswith("trickle"):
            body = path.read_bytes()[first : last + 1]
            seconds = fault.removeprefix("trickle")
            self._trickle(body, float(seconds), float(seconds) / len(body)) if seconds else self._trickle(body, 5, 0.05)
        elif fault == "wrong range":
            super().send_range(path, first + 1, last + 1)
        else:
            super().send_range(path, first, last)

    def send_body(self, status: int, body: bytes, content_range: str | None = None) -> None:
        super().send_body(status, body[:-100] if self.fault == "truncated" else body, content_range)

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
    faults = {} if faults is None else faults
    return plain_server(folder, _FaultyHandler, faults=faults, requests=Counter(), lock=threading.Lock())


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
