"""Targets input: a CSV or Parquet file naming WARC records by byte range, each record fetched
from ``warc_base_url`` (an http(s) server, :mod:`.http_fetch`, or a local folder), verified, then
read as a local WARC record is (:func:`.warc.record_entry`).

A target row is a document or one reject with its row number: ``invalid_target`` (a missing or
non-integer column, or a filename that could lead outside ``warc_base_url``: a dot segment or a
backslash over HTTP, a path outside the folder), ``fetch_failed`` (a missing file, a redirect
outside ``warc_base_url``, or retries exhausted: the last status or error is in the detail),
``range_not_honored`` (the server sent the whole file), ``length_mismatch``, ``not_one_record``
(the bytes are not one gzip member holding one WARC record), ``uri_mismatch``,
``digest_mismatch``, ``too_large``, then the WARC rules; whatever else goes wrong in a fetch
(an HTTP, OS or value error) is that row's ``fetch_failed``, never the run's crash. Fetches overlap
in a bounded pool of threads; rows come out in the targets file's order, whatever order the
fetches finish in. Each attempt has ``fetch_timeout_s`` in all, headers and body together. A run
that stops (``policy.stop``: SIGINT, SIGTERM) ends its fetches at once and raises
:class:`.RunStopped`: the stream is not whole, so nothing of it is kept. A ``fetch_cache`` folder
keeps every record that passed the checks by (filename, offset, length) with its sha256, so a
re-run fetches none of them again, and an entry whose bytes no longer match is fetched again; a
cache that cannot be read or written is only a miss.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import os
import tempfile
import threading
import zlib
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

import pyarrow as pa

from ..settings.input import FetchSettings, InputPolicy
from ..util.streams import RunStopped
from . import csv, parquet
from .http_fetch import Http, Rejected, Target, Workers, refuse_unacknowledged_terms
from .protocol import BySuffix, InputError, Reject
from .warc import WARC_SCHEMA, Entry, record_entry, records_of

# The record lineage of local WARC input, plus the target's row, before the columns every
# reader ends with.
_LAST = WARC_SCHEMA.get_field_index("replaced_characters")
WARC_RANGES_SCHEMA = pa.schema(
    list(WARC_SCHEMA)[:_LAST] + [pa.field("target_row", pa.int64())] + list(WARC_SCHEMA)[_LAST:]
)
# our name -> the column in the CDX API's scheme and in the columnar index's
_SCHEMES = (
    {"url": "url", "filename": "filename", "offset": "offset", "length": "length", "digest": "digest"},
    {
        "url": "url",
        "filename": "warc_filename",
        "offset": "warc_record_offset",
        "length": "warc_record_length",
        "digest": "content_digest",
    },
)
_LOCATING = ("filename", "offset", "length")
_HEADERS_ROOM = 1 << 20  # WARC and HTTP headers a record may carry beyond max_body_bytes
_AHEAD = 4  # fetches queued per worker, so a slow one does not idle the others
_POLL_S = 0.25  # how often a wait for a fetch looks whether the run is stopping


def _scheme(names: list[str]) -> dict[str, str] | None:
    return next((scheme for scheme in _SCHEMES if all(scheme[key] in names for key in _LOCATING)), None)


def is_targets_file(path: Path, reader, fields: dict | None = None) -> bool:
    """Whether a CSV or Parquet file has a targets file's columns. A file with a ``body`` column
    or a column the ``fields`` mapping names is documents that happen to carry WARC lineage, and
    stays documents. The answer is kept per file version, so a file's
    schema is read once however often its reader is asked for."""
    try:
        stat = path.stat()
    except OSError:
        return False  # not there: check_file says why
    names = _column_names(path, stat.st_mtime_ns, stat.st_size, reader)
    if names is None:
        return False
    if {"body", *(fields or {}).values()} & set(names):
        return False
    return _scheme(list(names)) is not None


@functools.lru_cache(maxsize=1024)
def _column_names(path: Path, mtime_ns: int, size: int, reader) -> tuple[str, ...] | None:
    try:
        return tuple(reader.schema(path).names)
    except (InputError, OSError, pa.ArrowInvalid):
        return None  # not readable as a table at all: check_file says why


def _table_reader(path: Path):
    return parquet.READER if parquet.READER.matches(path) else csv.READER


def _text(value) -> str:
    return "" if value is None else str(value).strip()


def _target(row: int, values: dict, scheme: dict[str, str]) -> Target | tuple[str, str, str]:
    """The target of one row, or why it cannot be one (as a reject entry)."""
    numbers = {}
    for key in ("offset", "length"):
        text = _text(values.get(scheme[key]))
        # isascii: "²".isdigit() is True, but int() refuses it
        if not (text.isascii() and text.isdigit()) or (key == "length" and int(text) == 0):
            return "", "invalid_target", (
                f"column {scheme[key]} is {text or '(empty)'!r}, not a "
                f"{'positive' if key == 'length' else 'non-negative'} whole number of bytes; fix the row"
            )
        numbers[key] = int(text)
    filename = _text(values.get(scheme["filename"]))
    if not filename:
        return "", "invalid_target", f"column {scheme['filename']} is empty; give the WARC file's path"
    url, digest = _text(values.get(scheme["url"])), _text(values.get(scheme["digest"]))
    return Target(row, url, filename, numbers["offset"], numbers["length"], digest)


def _targets(path: Path, batch_size: int, policy: InputPolicy, reject: Reject) -> Iterator[Target | tuple]:
    """Every row of the targets file in order: a Target, or (row, doc_id, reason, detail)."""
    reader = _table_reader(path)
    scheme = _scheme(reader.schema(path).names)
    if scheme is None:
        wanted = " or ".join(", ".join(scheme[key] for key in _LOCATING) for scheme in _SCHEMES)
        raise InputError(f"{path}: a targets file needs the columns {wanted}. Add them, or set source_format.")
    row = 0
    for batch in reader.batches(path, batch_size, policy, reject):
        for values in batch.to_pylist():
            row = values.get("input_row") or row + 1  # the CSV reader numbers rows past its rejects
            found = _target(row, values, scheme)
            yield found if isinstance(found, Target) else (row, *found)


def _digest_value(digest: str) -> str:
    """A sha1 digest as Common Crawl writes it (base32, no prefix), from that, ``sha1:`` plus
    that, or hex."""
    value = digest.strip()
    value = value[5:] if value[:5].lower() == "sha1:" else value
    if len(value) == 40:
        try:
            return base64.b32encode(bytes.fromhex(value)).decode("ascii")
        except ValueError:
            pass
    return value.upper()


class _Folder:
    errors = ()  # a read raises OSError alone

    def __init__(self, folder: Path):
        self.folder = folder.expanduser().resolve()

    def close(self) -> None:
        pass

    def get(self, target: Target) -> bytes:
        try:
            path = (self.folder / target.filename).resolve()
            if not path.is_relative_to(self.folder):
                raise Rejected(
                    "invalid_target",
                    f"{target.where()}: the filename leads outside warc_base_url ({self.folder}); "
                    "give a path inside that folder",
                )
            with path.open("rb") as handle:
                handle.seek(target.offset)
                return handle.read(target.length)
        except (OSError, ValueError, OverflowError) as error:  # ValueError: a NUL in the name
            detail = getattr(error, "strerror", None) or str(error)
            raise Rejected(
                "fetch_failed", f"{target.where()}: {detail}; check warc_base_url and the filename"
            ) from None


def _source(base_url: str, fetch: FetchSettings, stop: threading.Event) -> Http | _Folder:
    scheme = urlsplit(base_url).scheme.lower()
    if scheme in ("http", "https"):
        return Http(base_url, fetch, stop)
    if scheme == "file":
        return _Folder(Path(url2pathname(urlsplit(base_url).path)))
    if len(scheme) > 1:  # a one-letter scheme is a Windows drive
        raise InputError(f"warc_base_url {base_url!r}: use an http(s):// URL, a file:// URL or a folder path")
    return _Folder(Path(base_url))


class _Cache:
    """Fetched records by (filename, offset, length), each beside its sha256."""

    def __init__(self, folder: Path):
        self.folder = folder

    def _path(self, target: Target) -> Path:
        key = hashlib.sha256(f"{target.filename}\0{target.offset}\0{target.length}".encode()).hexdigest()
        return self.folder / key[:2] / key

    def get(self, target: Target) -> bytes | None:
        """The entry's bytes; None when there is none, it is damaged, or it cannot be read (the
        record is then fetched)."""
        path = self._path(target)
        try:
            data, digest = path.read_bytes(), path.with_suffix(".sha256").read_text().strip()
        except (OSError, UnicodeDecodeError):
            return None
        return data if hashlib.sha256(data).hexdigest() == digest else None  # damaged: fetch again

    def put(self, target: Target, data: bytes) -> None:
        """Keep the record, if the folder takes it: a cache that cannot be written (read-only, full,
        not a folder) only means the next run fetches it again."""
        path = self._path(target)
        temporary = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # the bytes before their digest, each renamed into place: a run stopped between the two
            # leaves an entry that does not check out, which is fetched again
            for final, content in ((path, data), (path.with_suffix(".sha256"), hashlib.sha256(data).hexdigest().encode())):
                with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as handle:
                    temporary = handle.name
                    handle.write(content)
                os.replace(temporary, final)
                temporary = None
        except OSError:
            if temporary is not None:
                Path(temporary).unlink(missing_ok=True)


def _fetched(source, target: Target) -> bytes:
    """The target's bytes, exactly ``length`` of them (raises Rejected)."""
    data = source.get(target)
    if len(data) != target.length:
        more = "more than" if len(data) > target.length else f"{len(data):,} bytes, not"
        raise Rejected(
            "length_mismatch",
            f"{target.where()}: got {more} the {target.length:,} bytes the target names; "
            "check the offset and length, or the server",
        )
    return data


