"""A Parquet input's bodies read in place (``parquet_bodies: in_place``): documents is a view over
the validated rows and the files' body column, and everything built on it is what the copy
gives, byte for byte; a file changed after documents read it is refused with the command that
reads it again."""

from __future__ import annotations

import os
import random
import unicodedata
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster import Failure

from dedup_assets.core.read import ingest
from dedup_assets.core.util.errors import InconsistentTables
from dedup_assets.core.read.ingest import build_documents, document_bodies
from dedup_assets.core.settings.input import InputPolicy
from dedup_assets.core.read import (
    InputStats,
    bodies_in_place,
    document_batches,
    document_rows,
)
from dedup_assets.core.read.documents import KEPT
from dedup_assets.core.storage.store import rows_with_ids, write_table
from dedup_assets.core.storage.tables import READ_IN_PLACE

from .conftest import HARD_FIXTURE, GraphRunner, document, sha256_of_files

DECOMPOSED = unicodedata.normalize("NFD", "café déjà vu naïve résumé piñata über straße")


def _parquet(path, rows: list[dict], body_type=pa.string()):
    table = pa.Table.from_pylist(rows)
    table = table.set_column(table.schema.get_field_index("body"), "body", table["body"].cast(body_type))
    # row groups out of step with the batches; raw bytes, so that a same-sized edit keeps the size
    pq.write_table(table, path, row_group_size=7, compression="none", write_statistics=False)
    return path


def _awkward_rows() -> list[dict]:
    """The hard fixture with rejected rows among them, a body validation changes (NFC), and a
    missing one."""
    rows = pd.read_csv(HARD_FIXTURE, dtype=str, keep_default_na=False).to_dict("records")
    rows.insert(3, {**rows[0]})  # a repeated doc_id: rejected, the first kept
    rows.insert(9, document("bad-date", "some words here and there", crawled_at="soon"))
    rows.insert(12, document("decomposed", DECOMPOSED))
    rows.insert(15, document("decomposed-copy", DECOMPOSED))
    rows.append(document("no-body", None))
    return rows


def test_only_an_input_of_parquet_files_with_a_text_body_is_read_in_place(tmp_path, monkeypatch):
    rows = [document("a", "one two three")]
    text = _parquet(tmp_path / "text.parquet", rows)
    assert bodies_in_place(text) == [(text, "body")]
    monkeypatch.chdir(tmp_path)  # a relative path is kept absolute, for readers in another folder
    assert bodies_in_place(Path("text.parquet")) == [(text.resolve(), "body")]
    renamed = tmp_path / "renamed.parquet"
    pq.write_table(pa.Table.from_pylist(rows).rename_columns(["doc_id", "source", "domain", "crawled_at", "title", "text"]), renamed)
    assert bodies_in_place(renamed, InputPolicy(fields={"body": "text"})) == [(renamed, "text")]
    assert bodies_in_place(_parquet(tmp_path / "bytes.parquet", rows, pa.binary())) is None
    pd.DataFrame(rows).to_csv(tmp_path / "rows.csv", index=False)
    assert bodies_in_place(tmp_path / "rows.csv") is None
    assert bodies_in_place(tmp_path) is None  # a folder with a CSV among its Parquet files
    assert bodies_in_place(tmp_path / "missing.parquet") is None  # the stream says what is wrong
    # a column named like the rows' flag, or a name DuckDB would read as a pattern: copied
    assert bodies_in_place(_parquet(tmp_path / "flagged.parquet", [{**rows[0], KEPT.upper(): True}])) is None
    assert bodies_in_place(_parquet(tmp_path / "part[1].parquet", rows)) is None


