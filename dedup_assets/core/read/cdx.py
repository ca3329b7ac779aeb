"""A targets file from a CDX API (pywb's, as Common Crawl's index server runs it): the captures
of URL patterns in one crawl, kept to HTML pages answered with 200, written as the CSV that
``source_format: "warc_ranges"`` reads.

The server answers JSON lines, one capture each, in pages: ``showNumPages`` says how many; every
page is asked for in turn, so the file lists the captures in the server's order. A 429 or 5xx
answer, a connection error or a timeout is retried as a record fetch is (:class:`.Backoff`). The
file is written only once every capture checked out, and replaced whole.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
import threading
from pathlib import Path

import httpx

from ..storage.places import said_of_the_place
from .protocol import InputError
from .http_fetch import Backoff, transient
from ..settings.input import FetchSettings

TARGET_COLUMNS = ("url", "filename", "offset", "length", "digest", "timestamp", "mime", "status")
# pywb filters: "=" is an exact match of the field
_FILTERS = ("=status:200", "=mime:text/html")
_LOCATING = ("filename", "offset", "length")


def _get(client: httpx.Client, endpoint: str, params: list[tuple[str, str]], backoff: Backoff) -> httpx.Response | None:
    """The server's answer, or None for "no captures" (pywb answers 404)."""
    last = ""
    for _ in backoff.attempts():
        try:
            response = client.get(endpoint, params=params)
        except httpx.TransportError as error:  # connection errors and timeouts
            last = f"{type(error).__name__}: {error or 'no detail'}"
            continue
        except httpx.HTTPError as error:
            raise InputError(f"{endpoint}: cannot be reached ({error}); check cdx_api_url and the network") from None
        if transient(response.status_code):
            last = f"HTTP {response.status_code}"
            continue
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise InputError(
                f"{endpoint}: answered HTTP {response.status_code} ({response.text[:200].strip()}); "
                "check the crawl id (such as CC-MAIN-2024-10) and the pattern"
            )
        return response
    raise InputError(
        f"{endpoint}: gave up after {backoff.retries + 1} attempts, the last: {last}; "
        "check cdx_api_url and the network, or try again later"
    )


def _json(text: str, where: str) -> object:
    try:
        return json.loads(text)
    except ValueError as error:
        raise InputError(
            f"{where} is not JSON ({error}): {text[:200]!r}; check that --cdx-api-url is a CDX API "
            "(pywb, such as Common Crawl's index server)"
        ) from None


def _captures(client: httpx.Client, endpoint: str, pattern: str, backoff: Backoff) -> list[dict]:
    query = [("url", pattern), ("output", "json"), *(("filter", rule) for rule in _FILTERS)]
    pages = _get(client, endpoint, [*query, ("showNumPages", "true")], backoff)
    count = 0
    if pages is not None:
        where = f"{endpoint}: the page count of {pattern}"
        answer = _json(pages.text, where)
        count = answer.get("pages", 1) if isinstance(answer, dict) else None
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise InputError(f"{where} is {pages.text[:200]!r}, not {{\"pages\": N}}; check --cdx-api-url")
    captures = []
    for page in range(count):
        response = _get(client, endpoint, [*query, ("page", str(page))], backoff)
        if response is None:
            continue
        for number, line in enumerate(response.text.splitlines(), 1):
            if not line.strip():
                continue
            where = f"{endpoint}: line {number} of page {page} of {pattern}"
            capture = _json(line, where)
            missing = [name for name in _LOCATING if not isinstance(capture, dict) or not capture.get(name)]
            if missing:
                raise InputError(
                    f"{where} has no {', '.join(missing)}: {line[:200]!r}; the server is not a CDX API "
                    "with WARC locations (use a pywb index such as Common Crawl's)"
                )
            captures.append(capture)
    return captures


def write_targets(
    api_url: str,
    crawl: str,
    patterns: list[str],
    out: Path,
    timeout_s: float = FetchSettings.timeout_s,
    retries: int = FetchSettings.retries,
    backoff_s: float = FetchSettings.backoff_s,
) -> int:
    """Write the captures of ``patterns`` in ``crawl`` to ``out`` (CSV); returns the rows written."""
    endpoint = f"{api_url.rstrip('/')}/{crawl}-index"
    backoff = Backoff(retries, backoff_s, threading.Event())
    with httpx.Client(timeout=timeout_s) as client:
        found = [capture for pattern in patterns for capture in _captures(client, endpoint, pattern, backoff)]
    # beside its final place, then renamed over it: a stopped run leaves no half-written file
    with said_of_the_place(out, "--out to a file on a disk with room", InputError):
        out.parent.mkdir(parents=True, exist_ok=True)
        temporary = tempfile.NamedTemporaryFile(
            "w", dir=out.parent, suffix=".tmp", delete=False, newline="", encoding="utf-8"
        )
        try:
            with temporary as handle:  # its last bytes are written as it closes, which can fail too
                writer = csv.DictWriter(handle, TARGET_COLUMNS, extrasaction="ignore")
                writer.writeheader()
                writer.writerows(found)
            os.replace(handle.name, out)
        except BaseException:
            Path(temporary.name).unlink(missing_ok=True)
            raise
    return len(found)
