"""One input contract for every format (core/read/input_contract.py): doc_id and body are
required, the other columns are filled in the same way whether the input is CSV, Parquet or JSONL,
and an undated copy is kept only where no dated one is."""

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dedup_assets.core.read import InputError, InputPolicy, InputStats, count_input_records, document_batches

from .conftest import document, write_csv

BASE = ["doc_id", "source", "domain", "crawled_at", "title", "body"]
def _read(path: Path, **policy) -> tuple[pa.Table, InputStats]:
    stats = InputStats()
    return pa.Table.from_batches(list(document_batches(path, stats, 100, InputPolicy(**policy)))), stats


def _write(rows: list[dict], path: Path) -> Path:
    """``rows`` in the format of ``path``'s name; a key a row lacks is an empty CSV cell, a
    null Parquet value and a field the JSONL line leaves out."""
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    elif path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        write_csv(path, rows)
    return path


_ROWS = [
    {"key": "a", "content": "alpha beta", "link": "https://News.Example.org:8443/a?x=1"},
    {"key": "b", "content": "gamma delta"},
    {"key": "c", "content": "", "link": "https://blog.example.com/c", "site": "own.example.net"},
    {"key": "d", "content": "late", "fetched": "2026-01-31T12:00:00+02:00", "origin": "crawl-7"},
]
_MAPPING = {"doc_id": "key", "body": "content", "url": "link", "domain": "site", "crawled_at": "fetched", "source": "origin"}


@pytest.mark.parametrize("name", ["in.csv", "in.parquet", "in.jsonl"])
def test_every_format_fills_in_what_the_input_lacks_alike(tmp_path, name):
    columns = sorted({key for row in _ROWS for key in row})
    rows = [{key: row.get(key) for key in columns} for row in _ROWS] if name != "in.jsonl" else _ROWS
    table, stats = _read(_write(rows, tmp_path / name), fields=_MAPPING)
    assert stats.rejected == [] and stats.rows == 4 == count_input_records(tmp_path / name)
    got = [{key: row[key] for key in BASE} for row in table.to_pylist()]
    assert [(row["source"], row["domain"], row["title"]) for row in got] == [
        (name, "news.example.org", ""),  # the url's host, lower-cased and without its port
        (name, "", ""),  # no url: no domain
        (name, "own.example.net", ""),  # a domain the input gives wins over its url's host
        ("crawl-7", "", ""),
    ]
    assert [str(row["crawled_at"]) for row in got] == ["None", "None", "None", "2026-01-31 10:00:00"]
    assert [row["body"] for row in got] == ["alpha beta", "gamma delta", "", "late"]  # an empty body is a document


@pytest.mark.parametrize("name", ["in.csv", "in.parquet"])
def test_a_file_without_doc_id_or_body_is_refused_naming_only_those(tmp_path, name):
    path = _write([{"key": "a", "text": "x", "title": "t"}], tmp_path / name)
    with pytest.raises(InputError) as raised:
        _read(path)
    message = str(raised.value)
    assert f"{path}: missing required column(s) doc_id, body. Found: key, text, title. Every input needs doc_id and body" in message
    # the fix maps the columns such a dump's usually are, and reads the file
    assert raised.value.fix == {"fields": {"doc_id": "key", "body": "text"}}
    table, _ = _read(path, **raised.value.fix)
    assert table.column("doc_id").to_pylist() == ["a"] and table.column("body").to_pylist() == ["x"]
    with pytest.raises(InputError, match=r"missing required column\(s\) body\.") as again:
        _read(path, fields={"doc_id": "key", "body": "content"})
    assert again.value.fix == {"fields": {"doc_id": "key", "body": "text"}}  # the given mapping, completed


def test_a_jsonl_of_only_ids_and_texts_is_every_line_a_document_or_a_reject_with_a_reason(tmp_path):
    path = _write(
        [{"id": "a", "text": "first page"}, {"id": "b", "text": ""}, {"id": "c"}, {"id": 4, "text": None}, {"text": "x"}],
        tmp_path / "dump.jsonl",
    )
    table, stats = _read(path)
    assert table.select(BASE).to_pylist() == [
        {"doc_id": doc_id, "source": "dump.jsonl", "domain": "", "crawled_at": None, "title": "", "body": body}
        for doc_id, body in [("a", "first page"), ("b", ""), ("4", "")]
    ]
    assert [(r["input_row"], r["reason"], r["detail"]) for r in stats.rejected] == [
        (3, "missing_field", "no text"), (5, "missing_field", "no id")
    ]
    assert stats.rows == 5 == count_input_records(path)


def test_a_date_that_does_not_parse_is_still_rejected_while_an_empty_one_is_null(tmp_path):
    path = write_csv(tmp_path / "in.csv", [document("a", "x", crawled_at=""), document("b", "y", crawled_at="soon")])
    table, stats = _read(path)
    assert table.column("crawled_at").to_pylist() == [None]
    assert [(r["doc_id"], r["reason"]) for r in stats.rejected] == [("b", "invalid_crawled_at")]


@pytest.mark.parametrize("cluster_mode", ["components", "star"])
def test_an_undated_copy_is_kept_only_where_no_dated_one_is(runner, tmp_path, cluster_mode):
    """Copies of one text: the dated one is kept although an undated one has the smallest
    doc_id; between undated copies the smallest doc_id. Nothing else decides."""
    text = " ".join(f"word{number}" for number in range(60))
    other = " ".join(f"other{number}" for number in range(60))
    rows = [
        document("a-undated", text, crawled_at=""),
        document("z-dated", text, crawled_at="2026-01-01"),
        document("b-undated", text, crawled_at=""),
        document("c-undated", other, crawled_at=""),
        document("d-undated", other, crawled_at=""),
    ]
    result = runner.run(write_csv(tmp_path / "in.csv", rows), cluster_mode=cluster_mode)
    assert result.success
    clusters = runner.table("clusters").set_index("doc_id")
    assert clusters.loc[["z-dated", "a-undated", "b-undated"], "representative_rank"].tolist() == [1, 2, 3]
    assert set(clusters["representative_doc_id"]) == {"z-dated", "c-undated"}
    assert sorted(runner.table("deduped_documents")["doc_id"]) == ["c-undated", "z-dated"]