def _one_member(target: Target, data: bytes, max_body_bytes: int) -> bytes:
    inflater = zlib.decompressobj(wbits=31)
    try:
        raw = inflater.decompress(data, max_body_bytes + _HEADERS_ROOM)
    except zlib.error as error:
        raise Rejected("not_one_record", f"{target.where()} is not a gzip member ({error}); check the offset") from None
    if inflater.unconsumed_tail:
        raise Rejected("too_large", f"{target.where()}: the record is above max_body_bytes={max_body_bytes:,}")
    if not inflater.eof:
        raise Rejected("not_one_record", f"{target.where()} ends inside its gzip member; check the length")
    if inflater.unused_data:
        raise Rejected("not_one_record", f"{target.where()} holds more than one gzip member; check the length")
    return raw


def _checked(target: Target, record) -> None:
    uri = record.rec_headers.get_header("WARC-Target-URI") or ""
    if target.url and uri != target.url:
        raise Rejected(
            "uri_mismatch",
            f"{target.where()} holds a record of {uri or '(no WARC-Target-URI)'}, not {target.url}; "
            "check the offset, or the url",
        )
    declared = record.rec_headers.get_header("WARC-Payload-Digest") or ""
    if target.digest and _digest_value(declared) != _digest_value(target.digest):
        raise Rejected(
            "digest_mismatch",
            f"{target.where()}: the record's WARC-Payload-Digest is {declared or '(none)'}, the target's "
            f"digest {target.digest}; the record is not the one the index saw",
        )


