"""JSONL input (``.jsonl``, ``.jsonl.gz``, ``.json.gz``): one JSON object per line, mapped onto
the six columns by a configurable field mapping (a field a line lacks is filled in by the input
contract, :mod:`.input_contract`). A line that is not a JSON object, lacks the mapped id or text
field, or is too long for any body within max_body_bytes, is rejected with its line number; the
others become documents. Lines are read in chunks, and a line beyond the limit is
skipped to its newline without being held (:mod:`.lines`).

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

import pyarrow as pa

from ..settings.input import InputPolicy
from .doc_ids import escaped
from .encoding import ReplacedRows, replaced_characters
from .gzip_members import Member, is_gzip, members, reread, survey
from .lines import Line, Lines, count_plain_lines, plain_lines
from .protocol import RAW_FIELDS, BySuffix, Reject

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


# JSON may escape a character of a body as \uXXXX, six bytes where UTF-8 has one (a control
# character), so a line that holds a body within max_body_bytes may be six times as long, beside
# its other fields. A longer line is rejected unread.
_ESCAPED = 6
_OTHER_FIELDS = 1 << 20


def line_limit(max_body_bytes: int) -> int:
    return _ESCAPED * max_body_bytes + _OTHER_FIELDS


def _lines(path: Path, limit: int) -> Iterator[tuple[Line, Member | None]]:
    """Each line of the file (its length beyond ``limit``), with the damaged gzip member it
    touches (None if it touches none)."""
    if is_gzip(path):
        yield from _gzip_lines(path, limit)
        return
    for line in plain_lines(path, limit):
        yield line, None


def _gzip_lines(path: Path, limit: int) -> Iterator[tuple[Line, Member | None]]:
    """The lines as in ``gzip -d`` output, except that a damaged member's last line ends with it:
    the next member's lines are its own (what the damaged data was cannot say otherwise), and a
    damaged member with no line of its own still stands for one, so it is never silent."""
    surveyed = survey(path)
    pending = Lines(limit)  # the line so far
    with path.open("rb") as handle:
        for member, damage in reread(handle, surveyed, path):
            ended = False  # whether a line ended in this member
            for chunk in member.chunks():
                for line in pending.split(chunk):
                    ended = True
                    yield line, damage
            if damage and (pending or not ended):
                yield pending.end(), damage
    if pending:
        yield pending.end(), None


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


# our columns a JSON string fills; a number or an object there would be stringified unseen
_TEXT_FIELDS = ("doc_id", "source", "domain", "title", "body", "url")
_JSON_TYPES = {bool: "a boolean", int: "a number", float: "a number", dict: "an object", list: "an array"}


def _text(value) -> str:
    return "" if value is None else value if isinstance(value, str) else json.dumps(value)


def _decoded(raw: bytes) -> tuple[str, int]:
    """The line as text, and how many characters had to be replaced (bytes that are not UTF-8)."""
    try:
        return raw.decode("utf-8"), 0
    except UnicodeDecodeError:
        text = raw.decode("utf-8", errors="replace")
        return text, replaced_characters(raw, text)


def _wrong_type(record: dict, field: dict[str, str], number: int) -> str | None:
    """What is wrong with a text field that is not a JSON string (nor null), if one is."""
    for ours in _TEXT_FIELDS:
        value = record.get(field[ours])
        # a whole-number id reads as its digits, as dumps with numeric ids mean it
        if value is None or isinstance(value, str) or (ours == "doc_id" and type(value) is int):
            continue
        return (
            f'line {number}: field "{field[ours]}" ({ours}) is {_JSON_TYPES[type(value)]}, not a string; '
            f"write it as a JSON string, or map {ours} to another field with the fields setting"
        )
    return None


def _lone_surrogate(row: dict, number: int) -> str | None:
    """JSON can escape half of a surrogate pair alone (\\ud800), which is no character and has no
    UTF-8; what is wrong, if a text of the row holds one."""
    for name, value in row.items():
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as error:
                found = value[error.start].encode("utf-8", "backslashreplace").decode()
                return (
                    f"line {number}: {name} has a lone surrogate ({found}), which is not a character "
                    "and cannot be stored as UTF-8; fix the program that wrote it, or drop the line"
                )
    return None


def _row(record: dict, field: dict[str, str], line_number: int, replaced: int) -> dict:
    return {
        "doc_id": _text(record.get(field["doc_id"])),
        "source": _text(record.get(field["source"])),
        "domain": _text(record.get(field["domain"])),
        "crawled_at": _text(record.get(field["crawled_at"])),
        "title": unicodedata.normalize("NFC", _text(record.get(field["title"]))),
        "body": unicodedata.normalize("NFC", _text(record.get(field["body"]))),
        "url": _text(record.get(field["url"])),
        "replaced_characters": replaced,
        "input_row": line_number,
    }


class JsonlReader(BySuffix):
    name = "jsonl"
    label = "JSONL"
    suffixes = (".jsonl", ".jsonl.gz", ".json.gz")
    columns_from_file = False
    appended_columns = ()

    def schema(self, path: Path) -> pa.Schema:
        return JSONL_SCHEMA

    def batches(
        self, path: Path, batch_size: int, policy: InputPolicy, reject: Reject
    ) -> Iterator[pa.RecordBatch]:
        """Document rows in batches, mapped by ``policy.fields``; bad lines go to ``reject``
        with their line number: a line beyond :func:`line_limit` (``too_large``, skipped unread),
        one that is not a JSON object or holds a lone surrogate (``decode_error``), one without
        an id or without the text field (``missing_field``; a null or empty text is an empty
        body, as in a CSV or Parquet file) or with a text field that is not a string
        (``invalid_field_type``). Bytes that are not UTF-8 are replaced (and counted in
        ``replaced_characters``), unless so many are that the file is refused as not UTF-8
        (:class:`.encoding.ReplacedRows`); the lines of a damaged or truncated gzip member are
        rejected (``decode_error``, ``truncated``) and reading goes on with the next intact member."""
        field = {**DEFAULT_FIELDS, **policy.fields}
        id_field, text_field = field["doc_id"], field["body"]
        limit = line_limit(policy.max_body_bytes)
        replaced_rows = ReplacedRows(path)
        rows: list[dict] = []
        for number, (raw, damage) in enumerate(_lines(path, limit), start=1):
            if damage:
                reject(number, "", damage.reason, damage.why("lines"))
                continue
            if isinstance(raw, int):
                detail = (
                    f"line {number} has {raw:,} bytes, above the {limit:,} a line may have with "
                    f"max_body_bytes={policy.max_body_bytes:,}; raise max_body_bytes or remove the line"
                )
                reject(number, "", "too_large", detail)
                continue
            line, replaced = _decoded(raw)
            replaced_rows.add(1, replaced > 0, len(raw))
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                reject(number, "", "decode_error", f"line {number} is not JSON: {error.msg}")
                continue
            if not isinstance(record, dict):
                reject(number, "", "decode_error", f"line {number} is not a JSON object")
                continue
            doc_id = escaped(_text(record.get(id_field)))
            missing = [id_field] if record.get(id_field) in (None, "") else []
            missing += [] if text_field in record else [text_field]
            if missing:
                reject(number, doc_id, "missing_field", f"no {' or '.join(missing)}")
                continue
            wrong_type = _wrong_type(record, field, number)
            if wrong_type:
                reject(number, doc_id, "invalid_field_type", wrong_type)
                continue
            row = _row(record, field, number, replaced)
            # only an escape (\ud...) can make one: the decoded line itself is valid text
            surrogate = (b"\\ud" in raw or b"\\uD" in raw) and _lone_surrogate(row, number)
            if surrogate:
                reject(number, doc_id, "decode_error", surrogate)
                continue
            rows.append(row)
            if len(rows) >= batch_size:
                yield pa.RecordBatch.from_pylist(rows, schema=JSONL_SCHEMA)
                rows = []
        replaced_rows.finish()
        if rows:
            yield pa.RecordBatch.from_pylist(rows, schema=JSONL_SCHEMA)

    def count(self, path: Path) -> int:
        """Lines in the file, counted on their own (newlines, not parsed lines)."""
        if is_gzip(path):
            return _count_gzip_lines(path)
        return count_plain_lines(path)


READER = JsonlReader()
