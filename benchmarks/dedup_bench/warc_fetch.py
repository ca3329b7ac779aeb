"""WARC records fetched by byte range from a loopback server: records per second through the
targets reader (fetch, verify, extract), the same records read from a local folder with seek,
and the whole library pipeline's documents per second with fetching in the loop.

    .venv/bin/python benchmarks/benchmark.py --warc-fetch 10000

The WARC files (warcio-written, 1,000 records each, pages of seeded random words) and their
targets file are made once under ``--workdir``. The server (``range_server``, which the tests'
misbehaving one in ``dedup_tests/loopback_warcs.py`` extends) runs in its own process, so it does
not share the reader's interpreter lock.
"""

from __future__ import annotations

import multiprocessing
import random
import signal
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import BytesIO
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.read import InputStats, document_batches
from dedup_assets.core.settings.model import Settings

from .common import progress

PER_FILE = 1_000
WORDS = [f"w{number}" for number in range(5_000)]


def page(title: str, article: str, boilerplate: str = "") -> bytes:
    return (
        f"<html><head><title>{title}</title></head><body><nav>{boilerplate}</nav>"
        f"<article><h1>{title}</h1><p>{article}</p></article>"
        f"<footer>{boilerplate}</footer></body></html>"
    ).encode("utf-8")


class RangeHandler(BaseHTTPRequestHandler):
    """Serves the server's folder, honouring ``Range: bytes=first-last``."""

    protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
    disable_nagle_algorithm = True  # else the body waits for the headers' delayed ACK (40 ms)

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        path = self.server.folder / self.path.lstrip("/")
        if not path.is_file():
            self.send_error(404)
            return
        first, last = (int(part) for part in self.headers["Range"].removeprefix("bytes=").split("-"))
        self.send_range(path, first, last)

    def send_range(self, path: Path, first: int, last: int) -> None:
        with path.open("rb") as handle:
            handle.seek(first)
            body = handle.read(last + 1 - first)
        self.send_body(206, body, f"bytes {first}-{last}/{path.stat().st_size}")

    def send_body(self, status: int, body: bytes, content_range: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        if content_range:
            self.send_header("Content-Range", content_range)
        self.end_headers()
        self.wfile.write(body)


def range_server(folder: Path, handler: type[RangeHandler] = RangeHandler, **state) -> ThreadingHTTPServer:
    """A running server of ``folder`` on a free loopback port (its address in ``url``), with
    ``state`` as attributes for ``handler``. Stop it with ``shutdown()`` and ``server_close()``."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True  # a handler still sending does not hold the process at exit
    httpd.folder, httpd.url = folder, f"http://127.0.0.1:{httpd.server_address[1]}"
    for name, value in state.items():
        setattr(httpd, name, value)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def _write(folder: Path, records: int, record_kb: int) -> Path:
    """The WARC files and their targets file (CDX API columns), once."""
    targets = folder / "targets.csv"
    if targets.exists():
        return targets
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    lines = ["url,filename,offset,length"]
    for start in range(0, records, PER_FILE):
        name = f"part-{start // PER_FILE:03d}.warc.gz"
        with (folder / name).open("wb") as stream:
            writer = WARCWriter(stream, gzip=True)
            for number in range(start, min(start + PER_FILE, records)):
                words = " ".join(rng.choices(WORDS, k=record_kb * 1024 // 6))
                headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
                writer.write_record(writer.create_warc_record(
                    f"https://bench.example.com/{number}", "response",
                    payload=BytesIO(page(f"Page {number}", words)), http_headers=headers,
                    warc_headers_dict={"WARC-Date": "2026-03-01T00:00:00Z"},
                ))
        with (folder / name).open("rb") as stream:
            iterator = ArchiveIterator(stream)
            for record in iterator:
                record.content_stream().read()
                uri = record.rec_headers.get_header("WARC-Target-URI")
                lines.append(f"{uri},{name},{iterator.get_record_offset()},{iterator.get_record_length()}")
    targets.write_text("\n".join(lines) + "\n")
    return targets


def _serve(folder: Path, ports) -> None:
    # a forked child keeps its parent's SIGTERM handler (Ray, once imported, installs one that does
    # not exit), and terminate() would then leave it serving and the parent waiting for it at exit
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    ports.put(range_server(folder).server_address[1])
    while True:
        time.sleep(3600)


def _read(targets: Path, settings: Settings) -> tuple[float, int]:
    stats = InputStats()
    started = time.perf_counter()
    documents = sum(batch.num_rows for batch in document_batches(targets, stats, 4096, settings.input_policy()))
    return time.perf_counter() - started, documents


def measure_warc_fetch(workdir: Path, records: int, record_kb: int = 20, concurrency: int = 8) -> dict:
    """The three figures (records per second, whole-pipeline documents per second) and the
    report's lines."""
    folder = workdir.resolve() / f"warc-fetch-{records}-{record_kb}kb"
    progress(f"writing {records:,} WARC records into {folder} (once)")
    targets = _write(folder, records, record_kb)
    ports = multiprocessing.Queue()
    server = multiprocessing.Process(target=_serve, args=(folder, ports), daemon=True)
    server.start()
    figures: dict = {"records": records, "record_kb": record_kb, "concurrency": concurrency}
    try:
        http = Settings(warc_base_url=f"http://127.0.0.1:{ports.get(timeout=30)}/", fetch_concurrency=concurrency)
        local = Settings(warc_base_url=str(folder))
        size_mb = sum(p.stat().st_size for p in folder.glob("*.warc.gz")) / 2**20
        lines = [f"{records:,} records of about {record_kb} KB (HTML), {size_mb:,.1f} MB compressed"]
        for label, settings in (("loopback HTTP", http), ("local folder", local)):
            progress(f"targets reader, {label}")
            seconds, documents = _read(targets, settings)
            figures[f"{label} records_per_s"] = documents / seconds
            lines.append(f"targets reader, {label}: {documents:,} documents in {seconds:.2f} s = {documents / seconds:,.0f} records/s")
        progress("whole pipeline (library) with fetching")
        with tempfile.TemporaryDirectory() as scratch:
            started = time.perf_counter()
            result = run_library(str(targets), str(Path(scratch) / "db.duckdb"), None, http)
            seconds = time.perf_counter() - started
        stages = ", ".join(f"{name} {value:.2f} s" for name, value in result["stages"].items())
        figures["pipeline documents_per_s"] = result["documents"] / seconds
        lines.append(
            f"whole pipeline (library) with fetching: {result['documents'] / seconds:,.0f} documents/s ({seconds:.2f} s: {stages})"
        )
    finally:
        server.terminate()
        server.join(10)
        if server.is_alive():
            server.kill()
            server.join()
    return {**figures, "title": "dedup-assets benchmark: WARC records by byte range", "lines": lines, "ok": True}
