"""The inputs the cases write, with a content known to them: rows of random words, CSV lines and
files, HTML pages in a .warc.gz."""

from __future__ import annotations

import csv
import io
import json
import random
import string
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

HEADER = ["doc_id", "source", "domain", "crawled_at", "title", "body"]
# the body a malformed row must not come out with: it must be a reject, not a document
MALFORMED = "(a malformed row is no document)"


def words(rng: random.Random, count: int) -> str:
    return " ".join(
        "".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(count)
    )


def rows_of(rng: random.Random, count: int, prefix: str = "d") -> list[dict]:
    return [
        {
            "doc_id": f"{prefix}{number}",
            "source": "faults",
            "domain": f"site{number}.example.com",
            "crawled_at": "2026-01-31T12:00:00Z",
            "title": f"Page {number}",
            "body": words(rng, 60),
        }
        for number in range(1, count + 1)
    ]


def csv_lines(rows: list[dict]) -> list[str]:
    """Each row as one CSV line (quoted where needed), without its line end."""
    lines = []
    for row in rows:
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="").writerow([row[name] for name in HEADER])
        lines.append(buffer.getvalue())
    return lines


def write_csv(
    path: Path, lines: list[str], encoding: str = "utf-8", header: list[str] = HEADER
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes("\n".join([",".join(header), *lines, ""]).encode(encoding))
    return path


def jsonl_lines(rows: list[dict]) -> list[str]:
    """Each row as one JSONL line with its line end, in the fields JSONL dumps commonly have."""
    return [
        json.dumps({"id": row["doc_id"], "text": row["body"], "timestamp": row["crawled_at"]})
        + "\n"
        for row in rows
    ]


def bodies(rows: list[dict]) -> dict[str, dict]:
    return {row["doc_id"]: {"body": row["body"]} for row in rows}


def html_page(title: str, text: str) -> bytes:
    return (
        f"<html><head><title>{title}</title></head><body><article><h1>{title}</h1><p>{text}</p>"
        "</article></body></html>"
    ).encode()


def write_warc(path: Path, pages: int, rng: random.Random) -> list[int]:
    """A .warc.gz of distinct HTML responses, one gzip member each; the offset of every record."""
    offsets = []
    with path.open("wb") as stream:
        writer = WARCWriter(stream, gzip=True)
        for number in range(pages):
            offsets.append(stream.tell())
            headers = StatusAndHeaders(
                "200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1"
            )
            record = writer.create_warc_record(
                f"https://site{number}.example.com/page",
                "response",
                payload=io.BytesIO(html_page(f"Page {number}", words(rng, 120))),
                http_headers=headers,
                warc_headers_dict={"WARC-Date": "2026-03-01T10:00:00Z"},
            )
            writer.write_record(record)
    return offsets