def test_document_rows_hold_every_record_and_only_the_bodies_validation_changed(tmp_path):
    path = _parquet(tmp_path / "in.parquet", _awkward_rows())
    copied_stats, rows_stats = InputStats(), InputStats()
    copied = pa.Table.from_batches(list(document_batches(path, copied_stats, 5)))
    rows = pa.Table.from_batches(list(document_rows(path, [path], rows_stats, 5)))
    assert rows.num_rows == rows_stats.rows == len(_awkward_rows())
    assert rows.column_names == [*copied.column_names, KEPT]
    kept = rows.filter(rows[KEPT])
    assert kept.drop_columns([KEPT, "body"]) == copied.drop_columns(["body"])
    bodies = dict(zip(kept["doc_id"].to_pylist(), kept["body"].to_pylist()))
    assert bodies["decomposed"] == unicodedata.normalize("NFC", DECOMPOSED)
    assert bodies["no-body"] == ""
    assert {doc_id for doc_id, body in bodies.items() if body is not None} == {"decomposed", "decomposed-copy", "no-body"}
    assert rows.filter(pa.compute.invert(rows[KEPT]))["doc_id"].to_pylist() == [_awkward_rows()[0]["doc_id"], "bad-date"]
    for field in ("rows", "documents", "empty_bodies", "rejected", "rejected_by_reason"):
        assert getattr(rows_stats, field) == getattr(copied_stats, field), field


def _release(runner: GraphRunner) -> dict[str, str]:
    return {name: sha256 for name, sha256 in sha256_of_files(runner.output_dir).items() if name != "manifest.json"}


def _table_kind(runner: GraphRunner, name: str) -> str:
    with duckdb.connect(str(runner.database), read_only=True) as connection:
        return connection.execute(
            "select table_type from information_schema.tables where table_schema = 'dedup' and table_name = ?", [name]
        ).fetchall()[0][0]


@pytest.mark.parametrize("files", [1, 2], ids=["file", "folder"])
def test_in_place_gives_the_tables_and_release_of_the_copy(tmp_path, files):
    rows = _awkward_rows()
    folder = tmp_path / "input"
    folder.mkdir()
    cut = len(rows) // 2 if files == 2 else len(rows)
    _parquet(folder / "part-1.parquet", rows[:cut])
    if files == 2:
        _parquet(folder / "part-2.parquet", rows[cut:])
    source = folder if files == 2 else folder / "part-1.parquet"
    in_place, copy = GraphRunner(tmp_path / "in_place"), GraphRunner(tmp_path / "copy")
    assert in_place.run(source).success
    assert copy.run(source, parquet_bodies="copy").success
    assert _table_kind(in_place, "documents") == "VIEW" and _table_kind(copy, "documents") == "BASE TABLE"
    for name in ("documents", "rejected_documents", "fingerprinted", "scored_pairs", "clusters", "deduped_documents", "recall_audit"):
        assert in_place.table(name).equals(copy.table(name)), name
    assert _release(in_place) == _release(copy)
    assert in_place.manifest()["counts"] == copy.manifest()["counts"]
    assert [entry[0] for entry in in_place.lineage("clusters")["input_read_in_place"]] == sorted(
        str(path) for path in folder.glob("*.parquet")
    )
    assert "input_read_in_place" not in copy.lineage("clusters")


def test_a_few_bodies_read_by_row_number_are_the_views(tmp_path, monkeypatch):
    """document_bodies reads the rows it is asked for from the files by row number; what it gives
    is what the plain read of the view gives, in the order asked, over files of several row
    groups, rejected records, bodies validation changed, and a name with a quote."""
    rows = _awkward_rows()
    folder = tmp_path / "input"
    folder.mkdir()
    _parquet(folder / "part-1.parquet", rows[:11])
    _parquet(folder / "part-2 it's.parquet", rows[11:])
    with duckdb.connect(str(tmp_path / "run.duckdb")) as connection:
        connection.execute("create schema dedup")
        build, stats = build_documents(folder, 5, InputPolicy(), lambda message: None, "dedup.document_rows")
        write_table(connection, "dedup.documents", build, lambda: {READ_IN_PLACE: stats.read_in_place})
        doc_ids = connection.execute("select doc_id from dedup.documents").fetchall()
        asked = pa.array(random.Random(5).sample([doc_id for (doc_id,) in doc_ids], len(doc_ids)) + ["not-a-document"])
        plain = rows_with_ids(connection, "dedup.documents", asked, ["body"])
        # a view whose lineage does not name the files listed (another engine's) is read the plain way
        connection.execute("update dedup.in_place_files set path = path || '.moved'")
        assert document_bodies(connection, "dedup.documents", asked).equals(plain)
        connection.execute("update dedup.in_place_files set path = replace(path, '.moved', '')")
        # the plain read is not what answers
        monkeypatch.setattr(ingest, "rows_with_ids", lambda *args: pytest.fail("read the view"))
        by_row = document_bodies(connection, "dedup.documents", asked)
        any_order = document_bodies(connection, "dedup.documents", asked, in_order=False)
    assert by_row.equals(plain)
    assert any_order.sort_by("doc_id").equals(plain.sort_by("doc_id"))
    assert by_row.num_rows == len(doc_ids) and unicodedata.normalize("NFC", DECOMPOSED) in by_row["body"].to_pylist()


