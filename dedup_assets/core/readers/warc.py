"""WARC input: HTML responses become documents with their WARC lineage; every other record is
rejected with a reason, so each record is accounted for exactly once.

Records are read with warcio and the main text is extracted with resiliparse (boilerplate
removal in C++, fast enough to keep up with the rest of the pipeline).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa
from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.encoding import bytes_to_str, detect_encoding
from resiliparse.parse.html import HTMLTree
from warcio.archiveiterator import ArchiveIterator
from warcio.recordloader import ArcWarcRecordLoader

from ..settings import InputPolicy
from .protocol import RAW_FIELDS, Reject

WARC_SCHEMA = pa.schema(
    RAW_FIELDS
    + [
        ("warc_filename", pa.large_string()),
        ("warc_record_id", pa.large_string()),
        ("warc_target_uri", pa.large_string()),
        ("warc_offset", pa.int64()),
        ("warc_length", pa.int64()),
        ("warc_payload_digest", pa.large_string()),
        ("replaced_characters", pa.int64()),
        ("input_row", pa.int64()),
    ]
)


class _TolerantLoader(ArcWarcRecordLoader):
    """warcio assumes every response has a WARC-Target-URI and stops the whole file on one
    without; leave such a record's HTTP headers unparsed so it is rejected on its own."""

    def load_http_headers(self, rec_type, uri, stream, length):
        if uri is None:
            return None
        return super().load_http_headers(rec_type, uri, stream, length)


def _records(stream) -> ArchiveIterator:
    records = ArchiveIterator(stream, check_digests=True)
    records.loader = _TolerantLoader()
    return records


def _decode(payload: bytes, content_type: str) -> tuple[str, int]:
    """The HTML as text and how many characters had to be replaced."""
    declared = content_type.lower().partition("charset=")[2].split(";")[0].strip()
    text = bytes_to_str(payload, declared or detect_encoding(payload))
    return text, text.count("\ufffd")


def _document(path: Path, record, payload: bytes, offset: int, length: int, number: int) -> dict | str:
    """The document row of an HTML response, or the reason it cannot be one."""
    uri = record.rec_headers.get_header("WARC-Target-URI") or ""
    record_id = record.rec_headers.get_header("WARC-Record-ID") or ""
    html, replaced = _decode(payload, record.http_headers.get_header("Content-Type") or "")
    tree = HTMLTree.parse(html)
    body = unicodedata.normalize("NFC", extract_plain_text(tree, main_content=True) or "").strip()
    if not body:
        return "no_text_extracted"
    return {
        "doc_id": record_id,
        "source": "warc",
        "domain": urlsplit(uri).hostname or "",
        "crawled_at": record.rec_headers.get_header("WARC-Date") or "",
        "title": unicodedata.normalize("NFC", (tree.title or "").strip()),
        "body": body,
        "warc_filename": path.name,
        "warc_record_id": record_id,
        "warc_target_uri": uri,
        "warc_offset": offset,
        "warc_length": length,
        "warc_payload_digest": record.rec_headers.get_header("WARC-Payload-Digest") or "",
        "replaced_characters": replaced,
        "input_row": number,
    }


def _damaged(record) -> str | None:
    """A record whose declared digests failed, or could not be checked because it ends early."""
    checker = getattr(record, "digest_checker", None)
    declared = record.rec_headers.get_header("WARC-Block-Digest") or record.rec_headers.get_header(
        "WARC-Payload-Digest"
    )
    if checker is not None and checker.passed is False:
        return "the record's digest does not match its content"
    if declared and (checker is None or checker.passed is None):
        return "the record ends before its declared length (truncated file?)"
    return None


def _problem(record, max_body_bytes: int, payload: bytes) -> tuple[str, str] | None:
    if record.rec_type != "response":
        return "not_response", f"WARC-Type {record.rec_type}"
    if not record.rec_headers.get_header("WARC-Target-URI"):
        return "missing_field", "no WARC-Target-URI"
    damage = _damaged(record)
    if damage:
        return "decode_error", damage
    if record.http_headers is None:
        return "not_html", "no HTTP headers"
    status = record.http_headers.get_statuscode()
    if status != "200":
        return "http_status", f"HTTP status {status}"
    content_type = (record.http_headers.get_header("Content-Type") or "").lower()
    if "html" not in content_type:
        return "not_html", f"Content-Type {content_type or '(none)'}"
    if len(payload) > max_body_bytes:
        return "too_large", f"payload above max_body_bytes={max_body_bytes:,}"
    return None


class WarcReader:
    name = "warc"
    label = "WARC"
    columns_from_file = False

    def matches(self, path: Path) -> bool:
        name = path.name.lower()
        return name.endswith(".warc") or name.endswith(".warc.gz")

    def schema(self, path: Path) -> pa.Schema:
        return WARC_SCHEMA

    def batches(
        self, path: Path, batch_size: int, policy: InputPolicy, reject: Reject
    ) -> Iterator[pa.RecordBatch]:
        """Document rows in batches; other records go to ``reject`` with their record number. A
        truncated file or record ends the file with one ``decode_error``."""
        max_body_bytes = policy.max_body_bytes
        rows: list[dict] = []
        number = 0
        with path.open("rb") as stream:
            records = _records(stream)
            try:
                for record in records:
                    number += 1
                    record_id = record.rec_headers.get_header("WARC-Record-ID") or ""
                    payload = record.content_stream().read(max_body_bytes + 1)
                    records.read_to_end(record)
                    offset, length = records.get_record_offset(), records.get_record_length()
                    problem = _problem(record, max_body_bytes, payload)
                    document = problem or _document(path, record, payload, offset, length, number)
                    if isinstance(document, dict):
                        rows.append(document)
                    elif isinstance(document, str):
                        reject(number, record_id, document, "the page has no main text")
                    else:
                        reject(number, record_id, *document)
                    if len(rows) >= batch_size:
                        yield pa.RecordBatch.from_pylist(rows, schema=WARC_SCHEMA)
                        rows = []
            except Exception as error:  # warcio and zlib raise many types for a damaged file
                reject(number + 1, "", "decode_error", f"cannot read on from record {number + 1}: {error}")
        if rows:
            yield pa.RecordBatch.from_pylist(rows, schema=WARC_SCHEMA)

    def count(self, path: Path) -> int:
        """Records in the file, counted on their own; a damaged tail counts as one record."""
        count = 0
        with path.open("rb") as stream:
            try:
                for record in _records(stream):
                    record.content_stream().read()
                    count += 1
            except Exception:
                count += 1
        return count


READER = WarcReader()
