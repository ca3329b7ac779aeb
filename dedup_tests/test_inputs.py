"""Every bad input gets an error that names the file and the column or rows, and says what to do."""

from pathlib import Path

import pandas as pd
import pytest

import pyarrow as pa

from dedup_assets.core.read import (
    InputError,
    InputPolicy,
    InputStats,
    count_input_records,
    document_batches,
    read_documents,
)

from .conftest import THEIR_NAMES, FIXTURE, GraphRunner, document, write_csv


def test_fixture_reads_in_file_order_with_utc_timestamps_and_row_numbers():
    table = read_documents(FIXTURE)
    assert table.num_rows == 24
    assert table.column("input_row").to_pylist() == list(range(1, 25))
    assert str(table.schema.field("crawled_at").type) == "timestamp[us]"


def test_extra_columns_are_kept_after_the_base_columns(tmp_path):
    path = write_csv(tmp_path / "in.csv", [document("a", "text", warc_record_id="<urn:uuid:1>")])
    assert read_documents(path).column_names[6:] == [
        "warc_record_id", "replaced_characters", "source_file", "input_row"
    ]


def test_offsets_are_converted_to_utc_and_plain_dates_accepted(tmp_path):
    path = write_csv(
        tmp_path / "in.csv",
        [document("a", "x", crawled_at="2026-03-01T10:00:00+02:00"), document("b", "y", crawled_at="2026-03-01")],
    )
    stamps = read_documents(path).column("crawled_at").to_pylist()
    assert [str(s) for s in stamps] == ["2026-03-01 08:00:00", "2026-03-01 00:00:00"]


def test_parquet_with_integer_ids_bom_csv_and_embedded_newlines(tmp_path):
    rows = [document("b", "two"), document("a", 'one, "quoted"\nsecond line')]
    parquet = tmp_path / "in.parquet"
    frame = pd.DataFrame(rows)
    frame.assign(doc_id=[2, 1]).to_parquet(parquet, index=False)
    assert read_documents(parquet).column("doc_id").to_pylist() == ["2", "1"]
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + frame.to_csv(index=False).encode())
    assert read_documents(bom).column("body").to_pylist() == ["two", 'one, "quoted"\nsecond line']


def _error_for(path: Path, **policy) -> str:
    with pytest.raises(InputError) as raised:
        read_documents(path, policy=InputPolicy(**policy))
    return str(raised.value)


def _rejected(path: Path, **policy) -> tuple[pa.Table, InputStats]:
    stats = InputStats()
    table = pa.Table.from_batches(list(document_batches(path, stats, 8, InputPolicy(**policy))))
    return table, stats


def test_missing_column_is_named(tmp_path):
    path = write_csv(tmp_path / "in.csv", [{"doc_id": "a", "text": "x"}])
    with pytest.raises(InputError) as raised:
        read_documents(path)
    message = str(raised.value)
    assert str(path) in message and "missing required column(s) body." in message
    # the columns the file has, and not the ones the reader adds
    assert "Found: doc_id, text." in message and "replaced_characters" not in message
    assert raised.value.fix == {"fields": {"body": "text"}}  # the missing one, mapped to the likely column


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_fields_map_our_columns_to_the_files_own(tmp_path, suffix):
    rows = [document("a", "alpha beta"), document("b", "gamma delta", lang="en")]
    frame = pd.DataFrame(rows).rename(columns=THEIR_NAMES)
    path = tmp_path / f"theirs{suffix}"
    frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_parquet(path, index=False)
    assert "missing required column(s) doc_id, body." in _error_for(path)
    table = read_documents(path, policy=InputPolicy(fields=THEIR_NAMES))
    assert table.column("doc_id").to_pylist() == ["a", "b"]
    assert table.column("body").to_pylist() == ["alpha beta", "gamma delta"]
    assert "lang" in table.column_names and "text" not in table.column_names


def test_a_field_mapped_onto_a_column_the_file_also_has_is_refused(tmp_path):
    path = write_csv(tmp_path / "both.csv", [{**document("a", "x"), "text": "y"}])
    message = _error_for(path, fields={"body": "text"})
    assert "fields maps body to text, but the file also has a body column" in message


@pytest.mark.parametrize(
    "fields, refusal",
    [
        ({"title": "text", "body": "text"}, "fields maps more than one of our columns to text"),
        ({"input_row": "line"}, "fields maps input_row, which the pipeline fills itself"),
        ({"source_file": "file"}, "fields maps source_file, which the pipeline fills itself"),
    ],
)
def test_a_mapping_that_would_lose_or_fake_a_column_is_refused(tmp_path, fields, refusal):
    path = write_csv(tmp_path / "in.csv", [{**document("a", "x"), "text": "y", "line": 1, "file": "f"}])
    assert refusal in _error_for(path, fields=fields)