def _documents_view(tmp_path, folder) -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect(str(tmp_path / "run.duckdb"))
    connection.execute("create schema dedup")
    build, stats = build_documents(folder, 5, InputPolicy(), lambda message: None, "dedup.document_rows")
    write_table(connection, "dedup.documents", build, lambda: {READ_IN_PLACE: stats.read_in_place})
    return connection


def test_an_input_with_a_column_read_by_row_number_adds_is_read_the_plain_way(tmp_path):
    """read_parquet(filename = true) refuses a file that has a column named filename (WARC
    tooling's name for its file): such an input is listed in no in_place_files, and its bodies
    are read through the view."""
    folder = tmp_path / "input"
    folder.mkdir()
    _parquet(folder / "crawl.parquet", [{**row, "Filename": "CC-MAIN-1.warc.gz"} for row in _awkward_rows()])
    with _documents_view(tmp_path, folder) as connection:
        assert connection.execute("select count(*) from dedup.in_place_files").fetchall() == [(0,)]
        asked = pa.array([doc_id for (doc_id,) in connection.execute("select doc_id from dedup.documents").fetchall()])
        assert document_bodies(connection, "dedup.documents", asked).equals(
            rows_with_ids(connection, "dedup.documents", asked, ["body"])
        )


def test_rows_not_where_document_rows_places_them_are_refused_naming_what_to_rebuild(tmp_path):
    folder = tmp_path / "input"
    folder.mkdir()
    rows = _awkward_rows()
    _parquet(folder / "part-1.parquet", rows[:11])
    _parquet(folder / "part-2.parquet", rows[11:])
    with _documents_view(tmp_path, folder) as connection:
        asked = pa.array([doc_id for (doc_id,) in connection.execute("select doc_id from dedup.documents").fetchall()])
        # the second file said to start a row later: its last row is past its end
        connection.execute("update dedup.in_place_files set first_row = first_row - 1 where first_row > 0")
        with pytest.raises(InconsistentTables, match="not where document_rows places them.*re-materialize documents"):
            document_bodies(connection, "dedup.documents", asked)


def test_a_file_changed_after_documents_read_it_is_refused_with_the_command(tmp_path):
    path = _parquet(tmp_path / "in.parquet", _awkward_rows())
    runner = GraphRunner(tmp_path / "run")
    assert runner.run(path, selection=["documents", "rejected_documents"]).success
    changed = _awkward_rows()
    changed[5] = {**changed[5], "body": changed[5]["body"] + " and one more sentence at the end"}
    _parquet(path, changed)
    with pytest.raises(Failure) as raised:
        runner.run(path, selection="fingerprinted")
    message = raised.value.description
    assert f"The input has changed since documents read it: {path} has " in message
    # run from Python (materialize): the assets to run again, with the same run config
    assert message.endswith("Materialize group:deduplication with the same run config.")


def test_a_release_is_refused_when_the_file_changed_but_kept_its_size_and_time(tmp_path):
    rows = _awkward_rows()
    path = _parquet(tmp_path / "in.parquet", rows)
    runner = GraphRunner(tmp_path / "run")
    assert runner.run(path).success
    before = path.stat()
    swapped = [*rows]
    swapped[5] = {**rows[5], "body": rows[5]["body"].swapcase()}  # same bytes in number
    _parquet(path, swapped)
    assert path.stat().st_size == before.st_size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    shown = {name: data for name, data in _release(runner).items()}
    with pytest.raises(Failure) as raised:
        runner.run(path, selection="manifest")
    assert raised.value.description.startswith(f"{path}: changed since documents read it: its ")
    assert "and its bytes too (hashed again). The release was not written" in raised.value.description
    assert raised.value.description.endswith("Materialize group:deduplication with the same run config.")
    assert _release(runner) == shown
