"""The one input contract of every format (CSV, Parquet, JSONL, WARC, and folders of them): what
a document must have, and what the pipeline fills in where the input has nothing.

- ``doc_id`` and ``body`` are required. A CSV or Parquet file without either column (as the
  ``fields`` setting maps them) is refused as a whole; a JSONL record without the field is
  ``missing_field``. An empty ``doc_id`` is ``missing_field``; an empty (or null) body is a
  document, a singleton that never enters an LSH bucket.
- ``source``, where missing or empty: the input file's name (``pages.csv``).
- ``domain``, where missing or empty: the host of the row's ``url`` (our column, so ``fields``
  can map it), lower-cased; empty where there is no url.
- ``title``, where missing: empty.
- ``crawled_at``, where missing or empty: null, and the keep rule ranks an undated copy after
  every dated one. A value that is not ISO 8601 is ``invalid_crawled_at``.

Readers hand on what the input holds; :func:`base_columns` applies the defaults, for every
format in one place.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

REQUIRED_COLUMNS = ["doc_id", "body"]
# Every document's columns, in order: the required ones and those the contract fills in.
BASE_COLUMNS = ["doc_id", "source", "domain", "crawled_at", "title", "body"]
TEXT_COLUMNS = ["doc_id", "source", "domain", "title", "body"]
# what urllib's urlsplit(url).hostname finds, done by Arrow for a whole column: the authority
# after an optional scheme, without user info and port ([...] keeps an IPv6 address whole)
_HOST = r"^\s*(?:[A-Za-z][A-Za-z0-9+.\-]*:)?//(?:[^/?#]*@)?(?P<host>\[[^\]/?#]*\]|[^:/?#]*)"


def text(column: pa.Array) -> pa.Array:
    """A column as text, null as empty."""
    return pc.fill_null(column.cast(pa.large_string()), "")


def url_hosts(urls: pa.Array) -> pa.Array:
    """Each url's host, lower-cased; empty where it has none."""
    found = pc.struct_field(pc.extract_regex(text(urls), _HOST), "host")
    return pc.utf8_trim(pc.utf8_lower(pc.fill_null(found, "")), "[]")


def base_columns(path: Path, batch: pa.RecordBatch) -> dict[str, pa.Array]:
    """The six base columns of a reader's batch (its columns named as ours), the defaults above
    filled in: the text columns as text, ``crawled_at`` as the input has it (null where it
    has none)."""
    names, rows = batch.schema.names, batch.num_rows

    def given(name: str) -> pa.Array:
        return text(batch.column(name)) if name in names else pa.array([""] * rows, pa.large_string())

    def filled(column: pa.Array, default: pa.Array | pa.Scalar) -> pa.Array:
        return pc.if_else(pc.equal(column, ""), default, column)

    columns = {name: given(name) for name in TEXT_COLUMNS}
    columns["source"] = filled(columns["source"], pa.scalar(path.name, pa.large_string()))
    if "url" in names:
        columns["domain"] = filled(columns["domain"], url_hosts(batch.column("url")))
    columns["crawled_at"] = batch.column("crawled_at") if "crawled_at" in names else pa.nulls(rows, pa.large_string())
    return columns
