"""Fetching a targets file's records over HTTP(S): a ``Range`` request per record, retried
(:class:`Backoff`), each attempt ending by its deadline, no request leaving ``warc_base_url``,
and a stopping run waiting on no request.

- **One deadline per attempt**: connecting, redirects, headers and body together get
  ``fetch_timeout_s``. httpx's timeouts are per read, so a server sending a header line a second
  never trips them; a watchdog thread shuts down the socket of an attempt past its deadline,
  which ends the read blocked on it. Each worker thread has its own client of one connection, so
  the socket an attempt uses is the last one its client opened (httpx's ``trace`` extension
  names it).
- **A stopping run**: every socket is shut down, and the workers are daemon threads, so one
  stuck where no socket can be shut (a DNS lookup) holds neither the run nor the process's exit.
- **Under the base**: a filename with a dot segment (``.``, ``..``, percent-encoded or not) or a
  backslash is refused before any request (``invalid_target``); a redirect is followed only
  within the base's scheme, host and port, under its path (else ``fetch_failed``).
"""

from __future__ import annotations

import queue
import random
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from ..settings.input import COMMON_CRAWL_TERMS, FetchSettings
from .protocol import InputError

if TYPE_CHECKING:  # imported where a request is made: a run of local files never loads httpx
    import httpx

# Common Crawl's bucket, virtual-hosted (commoncrawl.s3[.region].amazonaws.com) or path-style
# (s3[.region].amazonaws.com/commoncrawl)
_CC_BUCKET_HOST = re.compile(r"commoncrawl\.s3(?:[.-][a-z0-9-]+)*\.amazonaws\.com")
_S3_HOST = re.compile(r"s3(?:[.-][a-z0-9-]+)*\.amazonaws\.com")
_MAX_BACKOFF_S = 30.0
_WATCH_S = 0.1  # how often the watchdog looks for attempts past their deadline
# the trace events of a connection being opened (plain, then again when TLS wraps it)
_OPENED = (".connect_tcp.complete", ".start_tls.complete")


@dataclass(frozen=True)
class Target:
    row: int
    url: str
    filename: str
    offset: int
    length: int
    digest: str

    def span(self) -> str:
        return f"bytes {self.offset}-{self.offset + self.length - 1}"

    def where(self) -> str:
        return f"{self.filename} {self.span()}"


