"""A malformed CSV row is one reject naming its line, and the rows after it are still read; the
independent count agrees with documents + rejects however the file is broken; a row of any size
is read; a UTF-16 file, a repeated column or a broken header fails with what to do."""

import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pytest

from dedup_assets.core.read import (
    InputError,
    InputPolicy,
    InputStats,
    count_input_records,
    document_batches,
    read_documents,
)
from dedup_assets.core.read import csv as csv_reader
from dedup_assets.core.read import csv_scan
from dedup_assets.core.read.csv import READER

HEADER = "doc_id,source,domain,crawled_at,title,body\n"


def _row(number: int, body: str = "text", end: str = "\n") -> str:
    """A data row whose doc_id is its record number, so a kept row shows where it came from."""
    return f"{number},test,example.com,2026-01-01,title {number},{body}{end}"


def _write(tmp_path: Path, text: str | bytes, name: str = "in.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def _read(path: Path, **policy) -> tuple[list[tuple[str, int]], list[tuple]]:
    """Through the reader: (doc_id, input_row) of each row, and the rejects; they add up to the
    reader's own count."""
    rejects: list[tuple] = []
    rows = []
    for batch in READER.batches(path, 2, InputPolicy(**policy), lambda *args: rejects.append(args)):
        assert batch.schema.names == READER.schema(path).names
        rows += zip(batch.column("doc_id").to_pylist(), batch.column("input_row").to_pylist())
    assert len(rows) + len(rejects) == READER.count(path)
    return rows, rejects


def _documents(path: Path, **policy) -> tuple[pa.Table, InputStats]:
    """Through validation: the documents and the stats, which add up to the input's count."""
    stats = InputStats()
    table = pa.Table.from_batches(list(document_batches(path, stats, 2, InputPolicy(**policy))))
    assert stats.documents + len(stats.rejected) == stats.rows == count_input_records(path)
    return table, stats


# the text after the header -> (the rows read, by record number; (record, the start of its
# detail) of each reject)
MALFORMED = {
    "an unclosed quote": (
        '1,test,example.com,2026-01-01,title 1,"a quote never closed\n' + _row(2) + _row(3),
        [2, 3],
        [(1, "line 2: a quoted field opened here is never closed (rows are read on from line 3)")],
    ),
    "an unclosed quote before quoted rows": (
        '1,test,example.com,2026-01-01,title 1,"never closed\n'
        + _row(2, '"a quoted, body"')
        + _row(3, '"two\nlines"')
        + _row(4),
        [2, 3, 4],
        [(1, "line 2: a quoted field closed on line 3 is followed by text, not by a comma")],
    ),
    "an unclosed quote in the last row": (
        _row(1) + _row(2, '"never closed, up to the end'),
        [1],
        [(2, "line 3: a quoted field opened here is never closed")],
    ),
    "text after a closing quote": (
        _row(1, '"he said "hi" and left"') + _row(2),
        [2],
        [(1, "line 2: a quoted field closed here is followed by text")],
    ),
    "too few and too many fields": (
        "1,test,example.com,2026-01-01,title 1\n" + _row(2) + _row(3, "text,more") + _row(4),
        [2, 4],
        [
            (1, "line 2: has 5 fields, the header has 6"),
            (3, "line 4: has 7 fields, the header has 6; quote a field that has a comma in it"),
        ],
    ),
    "too many fields in a row over three lines": (
        _row(1, '"one\ntwo\nthree",extra') + _row(2),
        [2],
        [(1, "line 2: has 7 fields, the header has 6 (the row runs to line 4)")],
    ),
    "quotes chained over lines": (
        # each line closes the quote the line before opened, then opens another: each is a row
        # whose last quote is never closed
        '1,test,example.com,2026-01-01,title,"a\n' + 'x",b,c,d,e,"y\n' * 3 + _row(5),
        [5],
        [
            (1, "line 2: a quoted field opened on line 5 is never closed"),
            (2, "line 3: a quoted field opened on line 5 is never closed"),
            (3, "line 4: a quoted field opened on line 5 is never closed"),
            (4, "line 5: a quoted field opened here is never closed"),
        ],
    ),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_row_is_one_reject_with_its_line_and_the_rows_after_it_are_read(tmp_path, case):
    text, kept, rejected = MALFORMED[case]
    path = _write(tmp_path, HEADER + text)
    rows, rejects = _read(path)
    assert rows == [(str(number), number) for number in kept]
    assert [(number, doc_id, reason) for number, doc_id, reason, _ in rejects] == [
        (number, "", "malformed_row") for number, _ in rejected
    ]
    for (*_, detail), (_, start) in zip(rejects, rejected):
        assert detail.startswith(start), detail
    assert READER.count(path) == len(kept) + len(rejected)

    table, stats = _documents(path)
    assert table.column("doc_id").to_pylist() == [str(number) for number in kept]
    assert table.column("input_row").to_pylist() == kept
    assert [(reject["input_row"], reject["reason"]) for reject in stats.rejected] == [
        (number, "malformed_row") for number, _ in rejected
    ]
    assert all(reject["source_file"] == str(path) for reject in stats.rejected)


def test_under_fail_on_reject_a_malformed_row_fails_the_run_with_its_record_and_line(tmp_path):
    path = _write(tmp_path, HEADER + _row(1) + "2,test,example.com,2026-01-01,title 2\n" + _row(3))
    expected = r"in\.csv: record 2 \(doc_id ''\): malformed_row: line 3: has 5 fields"
    with pytest.raises(InputError, match=expected):
        read_documents(path, policy=InputPolicy(fail_on_reject=True))


def test_quoted_line_ends_stay_in_their_row_and_blank_lines_are_not_rows(tmp_path):
    header = HEADER.replace("\n", "\r\n")
    text = header + "\r\n" + _row(1, '"a\r\nb"', "\r\n") + "\n\n" + _row(2, '"c\rd"', "\r") + _row(3, "e", "")
    path = _write(tmp_path, text)
    assert _read(path) == ([("1", 1), ("2", 2), ("3", 3)], [])
    table, _ = _documents(path)
    assert table.column("body").to_pylist() == ["a\r\nb", "c\rd", "e"]


def test_a_row_lost_between_the_scan_and_arrow_shows_in_the_count(tmp_path, monkeypatch):
    """The count is the scan's, the rows are what Arrow yields: a reading path that loses a row
    cannot agree with it."""
    path = _write(tmp_path, HEADER + _row(1) + _row(2) + _row(3))
    parse = csv_reader._rows
    monkeypatch.setattr(csv_reader, "_rows", lambda *args: (part.slice(1) for part in parse(*args)))
    rejects: list[tuple] = []
    batches = READER.batches(path, 2, InputPolicy(), lambda *reject: rejects.append(reject))
    assert sum(batch.num_rows for batch in batches) + len(rejects) < READER.count(path) == 3


def test_rows_beyond_arrows_default_block_are_read_and_a_50_mb_body_is_too_large(tmp_path):
    nine_mib = "word, " * (9 * 2**20 // 6) + "\nlast line"
    fifty_mb = "word, " * (50_000_000 // 6)
    path = tmp_path / "in.csv"
    with path.open("w", encoding="utf-8") as handle:
        handle.write(HEADER + _row(1) + _row(2, f'"{nine_mib}"'))
        handle.write(_row(3, f'"{fifty_mb}"') + _row(4))
    table, stats = _documents(path)
    assert table.column("input_row").to_pylist() == [1, 2, 4]
    assert table.column("body").to_pylist()[1] == nine_mib
    assert [(reject["input_row"], reject["reason"]) for reject in stats.rejected] == [(3, "too_large")]
    # rejected by the scan, unparsed: far above what a body within max_body_bytes needs
    too_large = "line 5: the row has 50,000,0"
    assert stats.rejected[0]["detail"].startswith(too_large)
    assert "a CSV row may have with max_body_bytes=10,000,000" in stats.rejected[0]["detail"]


def test_a_row_above_what_a_csv_row_may_have_is_rejected_unparsed(tmp_path, monkeypatch):
    monkeypatch.setattr(csv_scan, "MAX_ROW_BYTES", 1_000)
    path = _write(tmp_path, HEADER + _row(1) + _row(2, "x" * 2_000) + _row(3))
    rows, rejects = _read(path)
    assert rows == [("1", 1), ("3", 3)]
    assert [reject[:3] for reject in rejects] == [(2, "", "too_large")]
    detail = rejects[0][3]
    assert detail.startswith("line 3: the row has 2,0") and "above the 1,000 a CSV row may have" in detail


def test_many_rows_whose_quotes_run_on_are_scanned_once_not_once_per_line(tmp_path):
    """Every line closes the quote of the line before and opens another: each line is a reject,
    and the scan from each line does not run to the end of the file again."""
    lines = 300_000
    path = _write(tmp_path, HEADER + 'x",b,c,d,e,"y\n' * lines + _row(lines + 1))
    READER.count(_write(tmp_path, HEADER + _row(1), "small.csv"))  # compiles the kernels if need be
    started = time.perf_counter()
    assert READER.count(path) == lines + 1
    # seconds; it takes about 0.1, and scanning to the end from each line would take many minutes:
    # the bound is loose so that a loaded machine cannot fail it
    assert time.perf_counter() - started < 60


@pytest.mark.parametrize(
    "encoding, named",
    [
        ("utf-16", "UTF-16"),
        ("utf-16-be", "UTF-16"),
        ("utf-32", "UTF-32"),
        ("utf-16-le", "UTF-16"),
        ("utf-32-le", "UTF-32"),
    ],
)
def test_a_utf16_or_utf32_file_says_to_re_encode_it(tmp_path, encoding, named):
    """With a byte-order mark (utf-16, utf-32; utf-16-be gets one written) or without (NUL bytes
    in the header)."""
    text = HEADER + _row(1)
    data = ("\ufeff" + text).encode(encoding) if encoding == "utf-16-be" else text.encode(encoding)
    path = _write(tmp_path, data)
    for read in (READER.schema, READER.count, count_input_records, read_documents):
        with pytest.raises(InputError) as raised:
            read(path)
        message = str(raised.value)
        assert str(path) in message and named in message, message
        assert f"iconv -f {named} -t UTF-8 {path}" in message, message


def test_a_utf8_byte_order_mark_is_read_as_before(tmp_path):
    path = _write(tmp_path, b"\xef\xbb\xbf" + (HEADER + _row(1, '"café"') + _row(2)).encode())
    assert _read(path) == ([("1", 1), ("2", 2)], [])
    assert read_documents(path).column("body").to_pylist() == ["café", "text"]


def test_bytes_that_are_not_utf8_are_still_replaced_and_counted_after_a_malformed_row(tmp_path):
    malformed = '1,test,example.com,2026-01-01,title 1,"a quote never closed\n'
    path = _write(tmp_path, (HEADER + malformed).encode() + _row(2, "caf\xe9").encode("latin-1"))
    table, stats = _documents(path)
    assert table.column("body").to_pylist() == ["caf\ufffd"]
    assert table.column("replaced_characters").to_pylist() == [1]
    assert table.column("input_row").to_pylist() == [2] and stats.rejected[0]["input_row"] == 1


def test_a_repeated_column_is_named(tmp_path):
    path = _write(tmp_path, "doc_id,source,domain,crawled_at,title,body,body\n" + _row(1, "a,b"))
    with pytest.raises(InputError, match=r"in\.csv: the header repeats column body; rename one\."):
        read_documents(path)


def test_a_header_whose_quote_never_closes_fails_with_its_line(tmp_path):
    path = _write(tmp_path, '\ndoc_id,"source,domain,crawled_at,title,body\n' + _row(1))
    for read in (READER.schema, READER.count):
        with pytest.raises(InputError, match=r"in\.csv: line 2: the header has a quoted column name that is"):
            read(path)


@pytest.mark.parametrize("separator, name", [(";", "semicolon"), ("\t", "tab"), ("|", "pipe")])
def test_a_file_separated_by_another_mark_says_which_and_its_conversion_command_runs(tmp_path, separator, name):
    """Not 'missing required columns', which no fields mapping could fix: the separator it saw,
    and a command that writes the comma-separated file, which then reads whole."""
    path = tmp_path / "pages.csv"
    path.write_text(f"doc_id{separator}body\na{separator}first page\nb{separator}\"second; page\"\n", encoding="utf-8")
    with pytest.raises(InputError) as raised:
        READER.schema(path)
    message = str(raised.value)
    assert message.startswith(
        f"{path}: the header is one column, {'doc_id' + separator + 'body'!r}, which a {name} splits: the file is "
        f"{name}-separated, and CSV input must be comma-separated. Convert it, e.g. "
    )
    command = message.split("Convert it, e.g. ", 1)[1].rsplit(", then give ", 1)[0]
    converted = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert converted.returncode == 0, converted.stderr
    target = tmp_path / "pages.comma.csv"
    assert message.endswith(f", then give {target} as the input.")
    assert READER.schema(target).names[:2] == ["doc_id", "body"]
    assert target.read_text(encoding="utf-8").splitlines() == ["doc_id,body", "a,first page", 'b,second; page']