def test_bad_rows_are_rejected_with_reasons_and_nothing_is_lost(tmp_path):
    rows = [document(f"d{i}", "x") for i in range(12)] + [
        document("", "no id"),
        document("late", "y", crawled_at="yesterday"),
        document("big", "z" * 50),
        document("d3", "again"),
    ]
    table, stats = _rejected(write_csv(tmp_path / "in.csv", rows), max_body_bytes=40)
    assert table.num_rows == 12 and stats.rows == 16 and stats.documents == 12
    assert [(r["input_row"], r["doc_id"], r["reason"]) for r in stats.rejected] == [
        (13, "", "missing_field"),
        (14, "late", "invalid_crawled_at"),
        (15, "big", "too_large"),
        (16, "d3", "duplicate_doc_id"),
    ]
    assert stats.rejected[3]["detail"] == "doc_id first seen at row 4"
    assert stats.rejected_by_reason == {"missing_field": 1, "invalid_crawled_at": 1, "too_large": 1, "duplicate_doc_id": 1}


def test_strict_mode_fails_on_the_first_bad_row_with_what_to_fix(tmp_path):
    empty = write_csv(tmp_path / "empty_id.csv", [document("a", "x"), document("", "y")])
    assert "doc_id is empty at row 2" in _error_for(empty, fail_on_reject=True)
    rows = [document(f"d{i}", "x") for i in range(30)] + [document("d3", "again")]
    repeated = write_csv(tmp_path / "repeated.csv", rows)
    assert "row 31: column doc_id repeats 'd3' (doc_id first seen at row 4). Give each document a unique doc_id" in _error_for(repeated, fail_on_reject=True)
    late = write_csv(tmp_path / "late.csv", [document("a", "x"), document("b", "y", crawled_at="yesterday")])
    message = _error_for(late, fail_on_reject=True)
    assert "crawled_at cannot be parsed at row 2 (doc_id 'b')" in message and "ISO 8601" in message


def test_empty_file_and_header_only(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert _error_for(empty) == (
        f"{empty}: the file is empty. Expected a header row with at least the columns doc_id, body "
        "and one row per document."
    )
    empty_dump = tmp_path / "empty.jsonl"
    empty_dump.write_text("")
    assert _error_for(empty_dump) == f"{empty_dump}: the file is empty. Expected a JSONL file with one record per document."
    header_only = write_csv(tmp_path / "header.csv", [], columns=list(document("a", "x")))
    assert "no document rows" in _error_for(header_only)


def test_wrong_extension_missing_file_and_unreadable_files(tmp_path):
    (tmp_path / "in.txt").write_text("doc_id,body\n")
    assert "unsupported file type '.txt'" in _error_for(tmp_path / "in.txt")
    assert "no such file" in _error_for(tmp_path / "absent.csv")
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet at all")
    assert "cannot be read as Parquet" in _error_for(broken)



def test_bytes_that_are_not_utf8_are_replaced_and_counted(tmp_path):
    latin1 = tmp_path / "latin1.csv"
    latin1.write_bytes(
        "doc_id,source,domain,crawled_at,title,body\na,s,d,2026-01-01,t,caf\xe9 cr\xe8me\nb,s,d,2026-01-01,t,plain\n".encode("latin-1")
    )
    table = read_documents(latin1)
    assert table.column("body").to_pylist() == ["caf\ufffd cr\ufffdme", "plain"]
    assert table.column("replaced_characters").to_pylist() == [2, 0]


def test_input_records_are_counted_independently(tmp_path):
    path = write_csv(tmp_path / "in.csv", [document(f"d{i}", 'multi\nline "quoted"') for i in range(7)])
    assert count_input_records(path) == 7


def test_a_release_folder_as_input_reads_its_kept_documents_with_their_clusters_as_input_columns(tmp_path):
    """docs/input-formats.md: an old release, named as the input, is read again: its kept
    documents only (not its other tables and reports), their cluster_id and cluster_size kept as
    the input's own input_cluster_id and input_cluster_size."""
    first = GraphRunner(tmp_path / "first")
    assert first.run(FIXTURE).success
    again = GraphRunner(tmp_path / "again")
    assert again.run(first.output_dir).success
    documents = again.table("documents")
    kept = first.table("deduped_documents")
    assert documents["doc_id"].tolist() == kept["doc_id"].tolist()
    assert documents["input_cluster_id"].tolist() == kept["cluster_id"].tolist()
    assert set(documents["source_file"].map(lambda name: Path(name).parent.name)) == {"deduped_documents"}
    # the kept documents are distinct: nothing more to remove
    assert again.manifest()["counts"]["removed_document_rows"] == 0
