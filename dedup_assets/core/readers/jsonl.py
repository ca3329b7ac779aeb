"""JSONL input (``.jsonl``, ``.jsonl.gz``, ``.json.gz``): one JSON object per line, mapped onto
the six columns by a configurable field mapping. A line that is not a JSON object, or lacks the
mapped id or text, is rejected with its line number; the others become documents.

A gzip file (known by its first bytes) is checked member by member before its lines are read
(:mod:`.gzip_members`). Every line with bytes from a damaged member is rejected as
``decode_error``, and from a member the file ends inside as ``truncated``: a failed CRC does not
say where the data went wrong, so no line of the member can be trusted, even one that still
parses. They are the lines the damaged data splits into, so their number can differ from the
original's. Lines of intact members are read as usual, and a line may run on from one intact
member into the next, as in ``gzip -d`` output."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa

from ..settings import InputPolicy
from .gzip_members import Member, is_gzip, members, reread, survey
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


def _lines(path: Path) -> Iterator[tuple[bytes, Member | None]]:
    """Each line of the file, with the damaged gzip member it touches (None if it touches none)."""
    if is_gzip(path):
        yield from _gzip_lines(path)
        return
    with path.open("rb") as handle:
        for line in handle:
            yield line, None


def _gzip_lines(path: Path) -> Iterator[tuple[bytes, Member | None]]:
    """The lines as in ``gzip -d`` output, except that a damaged member's last line ends with it:
    the next member's lines are its own (what the damaged data was cannot say otherwise), and a
    damaged member with no line of its own still stands for one, so it is never silent."""
    surveyed = survey(path)
    pending = b""  # the line so far
    with path.open("rb") as handle:
        for member, damage in reread(handle, surveyed, path):
            ended = False  # whether a line ended in this member
            for chunk in member.chunks():
                lines = chunk.split(b"\n")
                lines[0] = pending + lines[0]
                pending = lines.pop()
                ended = ended or bool(lines)
                for line in lines:
                    yield line, damage
            if damage and (pending or not ended):
                yield pending, damage
                pending = b""
    if pending:
        yield pending, None


def _count_gzip_lines(path: Path) -> int:
    """Newlines, plus a line for each damaged member that does not end in one (see
    ``_gzip_lines``), plus a last line without one."""
    count, pending = 0, False
    with path.open("rb") as handle:
        for member in members(handle):
            ended = False
            for chunk in member.chunks():
                newlines = chunk.count(b"\n")
                count += newlines
                ended = ended or newlines > 0
                pending = not chunk.endswith(b"\n")
            if member.reason and (pending or not ended):
                count += 1
                pending = False
    return count + pending


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
    appended_columns = ()

    def matches(self, path: Path) -> bool:
        return path.name.lower().endswith((".jsonl", ".jsonl.gz", ".json.gz"))

    def schema(self, path: Path) -> pa.Schema:
        return JSONL_SCHEMA

    def batches(
        self, path: Path, batch_size: int, policy: InputPolicy, reject: Reject
    ) -> Iterator[pa.RecordBatch]:
        """Document rows in batches, mapped by ``policy.fields``; bad lines go to ``reject``
        with their line number. Bytes that are not UTF-8 are replaced (and counted in
        ``replaced_characters``); the lines of a damaged or truncated gzip member are rejected
        (``decode_error``, ``truncated``) and reading goes on with the next intact member."""
        fields = policy.fields
        id_field = {**DEFAULT_FIELDS, **fields}["doc_id"]
        text_field = {**DEFAULT_FIELDS, **fields}["body"]
        rows: list[dict] = []
        for number, (raw, damage) in enumerate(_lines(path), start=1):
            if damage:
                reject(number, "", damage.reason, damage.why("lines"))
                continue
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
        if rows:
            yield pa.RecordBatch.from_pylist(rows, schema=JSONL_SCHEMA)

    def count(self, path: Path) -> int:
        """Lines in the file, counted on their own (newlines, not parsed lines)."""
        if is_gzip(path):
            return _count_gzip_lines(path)
        with path.open("rb") as handle:
            return sum(1 for _ in handle)


READER = JsonlReader()
