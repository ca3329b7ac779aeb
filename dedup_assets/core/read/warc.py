"""WARC input: HTML responses become documents with their WARC lineage; every other record is
rejected with a reason, so each record is accounted for exactly once.

Records are read with warcio and the main text is extracted with resiliparse (boilerplate
removal in C++, fast enough to keep up with the rest of the pipeline).

A ``.warc.gz`` is read gzip member by gzip member (:mod:`.gzip_members`), each decompressed into
warcio, and what its records become is handed on only once the member's CRC and length check
out: a damaged member is one ``decode_error`` (one the file ends inside, ``truncated``) and
reading goes on at the next intact member. A record is normally a member of its own; a file
compressed as one stream is one member holding every record. A record warcio cannot read is
rejected on its own; in an uncompressed ``.warc`` reading goes on at the next record its headers
point to, and a file that ends inside a record ends with a ``truncated`` reject. ``count`` walks
the record headers instead of warcio, so a record the reading loses shows as a difference.
"""

from __future__ import annotations

import sys
import unicodedata
from collections.abc import Generator, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa
from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.encoding import bytes_to_str, detect_encoding
from resiliparse.parse.html import HTMLTree
from warcio.archiveiterator import ArchiveIterator
from warcio.recordloader import ArcWarcRecordLoader

from ..settings.input import InputPolicy
from .gzip_members import Member, changed, is_gzip, member_at, members
from .protocol import RAW_FIELDS, BySuffix, Reject

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
_LINE = 1 << 16  # longest header line the record walk reads at once
_HTTP_SCHEMES = ("http:", "https:")
_HELD = 100  # records of a gzip member held in memory until its check passes
_CUT = sys.maxsize  # the end of a record whose header block the file ends inside: past any file
# What reading a record gives: its document row, or the (doc_id, reason, detail) of its reject.
Entry = dict | tuple[str, str, str]


class _TolerantLoader(ArcWarcRecordLoader):
    """warcio assumes every response has a WARC-Target-URI and stops the whole file on one
    without; leave such a record's HTTP headers unparsed so it is rejected on its own."""

    def load_http_headers(self, rec_type, uri, stream, length):
        if uri is None:
            return None
        return super().load_http_headers(rec_type, uri, stream, length)


_LOADER = _TolerantLoader()  # keeps no state between records, so one serves every member


def records_of(stream) -> ArchiveIterator:
    """warcio's records of ``stream``, digests checked, a response without a Target-URI readable."""
    records = ArchiveIterator(stream, check_digests=True)
    records.loader = _LOADER
    return records


def _decode(payload: bytes, content_type: str) -> tuple[str, int]:
    """The HTML as text and how many characters had to be replaced."""
    declared = content_type.lower().partition("charset=")[2].split(";")[0].strip()
    text = bytes_to_str(payload, declared or detect_encoding(payload))
    return text, text.count("\ufffd")


def _document(filename: str, record, payload: bytes, offset: int, length: int | None) -> dict | str:
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
        "warc_filename": filename,
        "warc_record_id": record_id,
        "warc_target_uri": uri,
        "warc_offset": offset,
        "warc_length": length,
        "warc_payload_digest": record.rec_headers.get_header("WARC-Payload-Digest") or "",
        "replaced_characters": replaced,
    }


def _damaged(record) -> str | None:
    """A record whose declared digests failed or could not be checked (one cut short is found
    before, by its length)."""
    checker = getattr(record, "digest_checker", None)
    declared = record.rec_headers.get_header("WARC-Block-Digest") or record.rec_headers.get_header(
        "WARC-Payload-Digest"
    )
    if checker is not None and checker.passed is False:
        return "the record's digest does not match its content"
    if declared and (checker is None or checker.passed is None):
        return "the record's declared digest could not be checked"
    return None


def _problem(record, max_body_bytes: int, payload: bytes) -> tuple[str, str] | None:
    if record.rec_type != "response":
        return "not_response", f"WARC-Type {record.rec_type}"
    uri = record.rec_headers.get_header("WARC-Target-URI")
    if not uri:
        return "missing_field", "no WARC-Target-URI"
    # warcio reads HTTP headers only under an http(s) URI, so any other record's payload digest
    # is checked against its whole block and fails: said before that check, with the true cause
    if not uri.lower().startswith(_HTTP_SCHEMES):
        return "not_http", f"WARC-Target-URI {uri} is not an http(s) URL, so the record holds no HTTP response"
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