def _entry(target: Target, data: bytes, max_body_bytes: int) -> Entry:
    raw = _one_member(target, data, max_body_bytes)
    records = records_of(io.BytesIO(raw))
    try:
        record = next(records, None)
        if record is None:
            raise Rejected("not_one_record", f"{target.where()} holds no WARC record")
        _checked(target, record)
        payload = record.content_stream().read(max_body_bytes + 1)
        records.read_to_end(record)
        entry = record_entry(target.filename, record, payload, target.offset, target.length, max_body_bytes, True)
        if next(records, None) is not None:
            raise Rejected("not_one_record", f"{target.where()} holds more than one WARC record; check the length")
    except Rejected:
        raise
    except Exception as error:  # warcio and the HTML parser raise many types for a damaged record
        detail = " ".join(str(error).split()) or type(error).__name__
        raise Rejected("decode_error", f"{target.where()}: cannot read the WARC record ({detail})") from None
    if isinstance(entry, dict):
        entry["target_row"] = target.row
    return entry


def _outcome(source, cache: _Cache | None, target: Target, max_body_bytes: int) -> Entry:
    """The target's entry, or its reject: whatever goes wrong in a fetch is the row's, never the run's.
    ``source.errors``: what its fetches raise beside these (httpx's, named by the source that loads
    it, so a run of local files never does)."""
    try:
        if target.length > max_body_bytes + _HEADERS_ROOM:
            raise Rejected(
                "too_large",
                f"{target.where()}: {target.length:,} bytes is above max_body_bytes={max_body_bytes:,} "
                "plus room for headers; nothing was fetched. Raise max_body_bytes, or check the length",
            )
        cached = cache.get(target) if cache else None
        data = _fetched(source, target) if cached is None else cached
        entry = _entry(target, data, max_body_bytes)
        if cache and cached is None:
            cache.put(target, data)  # only a record that passed the checks: a bad mirror leaves nothing
        return entry
    except Rejected as rejected:
        return "", rejected.reason, rejected.detail
    except (*source.errors, OSError, ValueError, OverflowError) as error:
        detail = " ".join(str(error).split()) or "no detail"
        return "", "fetch_failed", (
            f"{target.where()}: {type(error).__name__}: {detail}; check warc_base_url, the filename and the server"
        )