class Rejected(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


class _Retry(Exception):
    """A transient answer (429 or 5xx), or an attempt past its deadline: worth asking again."""


class _Outside(Exception):
    """A request (a redirect's) the client was about to send outside the base: its URL."""


_ACKNOWLEDGE = "set warc_base_url to a mirror or a local folder, or acknowledge_common_crawl_terms to true"


def is_common_crawl(url: str) -> bool:
    """Whether ``url`` is on Common Crawl's own servers: commoncrawl.org or a host under it, or its
    S3 bucket in any of the bucket's spellings."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower().rstrip(".")
    if host == "commoncrawl.org" or host.endswith(".commoncrawl.org") or _CC_BUCKET_HOST.fullmatch(host):
        return True
    bucket = unquote(parts.path).lstrip("/").split("/", 1)[0].lower()
    return bool(_S3_HOST.fullmatch(host)) and bucket == "commoncrawl"


def refuse_unacknowledged_terms(url: str, acknowledged: bool, what: str = "warc_base_url", how: str = _ACKNOWLEDGE) -> None:
    """Common Crawl's own servers serve its data only under its terms: refuse, before any request,
    unless the user says they accept them."""
    if not acknowledged and is_common_crawl(url):
        raise InputError(
            f"{what} is Common Crawl's own endpoint ({url}), whose data may be used only under its "
            f"terms of use: {COMMON_CRAWL_TERMS}. Read them, then {how}. Nothing was fetched.",
            fix={"acknowledge_common_crawl_terms": True},  # written for the run's command by the launch layer
        )


def transient(status: int) -> bool:
    """An HTTP answer worth asking again after a wait: 429 or 5xx."""
    return status == 429 or status >= 500


@dataclass(frozen=True)
class Backoff:
    """The retry policy of every fetch: ``retries`` more attempts after the first, each after an
    exponential wait with jitter (from ``base_s``, at most 30 s) that ``stop`` cuts short."""

    retries: int
    base_s: float
    stop: threading.Event

    def attempts(self) -> Iterator[int]:
        """Attempt numbers from 0, until ``retries`` are used up or ``stop`` is set."""
        for attempt in range(self.retries + 1):
            if attempt:
                # jitter, so parallel fetches that failed together spread out
                ceiling = min(_MAX_BACKOFF_S, self.base_s * 2 ** (attempt - 1))
                self.stop.wait(ceiling / 2 + random.uniform(0, ceiling / 2))
            if self.stop.is_set():
                return
            yield attempt


def has_dot_segment(path: str) -> bool:
    """Whether ``path`` has a ``.`` or ``..`` segment or a backslash (which some servers take for
    a slash), as written or once percent-decoded, however often (a server may decode twice)."""
    while True:
        if "\\" in path or any(part in (".", "..") for part in path.split("/")):
            return True
        decoded = unquote(path)
        if decoded == path:
            return False
        path = decoded  # shorter each time: the loop ends


class Workers:
    """``count`` daemon threads running what is submitted, in order. A stop waits for none of
    them: one stuck where no socket can be shut cannot hold the run, nor the process at exit (a
    ThreadPoolExecutor's threads are joined then)."""

    def __init__(self, count: int, name: str):
        self._calls: queue.SimpleQueue = queue.SimpleQueue()
        self._count = count
        for number in range(count):
            threading.Thread(target=self._work, name=f"{name}-{number}", daemon=True).start()

    def submit(self, call: Callable, *args) -> Future:
        future: Future = Future()
        self._calls.put((future, call, args))
        return future

    def _work(self) -> None:
        while (item := self._calls.get()) is not None:
            future, call, args = item
            if future.set_running_or_notify_cancel():  # False: cancelled while queued
                try:
                    future.set_result(call(*args))
                except BaseException as error:
                    future.set_exception(error)

    def shutdown(self) -> None:
        """Each thread ends after the call in hand, if any: none is waited for."""
        for _ in range(self._count):
            self._calls.put(None)


class _Line:
    """One worker's client, of one connection, and the deadline of the attempt it is making."""

    def __init__(self, client: httpx.Client):
        self.client = client
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._deadline: float | None = None  # while an attempt runs
        self.expired = False  # whether the watchdog cut the last attempt short

    def trace(self, event: str, info: dict) -> None:
        if event.endswith(_OPENED):
            with self._lock:
                self._socket = info["return_value"].get_extra_info("socket")

    def start(self, timeout_s: float) -> None:
        with self._lock:
            self._deadline, self.expired = time.monotonic() + timeout_s, False

    def end(self) -> None:
        with self._lock:
            self._deadline = None

    def cut(self, now: float | None = None) -> None:
        """Shut down the socket of an attempt past its deadline at ``now`` (of any attempt, without
        ``now``). Until the attempt ends this is done again each time, for a connection still
        being opened when the deadline passed."""
        with self._lock:
            if self._deadline is None or (now is not None and now < self._deadline):
                return
            self.expired = True
            if self._socket is not None:
                try:
                    # socket.socket's own: an SSLSocket's would also drop its TLS state, which the
                    # reading thread is using
                    socket.socket.shutdown(self._socket, socket.SHUT_RDWR)
                except OSError:  # closed already
                    pass


class Http:
    """Records from an http(s) ``base_url``, fetched from any of the worker threads."""

    def __init__(self, base_url: str, fetch: FetchSettings, stop: threading.Event):
        import httpx

        self.errors = (httpx.HTTPError,)  # what a fetch may raise beside OSError, for its row's reject
        self.base_url = base_url.rstrip("/") + "/"
        base = httpx.URL(self.base_url)
        self._origin, self._base_path = (base.scheme, base.host, base.port), base.path
        self.backoff = Backoff(fetch.retries, fetch.backoff_s, stop)
        self.timeout_s = fetch.timeout_s
        # a redirect to Common Crawl's own servers needs the terms acknowledged as much as a
        # warc_base_url there does; checked first, so that is what the reject says
        self._hooks = [] if fetch.acknowledge_common_crawl_terms else [_refuse_common_crawl]
        self._hooks.append(self._refuse_outside_base)
        self._stop = stop
        self._local = threading.local()
        self._lock = threading.Lock()
        self._lines: list[_Line] = []
        threading.Thread(target=self._watch, name="warc-fetch-watchdog", daemon=True).start()

    def _line(self) -> _Line:
        line = getattr(self._local, "line", None)
        if line is None:
            import httpx

            client = httpx.Client(
                timeout=self.timeout_s,
                limits=httpx.Limits(max_connections=1),
                follow_redirects=True,
                event_hooks={"request": self._hooks},
            )
            line = self._local.line = _Line(client)
            with self._lock:
                self._lines.append(line)
        return line

    def _watch(self) -> None:
        while not self._stop.wait(_WATCH_S):
            now = time.monotonic()
            with self._lock:
                lines = list(self._lines)
            for line in lines:
                line.cut(now)

    def close(self) -> None:
        """End every attempt now (the run is stopping, or done) and close the clients."""
        self._stop.set()
        with self._lock:
            lines = list(self._lines)
        for line in lines:
            line.cut()
            line.client.close()

    def _refuse_outside_base(self, request: httpx.Request) -> None:
        url = request.url
        under = url.path.startswith(self._base_path) and not has_dot_segment(url.path)
        if (url.scheme, url.host, url.port) != self._origin or not under:
            raise _Outside(str(url))

    def get(self, target: Target) -> bytes:
        import httpx

        filename = target.filename.lstrip("/")
        if has_dot_segment(filename):
            raise Rejected(
                "invalid_target",
                f"{target.where()}: the filename has a dot segment or a backslash, which could lead "
                f"outside warc_base_url ({self.base_url}); give the path under it",
            )
        url = self.base_url + filename
        last, tried = "not tried: the run is stopping", 0
        overdue = f"the attempt took over fetch_timeout_s={self.timeout_s:g} s (connecting, headers and body together)"
        for tried in self.backoff.attempts():
            line = self._line()
            line.start(self.timeout_s)
            try:
                data = self._once(line, url, target)
                if not line.expired:
                    return data
                last = overdue  # cut short where the answer may look whole: its end was not seen
            except _Retry as error:
                last = str(error)
            except httpx.TransportError as error:  # connection errors, timeouts, a cut socket
                last = overdue if line.expired else f"{type(error).__name__}: {error or 'no detail'}"
            except httpx.InvalidURL as error:
                raise Rejected("invalid_target", f"{url}: not a URL ({error}); fix the filename") from None
            except _Outside as outside:
                raise Rejected(
                    "fetch_failed",
                    f"{url} {target.span()}: redirected outside warc_base_url ({self.base_url}) to {outside}; "
                    "only redirects within it are followed: set warc_base_url to where the server sends you",
                ) from None
            finally:
                line.end()
        raise Rejected(
            "fetch_failed",
            f"{url} {target.span()}: gave up after {tried + 1} attempts, the last: {last}; "
            "check the server, or raise fetch_retries or fetch_timeout_s",
        )

    def _once(self, line: _Line, url: str, target: Target) -> bytes:
        end = target.offset + target.length - 1
        # identity: the bytes on disk are the gzip member, which must not be decoded on the way
        headers = {"Range": f"bytes={target.offset}-{end}", "Accept-Encoding": "identity"}
        with line.client.stream("GET", url, headers=headers, extensions={"trace": line.trace}) as response:
            status = response.status_code
            if transient(status):
                raise _Retry(f"HTTP {status}")
            if status == 200:
                raise Rejected(
                    "range_not_honored",
                    f"{url} answered 200 with the whole file ({response.headers.get('content-length', 'unknown')} "
                    f"bytes) instead of 206 with {target.span()}; use a server that honours Range",
                )
            if status != 206:
                raise Rejected("fetch_failed", f"{url} {target.span()}: HTTP {status}; check warc_base_url and the filename")
            content_range = response.headers.get("content-range")
            if content_range is not None and not content_range.startswith(f"bytes {target.offset}-{end}/"):
                raise Rejected(
                    "length_mismatch",
                    f"{url} answered {content_range!r} for {target.span()}; use a server that honours Range",
                )
            body = bytearray()
            for chunk in response.iter_raw():
                body += chunk
                if len(body) > target.length:
                    break  # one byte over is enough to know
            return bytes(body)


def _refuse_common_crawl(request: httpx.Request) -> None:
    try:
        refuse_unacknowledged_terms(str(request.url), False, "the target of a redirect")
    except InputError as error:
        raise Rejected("fetch_failed", str(error)) from None
