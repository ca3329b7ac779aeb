"""How the input is read: the formats, what happens to a row that cannot be a document, and how
a targets file's WARC records are fetched. :class:`..settings.Settings` fills these from its own
fields (``Settings.input_policy``); readers take only an :class:`InputPolicy`."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Literal, get_args

from ..util.errors import SettingsError

# The names of read/registry.py READERS, which cannot be read from there: every reader imports
# this module (and read/ imports model.py, whose source_format is typed with this), so the
# registry comes after both. test_readers holds the two equal.
SourceFormat = Literal["csv", "parquet", "jsonl", "warc", "warc_ranges"]
SOURCE_FORMATS: tuple[str, ...] = get_args(SourceFormat)
# Common Crawl's public HTTPS data endpoint, which a targets file's WARC filenames are joined to.
COMMON_CRAWL_BASE_URL = "https://data.commoncrawl.org/"
COMMON_CRAWL_TERMS = "https://commoncrawl.org/terms-of-use"
# Common Crawl's index server (pywb), whose CDX API ``dedup cdx-targets`` asks for targets.
COMMON_CRAWL_CDX_API_URL = "https://index.commoncrawl.org/"
# Beyond these a setting is a typo: more fetches at once than a server welcomes, or retries that
# would wait for hours.
MAX_FETCH_CONCURRENCY, MAX_FETCH_RETRIES = 64, 20


@dataclass(frozen=True)
class FetchSettings:
    """Where a targets file's WARC records are fetched from, and how hard to try. ``timeout_s``
    bounds each attempt as a whole; ``cache`` is a folder keeping fetched records (None: none);
    ``backoff_s`` is the first wait before a retry (the library's, for tests)."""

    base_url: str = COMMON_CRAWL_BASE_URL
    acknowledge_common_crawl_terms: bool = False
    concurrency: int = 8
    retries: int = 5
    timeout_s: float = 60.0
    cache: str | None = None
    backoff_s: float = 0.5

    def __post_init__(self) -> None:
        if not 1 <= self.concurrency <= MAX_FETCH_CONCURRENCY:
            raise SettingsError(
                f"fetch_concurrency must be from 1 to {MAX_FETCH_CONCURRENCY}, got {self.concurrency}"
            )
        if not 0 <= self.retries <= MAX_FETCH_RETRIES:
            raise SettingsError(f"fetch_retries must be from 0 to {MAX_FETCH_RETRIES}, got {self.retries}")
        if self.backoff_s <= 0:
            raise SettingsError(f"the fetch backoff must be above 0 s, got {self.backoff_s}")
        if self.timeout_s <= 0:
            raise SettingsError(f"fetch_timeout_s must be above 0, got {self.timeout_s}")
        if not self.base_url:
            raise SettingsError("warc_base_url must not be empty")


@dataclass(frozen=True)
class InputPolicy:
    """How the input is read, and what to do with a row that cannot be a document. ``fields``
    maps our column names to the input's (CSV and Parquet columns, JSONL fields). ``stop`` is
    set when the run is stopping (:func:`.streams.stop_on_signals` sets it): a reader waiting on the
    network in a thread of its own gives up."""

    max_body_bytes: int = 10_000_000
    fail_on_reject: bool = False
    fields: dict = field(default_factory=dict)
    source_format: str | None = None
    fetch: FetchSettings = field(default_factory=FetchSettings)  # targets files only
    stop: threading.Event | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.source_format is not None and self.source_format not in SOURCE_FORMATS:
            raise SettingsError(unknown_format(self.source_format))


def unknown_format(source_format: str) -> str:
    """Why a ``source_format`` is refused, as a setting or when handed to the readers."""
    return (
        f"source_format must be one of {', '.join(SOURCE_FORMATS)} (or unset to use the file "
        f"extension), got {source_format!r}"
    )
