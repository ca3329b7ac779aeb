"""Every bad input gets an error that names the file and the column or rows, and says what to do."""

from pathlib import Path

import pandas as pd
import pytest

from dedup_assets.core.inputs import InputError, read_documents

from .conftest import FIXTURE, document, write_csv


def test_fixture_reads_with_utc_timestamps_sorted_by_doc_id():
    frame = read_documents(FIXTURE)
    assert len(frame) == 24
    assert frame["doc_id"].is_monotonic_increasing
    assert str(frame["crawled_at"].dtype).startswith("datetime64")


def test_extra_columns_are_kept_after_the_base_columns(tmp_path):
    path = write_csv(tmp_path / "in.csv", [document("a", "text", warc_record_id="<urn:uuid:1>")])
    frame = read_documents(path)
    assert list(frame.columns)[6:] == ["warc_record_id"]


def test_parquet_input_and_bom_csv(tmp_path):
    rows = [document("b", "two"), document("a", "one")]
    parquet = tmp_path / "in.parquet"
    pd.DataFrame(rows).to_parquet(parquet, index=False)
    assert read_documents(parquet)["doc_id"].tolist() == ["a", "b"]
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + pd.DataFrame(rows).to_csv(index=False).encode())
    assert read_documents(bom)["doc_id"].tolist() == ["a", "b"]


def _error_for(path: Path) -> str:
    with pytest.raises(InputError) as raised:
        read_documents(path)
    return str(raised.value)


def test_missing_column_is_named(tmp_path):
    path = write_csv(tmp_path / "in.csv", [{"doc_id": "a", "body": "x"}])
    message = _error_for(path)
    assert str(path) in message and "missing required column(s) source, domain, crawled_at, title" in message


def test_empty_doc_id_names_the_line(tmp_path):
    path = write_csv(tmp_path / "in.csv", [document("a", "x"), document("", "y")])
    assert "doc_id is empty at line 3" in _error_for(path)


def test_duplicate_doc_id_names_value_and_lines(tmp_path):
    path = write_csv(tmp_path / "in.csv", [document("a", "x"), document("b", "y"), document("a", "z")])
    assert "'a' at line 2, line 4" in _error_for(path)


def test_unparseable_crawled_at_names_line_and_value(tmp_path):
    path = write_csv(tmp_path / "in.csv", [document("a", "x"), document("b", "y", crawled_at="yesterday")])
    message = _error_for(path)
    assert "crawled_at cannot be parsed at line 3" in message and "'yesterday'" in message and "ISO 8601" in message


def test_empty_file_and_header_only(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert "the file is empty" in _error_for(empty)
    header_only = write_csv(tmp_path / "header.csv", [], columns=list(document("a", "x")))
    assert "no document rows" in _error_for(header_only)


def test_wrong_extension_missing_file_and_unreadable_files(tmp_path):
    assert "unsupported file type '.txt'" in _error_for(tmp_path / "in.txt")
    assert "no such file" in _error_for(tmp_path / "absent.csv")
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet at all")
    assert "cannot be read as Parquet" in _error_for(broken)
    latin1 = tmp_path / "latin1.csv"
    latin1.write_bytes("doc_id,source,domain,crawled_at,title,body\na,s,d,2026-01-01,t,caf\xe9\n".encode("latin-1"))
    assert "not valid UTF-8" in _error_for(latin1)
