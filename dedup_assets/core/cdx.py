"""A targets file from a CDX API (pywb's, as Common Crawl's index server runs it): the captures
of URL patterns in one crawl, kept to HTML pages answered with 200, written as the CSV that
``source_format: "warc_ranges"`` reads.

The server answers JSON lines, one capture each, in pages: ``showNumPages`` says how many; every
page is asked for in turn, so the file lists the captures in the server's order.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import httpx

from .readers.protocol import InputError

TARGET_COLUMNS = ("url", "filename", "offset", "length", "digest", "timestamp", "mime", "status")
# pywb filters: "=" is an exact match of the field
_FILTERS = ("=status:200", "=mime:text/html")


def _get(client: httpx.Client, endpoint: str, params: list[tuple[str, str]]) -> httpx.Response | None:
    """The server's answer, or None for "no captures" (pywb answers 404)."""
    try:
        response = client.get(endpoint, params=params)
    except httpx.HTTPError as error:
        raise InputError(f"{endpoint}: cannot be reached ({error}); check cdx_api_url and the network") from None
    if response.status_code == 404:
        return None
    if response.status_code != 200:
        raise InputError(
            f"{endpoint}: answered HTTP {response.status_code} ({response.text[:200].strip()}); "
            "check the crawl id (such as CC-MAIN-2024-10) and the pattern"
        )
    return response


def _captures(client: httpx.Client, endpoint: str, pattern: str) -> list[dict]:
    query = [("url", pattern), ("output", "json"), *(("filter", rule) for rule in _FILTERS)]
    pages = _get(client, endpoint, [*query, ("showNumPages", "true")])
    count = json.loads(pages.text).get("pages", 1) if pages is not None else 0
    captures = []
    for page in range(count):
        response = _get(client, endpoint, [*query, ("page", str(page))])
        if response is not None:
            captures += [json.loads(line) for line in response.text.splitlines() if line.strip()]
    return captures


def write_targets(api_url: str, crawl: str, patterns: list[str], out: Path, timeout_s: float = 60.0) -> int:
    """Write the captures of ``patterns`` in ``crawl`` to ``out`` (CSV); returns the rows written."""
    endpoint = f"{api_url.rstrip('/')}/{crawl}-index"
    rows = 0
    with httpx.Client(timeout=timeout_s) as client:
        found = [capture for pattern in patterns for capture in _captures(client, endpoint, pattern)]
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, TARGET_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for capture in found:
            missing = [name for name in ("filename", "offset", "length") if not capture.get(name)]
            if missing:
                raise InputError(
                    f"{endpoint}: a capture of {capture.get('url', '?')} has no {', '.join(missing)}; "
                    "the server is not a CDX API with WARC locations (use a pywb index such as Common Crawl's)"
                )
            writer.writerow(capture)
            rows += 1
    return rows
