"""File names are literal: a name with ``*``, ``?`` or ``[`` is read as itself, once, by every
reader, by the in-place documents view and by the batch folder, and only DEDUP_INPUT itself can
be a pattern. What the pipeline writes inside the input folder is not read back as input."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dedup_assets.core.read.batches import BatchError, find_batches, key_path_name
from dedup_assets.core.pipeline.library import run_batch, run_library
from dedup_assets.core.read import InputError, InputStats, document_batches, read_documents
from dedup_assets.core.read.files import describe_input, input_files
from dedup_assets.core.settings.input import InputPolicy
from dedup_assets.core.storage.tables import READ_IN_PLACE, duckdb_file

from .conftest import document, write_csv


def _rows(name: str, count: int = 2) -> list[dict]:
    """Documents whose ids name their file, with bodies unlike any other file's."""
    return [document(f"{name}#{number}", _words(f"{name}#{number}")) for number in range(count)]


def _words(seed: str) -> str:
    """Forty words no other seed's text shares."""
    digest = "".join(hashlib.sha256(f"{seed}/{part}".encode()).hexdigest() for part in range(5))
    return " ".join(digest[start : start + 8] for start in range(0, 320, 8))


def _write(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    elif path.suffix == ".jsonl":
        records = [{"id": row["doc_id"], "text": row["body"], "timestamp": row["crawled_at"]} for row in rows]
        path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    else:
        write_csv(path, rows)
    return path


def _ids(source: Path, **policy) -> list[str]:
    return sorted(read_documents(source, policy=InputPolicy(**policy)).column("doc_id").to_pylist())


def _expected(*names: str) -> list[str]:
    return sorted(row["doc_id"] for name in names for row in _rows(name))


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_a_file_named_like_a_pattern_is_read_as_itself_once(tmp_path, suffix):
    for name in ("a1", "a[1]", "b1", "b2", "b*", "c?", "cx"):
        _write(tmp_path / f"{name}{suffix}", _rows(name))
    # the folder: every file once
    assert _ids(tmp_path) == _expected("a1", "a[1]", "b1", "b2", "b*", "c?", "cx")
    # DEDUP_INPUT naming one such file: that file, not what it would match as a pattern
    for name in ("a[1]", "b*", "c?"):
        assert _ids(tmp_path / f"{name}{suffix}") == _expected(name)
        assert input_files(tmp_path / f"{name}{suffix}") == [tmp_path / f"{name}{suffix}"]


def test_a_pattern_that_names_no_file_as_it_is_still_matches_and_each_match_is_read_as_itself(tmp_path):
    for name in ("b1", "b2", "b*", "b[1]"):
        _write(tmp_path / "in" / f"{name}.parquet", _rows(name))
    assert _ids(tmp_path / "in" / "b?.parquet") == _expected("b1", "b2", "b*")
    assert _ids(tmp_path / "in" / "b[[]*.parquet") == _expected("b[1]")
    assert _ids(tmp_path / "in" / "*[*]*") == _expected("b*")


def test_a_folder_named_like_a_pattern_is_read_as_itself(tmp_path):
    _write(tmp_path / "crawl1" / "a.parquet", _rows("one"))
    _write(tmp_path / "crawl[1]" / "a.parquet", _rows("bracketed"))
    assert _ids(tmp_path / "crawl[1]") == _expected("bracketed")
    assert _ids(tmp_path / "crawl[1]" / "a.parquet") == _expected("bracketed")


def test_a_parquet_file_duckdb_cannot_name_is_read_from_the_open_file(tmp_path):
    path = _write(tmp_path / "back\\slash[1].parquet", _rows("odd"))
    _write(tmp_path / "back\\slash1.parquet", _rows("other"))
    assert duckdb_file(path) is None
    assert _ids(path) == _expected("odd")


def test_duckdb_reads_an_escaped_name_as_that_file_alone(tmp_path):
    for name in ("a1", "a[1]", "b1", "b*", "c?", "cx", "[x]"):
        _write(tmp_path / f"{name}.parquet", _rows(name, 1))
    with duckdb.connect() as connection:
        for name in ("a[1]", "b*", "c?", "[x]", "a1"):
            found = connection.execute(
                "select doc_id from read_parquet(?)", [duckdb_file(tmp_path / f"{name}.parquet")]
            ).fetchall()
            assert found == [(f"{name}#0",)]


def test_the_in_place_view_and_the_copy_read_each_file_once_through_dagster(runner, tmp_path):
    folder = tmp_path / "in"
    names = ("a1", "a[1]", "b1", "b2", "b*")
    for name in names:
        _write(folder / f"{name}.parquet", _rows(name, 3))
    for bodies in ("in_place", "copy"):
        result = runner.run(folder, parquet_bodies=bodies)
        assert result.success
        # copied even so: the view would name them escaped, and each query would list the folder
        assert READ_IN_PLACE not in runner.lineage("documents")
        documents = runner.table("documents")
        assert sorted(documents["doc_id"]) == sorted(f"{name}#{n}" for name in names for n in range(3))
        for doc_id, body, source_file in documents[["doc_id", "body", "source_file"]].itertuples(index=False):
            name, number = doc_id.split("#")
            assert Path(source_file).name == f"{name}.parquet"
            assert body == _rows(name, 3)[int(number)]["body"]


def _csv_batches(folder: Path, keys: list[str]) -> None:
    for key in keys:
        _write(folder / f"{key}.csv", _rows(key, 3))


def test_batch_keys_with_pattern_marks_each_index_only_their_own_rows_and_all_run(tmp_path):
    keys = ["k*", "k?", "k[1]", "k1"]
    _csv_batches(tmp_path / "batches", keys)
    batches = find_batches(tmp_path / "batches")
    assert batches.keys() == sorted(keys)
    database, output = tmp_path / "index.duckdb", tmp_path / "out"
    for key in batches.keys():
        run_batch(batches, key, str(database), str(output))
    with duckdb.connect(str(database), read_only=True) as connection:
        indexed = connection.execute(
            "select f.batch_key, d.doc_id from incremental.documents d join incremental.fingerprints f using (doc_id)"
        ).fetchall()
    assert sorted(indexed) == sorted((key, f"{key}#{n}") for key in keys for n in range(3))
    # each release folder holds its own batch's documents, under a name with no pattern mark
    for key in keys:
        release = output / "batches" / key_path_name(key)
        assert json.loads((release / "manifest.json").read_text())["batch"] == key
        kept = pq.read_table(release / "deduped_documents").column("doc_id").to_pylist()
        assert sorted(kept) == [f"{key}#{n}" for n in range(3)]
    # each a link to its release, beside the hidden folder of its releases
    assert sorted(path.name for path in (output / "batches").iterdir() if not path.name.startswith(".")) == sorted(
        ["k%2A", "k%3F", "k%5B1%5D", "k1"]
    )


def test_key_path_names_spell_out_every_other_character_and_never_meet():
    assert key_path_name("2026-11-29") == "2026-11-29"
    assert key_path_name("week 1, café") == "week 1, café"
    assert key_path_name("a%2A") == "a%252A"
    assert key_path_name("a*") == "a%2A"
    assert key_path_name("x/y:z\n") == "x%2Fy%3Az%0A"


def test_batch_keys_that_would_share_a_folder_are_refused_naming_both_files(tmp_path):
    _csv_batches(tmp_path, ["Week1", "week1", "caf\u00e9", "cafe\u0301", "other"])
    batches = find_batches(tmp_path)
    assert batches.keys() == ["other"]
    assert batches.blocked() == sorted(["Week1", "week1", "caf\u00e9", "cafe\u0301"])
    for key, names in (("week1", "Week1.csv and week1.csv"), ("caf\u00e9", "cafe\u0301.csv and caf\u00e9.csv")):
        with pytest.raises(BatchError, match=f"{names} in .*Rename all but one of them"):
            batches.batch(key)
    assert batches.earlier("z") == sorted(["Week1", "week1", "caf\u00e9", "cafe\u0301", "other"])


def test_a_batch_key_too_long_for_its_file_names_is_refused_naming_the_file(tmp_path):
    long = "k" * 180 + "*" * 10
    _csv_batches(tmp_path, [long, "short"])
    batches = find_batches(tmp_path)
    assert batches.keys() == ["short"]
    with pytest.raises(BatchError, match=r"too long .*Rename it with a shorter name"):
        batches.batch(long)


def test_an_output_folder_and_database_inside_the_input_folder_are_not_read_back(tmp_path):
    folder = tmp_path / "in"
    _write(folder / "docs.csv", _rows("docs", 4))
    database, output = folder / "pipeline.duckdb", folder / "out"
    before = describe_input(folder)
    first = run_library(str(folder), str(database), str(output))
    assert (output / "manifest.json").is_file()
    stats = InputStats()
    again = [doc_id for batch in document_batches(folder, stats) for doc_id in batch.column("doc_id").to_pylist()]
    assert sorted(again) == _expected_ids("docs", 4)
    assert stats.left_out == [folder / ".out.releases", output]  # the link and the releases it links to
    assert describe_input(folder) == before
    second = run_library(str(folder), str(database), str(output))
    assert second["counts"] == first["counts"]
    # with source_format set, every file is read: the database and the lock are left out too
    left = []
    assert input_files(folder, "csv", left) == [folder / "docs.csv"]
    assert set(left) == {output, folder / ".out.lock", folder / ".out.releases", database}
    # and from a glob
    left = []
    assert input_files(folder / "*", None, left) == [folder / "docs.csv"]
    assert set(left) == {output, database}


def _expected_ids(name: str, count: int) -> list[str]:
    return sorted(row["doc_id"] for row in _rows(name, count))


def test_a_batch_file_whose_name_is_not_utf8_is_refused_naming_it(tmp_path):
    _csv_batches(tmp_path, ["short"])
    (tmp_path / os.fsdecode(b"k\xff.csv")).write_bytes((tmp_path / "short.csv").read_bytes())
    batches = find_batches(tmp_path)
    assert batches.keys() == ["short"]
    with pytest.raises(BatchError, match=r"not valid UTF-8.*Rename it"):
        batches.batch(os.fsdecode(b"k\xff"))


def test_a_pattern_matching_nothing_says_how_to_match_a_mark_itself(tmp_path):
    with pytest.raises(InputError, match=r"no such file or folder, and as a pattern it matches no file.*\[\[\]"):
        input_files(tmp_path / "a[1].csv")
