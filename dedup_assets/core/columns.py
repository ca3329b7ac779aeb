"""The input contract shared by every source reader."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

REQUIRED_COLUMNS = ["doc_id", "source", "domain", "crawled_at", "title", "body"]
# The six columns as a reader emits them, before validation parses crawled_at.
RAW_FIELDS = [(name, pa.large_string()) for name in REQUIRED_COLUMNS]
# How a reader reports a record it cannot turn into a row: (record number, doc_id, reason, detail).
Reject = Callable[[int, str, str, str], None]