def record_entry(
    filename: str, record, payload: bytes, offset: int, length: int | None, max_body_bytes: int, in_member: bool
) -> Entry:
    """What one record read from ``filename`` becomes: its document row, or (doc_id, reason,
    detail). ``in_member``: it came from a gzip member whose CRC and length checked out."""
    record_id = record.rec_headers.get_header("WARC-Record-ID") or ""
    missing = getattr(record.raw_stream, "limit", 0)  # declared bytes the stream ended without
    # without a Content-Length (required) warcio reads to the end: the headers were cut there
    declared = record.length is not None
    if missing or not declared:
        short = f"{missing:,} bytes short of its Content-Length" if declared else "within its headers"
        if in_member:
            return record_id, "decode_error", (
                f"the record in the gzip member at compressed byte offset {offset} ends {short} although the "
                "member is intact, so it was written that way; get a fresh copy of the file"
            )
        return record_id, "truncated", (
            f"the file ends inside the record at byte offset {offset}, {short}; re-download the file"
        )
    problem = _problem(record, max_body_bytes, payload)
    document = problem or _document(filename, record, payload, offset, length)
    if isinstance(document, str):
        return record_id, document, "the page has no main text"
    return document if isinstance(document, dict) else (record_id, *document)


def _read(
    path: Path, stream, max_body_bytes: int, member_start: int | None
) -> Generator[Entry, None, tuple[int, str]]:
    """The entries of the records warcio reads from the stream's position on. Returns where it
    stopped (the stream's end, or the start of a record it could not read) and the error, if any.
    Records of a gzip member get the member's offset, and a length of None for the caller to fill
    in once the member's end is known."""
    records = records_of(stream)
    at = records.offset
    try:
        for record in records:
            payload = record.content_stream().read(max_body_bytes + 1)
            records.read_to_end(record)
            if member_start is None:
                offset, length = records.get_record_offset(), records.get_record_length()
            else:
                offset, length = member_start, None
            yield record_entry(path.name, record, payload, offset, length, max_body_bytes, member_start is not None)
            at = records.offset
            if member_start is not None and stream.ended_at(at):
                break  # spares warcio a look for one more record (an EOFError) in every member
    except Exception as error:  # warcio, zlib and the HTML parser raise many types for a damaged record
        return at, " ".join(str(error).split()) or type(error).__name__
    return records.offset, ""


