"""JSONL input with a field mapping, and a folder of mixed files read as one corpus."""

import gzip
import json

import pyarrow as pa
import pytest
import pyarrow.parquet  # noqa: F401  (pa.parquet)

from dedup_assets.core.read import InputError, InputPolicy, InputStats, count_input_records, document_batches

from .conftest import document, write_csv
from .warc_fixtures import ARTICLE, write_crawl


def _read(source, **policy):
    stats = InputStats()
    table = pa.Table.from_batches(list(document_batches(source, stats, 100, InputPolicy(**policy))))
    return table, stats


def _jsonl_lines():
    return [
        json.dumps({"id": "j1", "text": ARTICLE, "url": "https://blog.example.com/a", "timestamp": "2026-02-01T00:00:00Z"}),
        json.dumps({"id": 2, "text": "Café résumé in NFD: Cafe\u0301", "url": "https://news.example.org/b", "timestamp": "2026-02-02"}),
        "{not json",
        json.dumps({"id": "j4", "url": "https://blog.example.com/no-text", "timestamp": "2026-02-03"}),
        json.dumps(["a", "list"]),
    ]


def test_jsonl_defaults_fit_common_dumps_and_bad_lines_are_rejected(tmp_path):
    path = tmp_path / "dump.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(_jsonl_lines()) + "\n")
    table, stats = _read(path)
    assert table.column("doc_id").to_pylist() == ["j1", "2"]
    assert table.column("domain").to_pylist() == ["blog.example.com", "news.example.org"]
    assert table.column("url").to_pylist()[0] == "https://blog.example.com/a"
    assert table.column("body").to_pylist()[1].endswith("Caf\u00e9")  # NFC on read
    assert [(r["input_row"], r["reason"]) for r in stats.rejected] == [
        (3, "decode_error"), (4, "missing_field"), (5, "decode_error")
    ]
    assert stats.rows == 5 == count_input_records(path)


def test_jsonl_field_mapping_and_replaced_bytes_are_counted(tmp_path):
    path = tmp_path / "custom.jsonl"
    path.write_bytes(
        json.dumps({"key": "k1", "content": "plain text", "fetched": "2026-01-05"}).encode()
        + b"\n"
        + b'{"key": "k2", "content": "bad \xff byte", "fetched": "2026-01-06"}\n'
    )
    table, stats = _read(path, fields={"doc_id": "key", "body": "content", "crawled_at": "fetched"})
    assert table.column("doc_id").to_pylist() == ["k1", "k2"]
    assert table.column("replaced_characters").to_pylist() == [0, 1]
    assert table.column("body").to_pylist()[1] == "bad \ufffd byte"
    assert stats.rejected == []


def test_a_cut_one_member_gzip_rejects_every_line_and_says_nothing_is_left(tmp_path):
    """Its lines cannot be trusted (the member's length and CRC are never checked), so each is a
    ``truncated`` reject, and with no document left the run stops saying so."""
    path = tmp_path / "cut.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        for number in range(200):
            handle.write(json.dumps({"id": f"d{number}", "text": ARTICLE, "timestamp": "2026-02-01"}) + "\n")
    path.write_bytes(path.read_bytes()[:-300])
    stats = InputStats()
    with pytest.raises(InputError) as raised:
        list(document_batches(path, stats))
    lines = count_input_records(path)
    assert stats.rows == lines == len(stats.rejected) and stats.rejected_by_reason == {"truncated": lines}
    assert str(raised.value).startswith(
        f"{path}: all {lines:,} records were rejected (truncated {lines:,}), so nothing is left to "
        f"deduplicate. The first: {path} record 1: truncated: "
    )


def test_a_folder_of_mixed_files_is_one_corpus_with_per_file_rows(tmp_path):
    folder = tmp_path / "inputs"
    folder.mkdir()
    write_csv(folder / "a.csv", [document("c1", "first csv row"), document("shared", "from csv")])
    with (folder / "b.jsonl").open("w") as handle:
        handle.write(json.dumps({"id": "shared", "text": "from jsonl", "timestamp": "2026-01-01"}) + "\n")
        handle.write(json.dumps({"id": "j2", "text": "jsonl row", "timestamp": "2026-01-01"}) + "\n")
    write_crawl(folder / "c.warc.gz", truncate_last=False)
    (folder / "notes.txt").write_text("ignored: not an input type")
    table, stats = _read(folder)
    files = {path.split("/")[-1] for path in table.column("source_file").to_pylist()}
    assert files == {"a.csv", "b.jsonl", "c.warc.gz"}
    assert {"url", "warc_record_id", "warc_offset"} <= set(table.column_names)
    duplicate = [r for r in stats.rejected if r["reason"] == "duplicate_doc_id"]
    assert duplicate[0]["input_row"] == 1 and duplicate[0]["detail"].endswith("a.csv")
    assert table.num_rows + len(stats.rejected) == stats.rows == count_input_records(folder)


def test_source_format_overrides_the_extension_and_csv_text_is_nfc(tmp_path):
    export = tmp_path / "export.txt"
    export.write_text(json.dumps({"id": "t1", "text": "Cafe\u0301 menu", "timestamp": "2026-01-01"}) + "\n")
    table, _ = _read(export, source_format="jsonl")
    assert table.column("body").to_pylist() == ["Caf\u00e9 menu"]
    csv_path = write_csv(tmp_path / "nfd.csv", [document("n1", "Re\u0301sume\u0301 text", title="Cafe\u0301")])
    table, _ = _read(csv_path)
    assert table.column("body").to_pylist() == ["R\u00e9sum\u00e9 text"]
    assert table.column("title").to_pylist() == ["Caf\u00e9"]


def test_parquet_text_columns_of_other_types_are_refused_by_name_and_integer_ids_read(tmp_path):
    """A number read as text would be a different text, unseen; a whole-number id is its digits."""
    columns = {
        "doc_id": pa.array([1.0, 2.0]),
        "source": pa.array([7, 8]),
        "domain": ["a.com", "b.com"],
        "crawled_at": pa.array([20260101, 20260102]),
        "title": ["t", "t"],
        "body": ["x", "y"],
    }
    path = tmp_path / "typed.parquet"
    pa.parquet.write_table(pa.table(columns), path)
    with pytest.raises(InputError, match=r"typed\.parquet: column doc_id is double, not text"):
        list(document_batches(path, InputStats()))
    pa.parquet.write_table(pa.table({**columns, "doc_id": pa.array([1, 2])}), path)
    with pytest.raises(InputError, match=r"typed\.parquet: column source is int64, not text"):
        list(document_batches(path, InputStats()))
    pa.parquet.write_table(pa.table({**columns, "doc_id": pa.array([1, 2]), "source": ["s", "s"]}), path)
    stats = InputStats()
    with pytest.raises(InputError, match=r"all 2 records were rejected \(invalid_crawled_at 2\)"):
        list(document_batches(path, stats))
    assert [r["doc_id"] for r in stats.rejected] == ["1", "2"]
