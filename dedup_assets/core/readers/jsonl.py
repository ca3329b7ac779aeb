"""JSONL input (``.jsonl``, ``.jsonl.gz``, ``.json.gz``): one JSON object per line, mapped onto
the six columns by a configurable field mapping. A line that is not a JSON object, or lacks the
mapped id or text, is rejected with its line number; the others become documents."""

from __future__ import annotations

import gzip
import json
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa

from ..settings import InputPolicy
from .protocol import RAW_FIELDS, Reject

# Our column -> the field of common dumps (id/text/url) that fills it.
DEFAULT_FIELDS = {
    "doc_id": "id",
    "body": "text",
    "url": "url",
    "title": "title",
    "crawled_at": "timestamp",
    "domain": "domain",
    "source": "source",
}
JSONL_SCHEMA = pa.schema(
    RAW_FIELDS
    + [
        ("url", pa.large_string()),
        ("replaced_characters", pa.int64()),
        ("input_row", pa.int64()),
    ]
)


def _lines(path: Path):
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as handle:
        yield from handle


def _text(value) -> str:
    return "" if value is None else value if isinstance(value, str) else json.dumps(value)


def _row(record: dict, fields: dict[str, str], line_number: int, replaced: int) -> dict:
    field = {**DEFAULT_FIELDS, **fields}
    url = _text(record.get(field["url"]))
    return {
        "doc_id": _text(record.get(field["doc_id"])).strip(),
        "source": _text(record.get(field["source"])) or "jsonl",
        "domain": _text(record.get(field["domain"])) or (urlsplit(url).hostname or ""),
        "crawled_at": _text(record.get(field["crawled_at"])),
        "title": unicodedata.normalize("NFC", _text(record.get(field["title"]))),
        "body": unicodedata.normalize("NFC", _text(record.get(field["body"]))),
        "url": url,
        "replaced_characters": replaced,
        "input_row": line_number,
    }


class JsonlReader:
    name = "jsonl"
    label = "JSONL"
    columns_from_file = False

    def matches(self, path: Path) -> bool:
        return path.name.lower().endswith((".jsonl", ".jsonl.gz", ".json.gz"))

    def schema(self, path: Path) -> pa.Schema:
        return JSONL_SCHEMA

    def batches(
        self, path: Path, batch_size: int, policy: InputPolicy, reject: Reject
    ) -> Iterator[pa.RecordBatch]:
        """Document rows in batches, mapped by ``policy.fields``; bad lines go to ``reject``
        with their line number. Bytes that are not UTF-8 are replaced (and counted in
        ``replaced_characters``); a truncated gzip file ends with one ``decode_error``."""
        fields = policy.fields
        id_field = {**DEFAULT_FIELDS, **fields}["doc_id"]
        text_field = {**DEFAULT_FIELDS, **fields}["body"]
        rows: list[dict] = []
        number = 0
        try:
            for raw in _lines(path):
                number += 1
                line = raw.decode("utf-8", errors="replace")
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as error:
                    reject(number, "", "decode_error", f"line {number} is not JSON: {error.msg}")
                    continue
                if not isinstance(record, dict):
                    reject(number, "", "decode_error", f"line {number} is not a JSON object")
                    continue
                missing = [name for name in (id_field, text_field) if record.get(name) in (None, "")]
                if missing:
                    reject(number, _text(record.get(id_field)), "missing_field", f"no {' or '.join(missing)}")
                    continue
                rows.append(_row(record, fields, number, line.count("\ufffd")))
                if len(rows) >= batch_size:
                    yield pa.RecordBatch.from_pylist(rows, schema=JSONL_SCHEMA)
                    rows = []
        except (EOFError, OSError) as error:  # a truncated or corrupt gzip stream
            reject(number + 1, "", "decode_error", f"cannot read on from line {number + 1}: {error}")
        if rows:
            yield pa.RecordBatch.from_pylist(rows, schema=JSONL_SCHEMA)

    def count(self, path: Path) -> int:
        """Lines in the file, counted on their own; a damaged gzip tail counts as one line."""
        count = 0
        try:
            for _ in _lines(path):
                count += 1
        except (EOFError, OSError):
            count += 1
        return count


READER = JsonlReader()
