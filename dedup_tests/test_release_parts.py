"""The kept documents as a folder of Parquet parts: cut by the rows alone, written several at a
time with the same bytes whatever the threads do, read back as one dataset in input order by
DuckDB, pyarrow and pandas, and every part listed in manifest.json and checked by
``dedup verify-release``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from dedup_assets.core.release import parquet_files
from dedup_assets.core.release.parquet_files import Layout, write_parquet_parts
from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.release.files import MANIFEST_FILE, verify_release

from .conftest import FIXTURE, PROJECT_ROOT, sha256_of_files

# pages that grow longer down the table, so that later parts hold fewer rows
PAGES = """
    select i as position, 'page-' || lpad(i::varchar, 5, '0') as doc_id,
           repeat(md5(i::varchar), 1 + i // 2000) as body, (i % 5)::bigint as cluster_size
    from range(20000) t(i) order by i
"""
SMALL = Layout(batch_rows=512, group_rows=1024, group_bytes=1 << 40, part_bytes=600_000)


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> Path:
    database = tmp_path_factory.mktemp("pages") / "pages.duckdb"
    with duckdb.connect(str(database)) as connection:
        connection.execute(f"create table pages as {PAGES}")
    return database


def _write(
    database: Path, folder: Path, writers: int, query: str = "select * from pages order by position", compression: str = "zstd"
) -> list[dict]:
    with duckdb.connect(str(database), read_only=True) as connection:
        return write_parquet_parts(connection.sql(query), folder, SMALL, writers, compression)


def test_parts_have_the_same_bytes_whatever_the_number_of_writers_and_read_back_in_order(pages, tmp_path):
    written = {writers: _write(pages, tmp_path / f"writers-{writers}", writers) for writers in (1, 2, 3)}
    assert written[1] == written[2] == written[3]
    files = sha256_of_files(tmp_path / "writers-1")
    assert files == sha256_of_files(tmp_path / "writers-2") == sha256_of_files(tmp_path / "writers-3")
    parts = written[2]
    assert len(parts) > 4 and [part["file"] for part in parts] == sorted(files)
    assert {part["file"]: part["sha256"] for part in parts} == files
    # a part ends at the row group that brings it to part_bytes: whole row groups but the last
    rows = [part["rows"] for part in parts]
    assert sum(rows) == 20_000 and len(set(rows[:-1])) > 1 and all(count % 1024 == 0 for count in rows[:-1])
    folder = tmp_path / "writers-2"
    for part in parts:
        assert pq.ParquetFile(folder / part["file"]).metadata.num_rows == part["rows"]
    with duckdb.connect(str(pages), read_only=True) as connection:
        expected = [row[0] for row in connection.execute("select doc_id from pages order by position").fetchall()]
        read = connection.execute("select doc_id from read_parquet(?)", [str(folder / "*.parquet")]).fetchall()
    assert [row[0] for row in read] == expected
    assert ds.dataset(folder).to_table().column("doc_id").to_pylist() == expected
    assert pd.read_parquet(folder)["doc_id"].tolist() == expected


def test_the_same_rows_from_files_of_odd_sizes_give_the_same_bytes(pages, tmp_path):
    # the ray engine's tables are views over Parquet files, and DuckDB's reader ends a batch where
    # a file ends: row groups (cut here by bytes) must still end at the same rows
    by_bytes = Layout(batch_rows=512, group_rows=1 << 20, group_bytes=300_000, part_bytes=600_000)
    with duckdb.connect(str(pages), read_only=True) as connection:
        rows = connection.sql("select * from pages order by position").to_arrow_table()
        files = []
        for index, (start, end) in enumerate([(0, 373), (373, 5_000), (5_000, 12_001), (12_001, rows.num_rows)]):
            files.append(str(tmp_path / f"file-{index}.parquet"))
            pq.write_table(rows.slice(start, end - start), files[-1])
        table = write_parquet_parts(connection.sql("select * from pages order by position"), tmp_path / "table", by_bytes, 2, "zstd")
        view = write_parquet_parts(connection.sql(f"select * from read_parquet({files})"), tmp_path / "view", by_bytes, 2, "zstd")
    assert view == table and len(table) > 2
    assert sha256_of_files(tmp_path / "view") == sha256_of_files(tmp_path / "table")


def test_a_query_without_rows_is_one_part_with_its_columns(pages, tmp_path):
    parts = _write(pages, tmp_path / "none", 2, "select * from pages where position < 0")
    assert [(part["file"], part["rows"]) for part in parts] == [("part-00000.parquet", 0)]
    assert pq.read_schema(tmp_path / "none" / "part-00000.parquet").names == ["position", "doc_id", "body", "cluster_size"]


def test_a_part_that_cannot_be_encoded_fails_the_write_without_waiting_forever(pages, tmp_path):
    # Parquet has no type for DuckDB's intervals: every part's writer fails on its first row group
    query = "select doc_id, to_days(position::integer) as age from pages"
    with pytest.raises(pa.ArrowNotImplementedError):
        _write(pages, tmp_path / "intervals", 2, query)


def test_a_full_disk_fails_the_write_without_waiting_forever(pages, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], capture_output=True
    ).returncode == 0
    if not mounted:
        pytest.skip("mounting a tmpfs needs root and a system that permits it")
    try:
        with pytest.raises(OSError, match="No space left"):
            _write(pages, disk / "parts", 2, compression="none")  # 3 MB: zstd would fit the repeats in 1 MB
    finally:
        subprocess.run(["umount", str(disk)], check=True)


@pytest.fixture(scope="module")
def parted_release(tmp_path_factory) -> Path:
    """The fixture's release with its 12 kept documents in parts of 4 rows."""
    folder = tmp_path_factory.mktemp("parted")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(parquet_files, "LAYOUT", Layout(batch_rows=4, group_rows=4, part_bytes=1))
        run_library(str(FIXTURE), str(folder / "db.duckdb"), str(folder / "out"))
    return folder / "out"


def test_every_part_is_listed_with_its_rows_and_sha256_and_verified(parted_release):
    manifest = json.loads((parted_release / MANIFEST_FILE).read_text())
    parts = [output for output in manifest["outputs"] if output["file"].startswith("deduped_documents/")]
    assert [(part["file"], part["rows"]) for part in parts] == [
        (f"deduped_documents/part-0000{index}.parquet", 4) for index in range(3)
    ]
    assert {part["file"]: part["sha256"] for part in parts} == {
        name: sha256 for name, sha256 in sha256_of_files(parted_release).items() if name.startswith("deduped_documents/")
    }
    assert verify_release(parted_release) == []
    with duckdb.connect(str(parted_release.parent / "db.duckdb"), read_only=True) as connection:
        kept = [row[0] for row in connection.execute("select doc_id from dedup.deduped_documents").fetchall()]
    assert pd.read_parquet(parted_release / "deduped_documents")["doc_id"].tolist() == kept


def _verify(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dedup_assets.cli", "verify-release", str(folder)],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
    )


def test_a_missing_extra_truncated_or_altered_part_is_named_by_verify_release(parted_release, tmp_path):
    damaged = tmp_path / "damaged"
    shutil.copytree(parted_release, damaged)
    parts = damaged / "deduped_documents"
    (parts / "part-00001.parquet").unlink()
    shutil.copy(parts / "part-00000.parquet", parts / "part-00003.parquet")
    with open(parts / "part-00000.parquet", "r+b") as handle:
        handle.truncate(100)
    altered = pq.read_table(parts / "part-00002.parquet")
    pq.write_table(altered.set_column(0, "doc_id", pa.array(["x"] * altered.num_rows)), parts / "part-00002.parquet")
    (damaged / "empty").mkdir()
    failed = _verify(damaged)
    assert failed.returncode == 1
    lines = failed.stderr.splitlines()
    assert lines[0] == f"{damaged}: the release does not match its manifest.json:"
    assert lines[1].startswith("  deduped_documents/part-00000.parquet: sha256 is ")
    assert lines[2] == "  deduped_documents/part-00001.parquet: missing"
    assert lines[3].startswith("  deduped_documents/part-00002.parquet: sha256 is ")
    assert lines[4:6] == [
        "  deduped_documents/part-00003.parquet: not listed in manifest.json",
        "  empty/: not listed in manifest.json",
    ]
    assert lines[6].startswith("A release is checked whole: write the release again")
    assert _verify(parted_release).returncode == 0