def _spans(stream, position: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each record from ``position`` (the stream's) on, found by its headers
    alone: a WARC version line, header lines up to a blank one, then Content-Length bytes. The end
    is ``_CUT`` when the stream ends inside the header block, and -1 for a line that starts no
    record, which ends the walk as it ends reading."""
    while line := stream.readline(_LINE):
        start = position
        position += len(line)
        if not line.strip():
            continue
        if not line.startswith(b"WARC/"):
            yield start, -1
            return
        length = 0
        while (line := stream.readline(_LINE)).strip():
            position += len(line)
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length" and value.strip().isdigit():
                length = int(value)
        if not line:
            yield start, _CUT
            return
        position += len(line) + length
        yield start, position
        _skip(stream, length)


def _skip(stream, length: int) -> None:
    if stream.seekable():
        stream.seek(length, 1)
        return
    while length > 0 and (chunk := stream.read(min(length, 1 << 20))):
        length -= len(chunk)


def _file_entries(path: Path, max_body_bytes: int) -> Iterator[Entry]:
    """An uncompressed WARC: after a record warcio cannot read, reading goes on at the next
    record by the failed one's headers; a file that ends inside a record ends with a
    ``truncated`` reject."""
    size = path.stat().st_size
    with path.open("rb") as stream:
        head = stream.read(_LINE)
        # warcio takes blank lines before the first record for a record that runs to the end
        position = len(head) - len(head.lstrip(b"\r\n"))
        while position < size:
            stream.seek(position)
            stopped, error = yield from _read(path, stream, max_body_bytes, None)
            if stopped >= size:
                return
            stream.seek(stopped)
            spans = _spans(stream, stopped)
            found = next(spans, None)
            if found is None:  # only blank lines were left
                return
            end = found[1]
            why = f" ({error})" if error else ""
            if end > size:
                yield "", "truncated", (
                    f"the file ends inside the record at byte offset {stopped}; re-download the file"
                )
                return
            if end < 0:
                yield "", "decode_error", (
                    f"byte offset {stopped} starts no WARC record{why}, so the rest of the file is not read; "
                    "repair or re-download the file"
                )
                return
            yield "", "decode_error", f"cannot read the record at byte offset {stopped}{why}; fix or drop it"
            position = next(spans, (size, size))[0]


def _member_entries(path: Path, member: Member, max_body_bytes: int) -> Iterator[Entry]:
    stopped, error = yield from _read(path, member, max_body_bytes, member.start)
    member.drain()
    if error or stopped < member.size:
        yield "", "decode_error", (
            f"cannot read the WARC record in the gzip member at compressed byte offset {member.start}"
            f"{f' ({error})' if error else ''} although the member is intact, so it was written that way; "
            "fix or drop the record"
        )


def _gzip_entries(path: Path, max_body_bytes: int) -> Iterator[Entry]:
    """A ``.warc.gz``, member by member. A member's entries are held until its CRC and length
    have been checked, then handed on (or replaced by one reject); a member of more than
    ``_HELD`` records (a file compressed as one stream) is checked first and read again, so the
    held entries stay few. Every record of a member gets the member's offset and length."""
    with path.open("rb") as handle, path.open("rb") as again:
        for member in members(handle):
            held: list[Entry] = []
            for entry in _member_entries(path, member, max_body_bytes):
                held.append(entry)
                if len(held) > _HELD:
                    break
            member.drain()
            if member.reason:
                yield "", member.reason, member.why("records")
                continue
            for entry in held if len(held) <= _HELD else _read_again(path, again, member, max_body_bytes):
                if isinstance(entry, dict):
                    entry["warc_length"] = member.end - member.start
                yield entry


def _read_again(path: Path, handle, checked: Member, max_body_bytes: int) -> Iterator[Entry]:
    """The entries of a member read again, now that ``checked`` found it intact."""
    member = member_at(handle, checked.start)
    yield from _member_entries(path, member, max_body_bytes)
    if member.reason or member.end != checked.end:
        raise changed(path, member.start)


class WarcReader(BySuffix):
    name = "warc"
    label = "WARC"
    suffixes = (".warc", ".warc.gz")
    columns_from_file = False
    appended_columns = ()

    def schema(self, path: Path) -> pa.Schema:
        return WARC_SCHEMA

    def batches(
        self, path: Path, batch_size: int, policy: InputPolicy, reject: Reject
    ) -> Iterator[pa.RecordBatch]:
        """Document rows in batches; other records go to ``reject`` with their record number (a
        damaged gzip member counts as one record)."""
        max_body_bytes = policy.max_body_bytes
        read = _gzip_entries if is_gzip(path) else _file_entries
        entries = read(path, max_body_bytes)
        rows: list[dict] = []
        for number, entry in enumerate(entries, start=1):
            if isinstance(entry, dict):
                entry["input_row"] = number
                rows.append(entry)
                if len(rows) >= batch_size:
                    yield pa.RecordBatch.from_pylist(rows, schema=WARC_SCHEMA)
                    rows = []
            else:
                reject(number, *entry)
        if rows:
            yield pa.RecordBatch.from_pylist(rows, schema=WARC_SCHEMA)

    def count(self, path: Path) -> int:
        """Records in the file by their headers, not by warcio; in a ``.warc.gz`` each member is
        walked on its own, and a damaged one counts as one record."""
        with path.open("rb") as handle:
            if not is_gzip(path):
                return sum(1 for _ in _spans(handle, 0))
            count = 0
            for member in members(handle):
                records = sum(1 for _ in _spans(member.stream(), 0))
                member.drain()
                count += 1 if member.reason else records
            return count


READER = WarcReader()