def _result(outcome: Future, path: Path, row: int, run_stop: threading.Event | None) -> Entry:
    """A fetch's entry or reject. The run's interrupt reaches only the main thread, and this may
    wait in another (DuckDB's, reading the stream): ``run_stop`` says the run is stopping."""
    while True:
        try:
            return outcome.result(timeout=_POLL_S)
        except FutureTimeout:
            if run_stop is not None and run_stop.is_set():
                raise RunStopped(f"{path}: the run stopped while row {row} was fetched") from None


class WarcRangesReader(BySuffix):
    name = "warc_ranges"
    label = "WARC targets"
    suffixes = ()  # a targets file is a CSV or Parquet file, told apart by its columns
    columns_from_file = False
    appended_columns = ()

    def schema(self, path: Path) -> pa.Schema:
        return WARC_RANGES_SCHEMA

    def batches(
        self, path: Path, batch_size: int, policy: InputPolicy, reject: Reject
    ) -> Iterator[pa.RecordBatch]:
        fetch = policy.fetch
        refuse_unacknowledged_terms(fetch.base_url, fetch.acknowledge_common_crawl_terms)
        stop = threading.Event()  # set when the reading ends: sleeping retries end, none start
        source = _source(fetch.base_url, fetch, stop)
        cache = _Cache(Path(fetch.cache).expanduser()) if fetch.cache and isinstance(source, Http) else None
        pool = Workers(fetch.concurrency, "warc-fetch")
        pending: deque[tuple[int, Future | tuple]] = deque()
        rows: list[dict] = []
        try:
            targets = _targets(path, batch_size, policy, reject)
            while True:
                while len(pending) < fetch.concurrency * _AHEAD and (target := next(targets, None)) is not None:
                    if isinstance(target, Target):
                        future = pool.submit(_outcome, source, cache, target, policy.max_body_bytes)
                        pending.append((target.row, future))
                    else:
                        pending.append((target[0], target[1:]))
                if not pending:
                    break
                row, outcome = pending[0]
                entry = _result(outcome, path, row, policy.stop) if isinstance(outcome, Future) else outcome
                pending.popleft()
                if not isinstance(entry, dict):
                    reject(row, *entry)
                    continue
                entry["input_row"] = row
                rows.append(entry)
                if len(rows) >= batch_size:
                    yield pa.RecordBatch.from_pylist(rows, schema=WARC_RANGES_SCHEMA)
                    rows = []
            if rows:
                yield pa.RecordBatch.from_pylist(rows, schema=WARC_RANGES_SCHEMA)
        finally:
            for _, outcome in pending:
                if isinstance(outcome, Future):
                    outcome.cancel()  # those still queued are never started
            pool.shutdown()
            source.close()  # ends the fetches under way; none is waited for

    def count(self, path: Path) -> int:
        """The targets file's rows, as its own reader counts them."""
        return _table_reader(path).count(path)


READER = WarcRangesReader()
