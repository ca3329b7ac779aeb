"""Damaged and cut gzip input (JSONL and WARC): what cannot be trusted is rejected with its offset,
what is intact is read, and the independent count still agrees with documents + rejects."""

import gzip
import json
import zlib

import pytest

from dedup_assets.core.read import (
    InputError,
    InputPolicy,
    InputStats,
    count_input_records,
    document_batches,
    read_documents,
    reader_for,
)

from .warc_fixtures import ARTICLE, write_pages


def _read(path):
    """Documents and rejects straight from the reader, and its count."""
    reader = reader_for(path)
    rejects = []
    batches = reader.batches(path, 7, InputPolicy(), lambda *reject: rejects.append(reject))
    documents = [row for batch in batches for row in batch.to_pylist()]
    return documents, rejects, reader.count(path)


def _accounted(path):
    """The input through the validating stream: its documents, and rejects as (row, reason, detail)."""
    stats = InputStats()
    documents = [row for batch in document_batches(path, stats, 7) for row in batch.to_pylist()]
    assert stats.rows == len(documents) + len(stats.rejected) == count_input_records(path)
    return documents, [(r["input_row"], r["reason"], r["detail"]) for r in stats.rejected]


def _members(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each gzip member, found by decompressing them in turn."""
    spans, start = [], 0
    while start < len(data):
        inflater = zlib.decompressobj(wbits=31)
        inflater.decompress(data[start:])
        end = len(data) - len(inflater.unused_data)
        spans.append((start, end))
        start = end
    return spans


def _flip(data: bytes, start: int, end: int, error: str = "") -> bytes:
    """``data`` with a byte flipped in the deflate data of the member at start..end (past its
    10-byte header, before its 8-byte trailer): the first flip from the middle on that makes the
    member fail with zlib's ``error`` (or fail at all)."""
    for position in range((start + 10 + end - 8) // 2, end - 8):
        damaged = bytearray(data)
        damaged[position] ^= 0xFF
        inflater = zlib.decompressobj(wbits=31)
        try:
            inflater.decompress(bytes(damaged[start:end]))
            failure = "" if inflater.eof else "runs on past its end"
        except zlib.error as problem:
            failure = str(problem)
        if failure and error in failure:
            return bytes(damaged)
    raise AssertionError(f"no flip in the member at {start} makes it fail with {error!r}")


def _lines(first: int, count: int) -> list[str]:
    return [
        json.dumps({"id": f"d{number}", "text": f"Line {number}. {ARTICLE}", "timestamp": "2026-02-01"}) + "\n"
        for number in range(first, first + count)
    ]


def _jsonl_members(*sizes: int) -> tuple[bytes, list[str]]:
    """A multi-member .jsonl.gz (as ``cat a.gz b.gz`` makes) with members of ``sizes`` lines."""
    lines, data = [], b""
    for size in sizes:
        member = _lines(len(lines), size)
        lines += member
        data += gzip.compress("".join(member).encode(), mtime=0)
    return data, lines


def test_a_flipped_byte_in_one_member_rejects_its_lines_and_the_other_members_are_read(tmp_path):
    data, lines = _jsonl_members(10, 10, 10)
    (start, end) = _members(data)[1]
    path = tmp_path / "dump.jsonl.gz"
    path.write_bytes(_flip(data, start, end, "incorrect data check"))  # decodes, but to other text
    documents, rejects, count = _read(path)
    assert [d["doc_id"] for d in documents] == [f"d{n}" for n in [*range(10), *range(20, 30)]]
    assert [d["body"] for d in documents] == [json.loads(line)["text"] for line in lines[:10] + lines[20:]]
    # the damaged member's lines, as its damaged data splits them, from line 11 on
    rows = [number for number, *_ in rejects]
    assert rows and rows == list(range(11, 11 + len(rows)))
    assert documents[10]["input_row"] == rows[-1] + 1
    assert {reason for _, _, reason, _ in rejects} == {"decode_error"}
    assert {detail for *_, detail in rejects} == {
        f"the gzip member starting at compressed byte offset {start} fails its CRC check (zlib: incorrect data "
        "check), so its lines cannot be trusted; re-download or re-compress the file; reading resumed at the "
        f"next intact member, at byte {end}"
    }
    assert count == len(documents) + len(rejects)
    table = read_documents(path)
    assert table.num_rows == 20 and count_input_records(path) == table.num_rows + len(rejects)


def test_a_flipped_byte_in_a_one_member_file_rejects_every_line_of_it(tmp_path):
    data = gzip.compress("".join(_lines(0, 500)).encode(), mtime=0)
    path = tmp_path / "dump.jsonl.gz"
    path.write_bytes(_flip(data, 0, len(data), "incorrect data check"))
    documents, rejects, count = _read(path)
    assert documents == [] and len(rejects) == count
    assert [row for row, *_ in rejects] == list(range(1, len(rejects) + 1))
    assert {reason for _, _, reason, _ in rejects} == {"decode_error"}
    assert all(detail.startswith("the gzip member starting at compressed byte offset 0 ") for *_, detail in rejects)
    # with no document left, the run stops saying why
    with pytest.raises(InputError, match=rf"all {count:,} records were rejected \(decode_error {count:,}\)"):
        list(document_batches(path, InputStats(), 7))


def test_a_cut_jsonl_gz_rejects_the_lines_of_its_incomplete_member_as_truncated(tmp_path):
    data, lines = _jsonl_members(10, 40)
    (_, _), (start, end) = _members(data)
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: (start + end) // 2])
    documents, rejects = _accounted(path)
    assert [d["doc_id"] for d in documents] == [f"d{n}" for n in range(10)]
    assert rejects and [row for row, _, _ in rejects] == list(range(11, 11 + len(rejects)))
    assert len(rejects) < 40  # the lines read before the cut, the last one partly: no phantom line
    assert {reason for _, reason, _ in rejects} == {"truncated"}
    assert rejects[0][2] == (
        f"the file ends inside the gzip member starting at compressed byte offset {start}, so its lines "
        "cannot be checked; re-download the file"
    )
    # cut inside the member's header: nothing of it can be read, and it is still one reject
    path.write_bytes(data[: start + 5])
    documents, rejects = _accounted(path)
    assert len(documents) == 10 and [(row, reason) for row, reason, _ in rejects] == [(11, "truncated")]


def test_members_that_split_lines_read_as_one_stream_and_a_damaged_one_rejects_the_lines_it_holds(tmp_path):
    text = "".join(_lines(0, 30)).encode()
    cuts = [0, 777, 1500, 2333, len(text)]  # mid-line, as bgzip's fixed-size blocks fall
    parts = [gzip.compress(text[a:b], mtime=0) for a, b in zip(cuts, cuts[1:])]
    path = tmp_path / "blocks.jsonl.gz"
    path.write_bytes(b"".join(parts))
    documents, rejects = _accounted(path)
    assert [d["doc_id"] for d in documents] == [f"d{n}" for n in range(30)] and rejects == []
    start = len(parts[0]) + len(parts[1])
    path.write_bytes(_flip(b"".join(parts), start, start + len(parts[2])))
    documents, rejects = _accounted(path)
    # lines d0 up to the one block 3 begins in are intact, as are those after the one it ends in
    first, last = text[:1500].count(b"\n"), text[:2333].count(b"\n")
    assert [d["doc_id"] for d in documents] == [f"d{n}" for n in [*range(first), *range(last + 1, 30)]]
    assert [row for row, _, _ in rejects] == list(range(first + 1, first + 1 + len(rejects)))
    assert all(f"compressed byte offset {start} " in detail for *_, detail in rejects[:-1])
    # the damaged block's last line ends with it, so the rest of that line in block 4 is its own
    assert rejects[-1][2] == f"line {rejects[-1][0]} is not JSON: Expecting value"


def test_a_warc_gz_cut_inside_its_last_record_is_a_truncated_reject(tmp_path):
    path = write_pages(tmp_path / "crawl.warc.gz", 5)
    data = path.read_bytes()
    start, _ = _members(data)[-1]
    path.write_bytes(data[: start + 38])
    documents, rejects, count = _read(path)
    assert [d["input_row"] for d in documents] == [1, 2, 3, 4]
    assert [(number, reason) for number, _, reason, _ in rejects] == [(5, "truncated")]
    assert rejects[0][3] == (
        f"the file ends inside the gzip member starting at compressed byte offset {start}, so its records "
        "cannot be checked; re-download the file"
    )
    assert count == 5


def test_an_uncompressed_warc_cut_inside_a_record_is_a_truncated_reject(tmp_path):
    path = write_pages(tmp_path / "crawl.warc", 3, gzip=False)
    data = path.read_bytes()
    start = data.rindex(b"WARC/1.")
    for cut, why in [(len(data) - 100, "bytes short of its Content-Length"), (start + 60, "inside the record")]:
        path.write_bytes(data[:cut])
        documents, rejects = _accounted(path)
        assert [d["input_row"] for d in documents] == [1, 2]
        assert [(row, reason) for row, reason, _ in rejects] == [(3, "truncated")]
        assert f"the file ends inside the record at byte offset {start}" in rejects[0][2] and why in rejects[0][2]


def test_a_corrupt_member_in_the_middle_of_a_warc_gz_is_one_reject_and_reading_goes_on(tmp_path):
    path = write_pages(tmp_path / "crawl.warc.gz", 200)
    data = path.read_bytes()
    members = _members(data)
    start, end = members[20]
    path.write_bytes(_flip(data, start, end))
    documents, rejects = _accounted(path)
    assert [d["input_row"] for d in documents] == [*range(1, 21), *range(22, 201)]
    assert [(row, reason) for row, reason, _ in rejects] == [(21, "decode_error")]
    assert rejects[0][2].startswith(f"the gzip member starting at compressed byte offset {start} ")
    assert [(d["warc_offset"], d["warc_length"]) for d in documents[:2]] == [
        (a, b - a) for a, b in members[:2]
    ]
    table = read_documents(path)
    assert table.num_rows == 199 and count_input_records(path) == 200


def test_a_warc_gz_compressed_as_one_stream_is_read_record_by_record(tmp_path):
    plain = write_pages(tmp_path / "crawl.warc", 120, gzip=False).read_bytes()
    path = tmp_path / "crawl.warc.gz"
    path.write_bytes(gzip.compress(plain, mtime=0))  # more records than a member's are held
    documents, rejects = _accounted(path)
    assert [d["input_row"] for d in documents] == list(range(1, 121)) and rejects == []
    assert {(d["warc_offset"], d["warc_length"]) for d in documents} == {(0, path.stat().st_size)}
    path.write_bytes(_flip(path.read_bytes(), 0, path.stat().st_size))
    documents, rejects, count = _read(path)
    assert documents == [] and [(row, reason) for row, _, reason, _ in rejects] == [(1, "decode_error")] and count == 1
