"""The table store: opening the database file, writing a table with its lineage, and reading some
documents' rows by id."""

import os
import subprocess

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dedup_assets.core.storage.store import (
    DuckDBUnavailable,
    TableBuild,
    open_database,
    out_of_memory,
    read_lineage,
    rows_with_ids,
    table_exists,
    write_table,
)


def test_open_database_expands_home_creates_the_folder_and_the_schema(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    with open_database("~/nested/pipeline.duckdb", "256MB", "dedup") as connection:
        connection.execute("create table dedup.probe as select 1 as x")
        assert table_exists(connection, "dedup.probe")
    assert (tmp_path / "nested" / "pipeline.duckdb").is_file()


@pytest.mark.parametrize("database", ["", "   "])
def test_an_empty_database_path_is_refused_not_opened_in_memory(database):
    with pytest.raises(DuckDBUnavailable, match="No database file given: set DEDUP_DATABASE"):
        open_database(database, "256MB")


@pytest.mark.parametrize(
    ("name", "schema"),
    # the warehouse schema as every run opens the file; the index's and the consistency check's
    # schemas are created in it later
    [("dedup.duckdb", None), ("Dedup.duckdb", "dedup"), ("dedup.v1.duckdb", "dedup"), ("incremental.duckdb", "dedup"),
     ("engine_consistency.duckdb", "dedup")],
)
def test_a_file_named_as_its_schema_is_refused_with_a_name_that_works(tmp_path, name, schema):
    # DuckDB's own error is a Binder Error on the first 'dedup.<table>', deep inside a step
    with pytest.raises(DuckDBUnavailable) as raised:
        open_database(str(tmp_path / name), "256MB", schema)
    message = str(raised.value)
    assert f"Cannot use {tmp_path / name}: DuckDB names the file's catalog" in message
    assert not (tmp_path / name).exists()
    suggested = message.rsplit("e.g. ", 1)[1].rstrip(".")
    with open_database(suggested, "256MB", schema or "dedup") as connection:
        connection.execute(f"create table {schema or 'dedup'}.probe as select 1 as x")
        assert table_exists(connection, f"{schema or 'dedup'}.probe")


def test_a_memory_limit_duckdb_cannot_read_is_one_message(tmp_path):
    with pytest.raises(DuckDBUnavailable, match="DEDUP_DUCKDB_MEMORY a size such as 2GB") as raised:
        open_database(str(tmp_path / "limits.duckdb"), "two gigs")
    assert "two gigs" in str(raised.value)


def test_a_table_and_its_lineage_are_replaced_together(tmp_path):
    with open_database(str(tmp_path / "store.duckdb"), "256MB", "dedup") as connection:
        first = TableBuild(sql="select 1 as x")
        assert write_table(connection, "dedup.kept", first, {"num_perm": 64}) == 1
        assert read_lineage(connection, "dedup.kept") == {"num_perm": 64}

        def failing():
            yield pa.record_batch({"x": [2]})
            raise RuntimeError("boom")

        with pytest.raises(RuntimeError, match="boom"):
            write_table(connection, "dedup.kept", TableBuild(batches=failing()), {"num_perm": 128})
        assert connection.execute("select x from dedup.kept").fetchall() == [(1,)]
        assert read_lineage(connection, "dedup.kept") == {"num_perm": 64}

        # lineage known only once the stream is read is written with its rows
        seen = []

        def counted():
            for batch in (pa.record_batch({"x": [5, 6]}), pa.record_batch({"x": [7]})):
                seen.append(batch.num_rows)
                yield batch

        stream = TableBuild(batches=counted())
        assert write_table(connection, "dedup.kept", stream, lambda: {"rows_seen": sum(seen)}) == 3
        assert read_lineage(connection, "dedup.kept") == {"rows_seen": 3}
        assert read_lineage(connection, "dedup.never_written") == {}


def _mounted_tmpfs(folder, options: str) -> bool:
    folder.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True).returncode == 0


def test_a_full_or_read_only_database_disk_is_one_sentence_naming_the_file(tmp_path):
    disk = tmp_path / "disk"
    if os.geteuid() != 0 or not _mounted_tmpfs(disk, "size=2m"):
        pytest.skip("mounting a tmpfs needs root and a system that permits it")
    database = disk / "pipeline.duckdb"
    try:
        with open_database(str(database), "1GB", "dedup") as connection:
            big = TableBuild(sql="select repeat('x', 1000) || i::varchar as s from range(100000) r(i)")
            with pytest.raises(DuckDBUnavailable) as raised:
                write_table(connection, "dedup.big", big)
        assert str(raised.value) == (
            f"Cannot write dedup.big to {database}: no space is left on the device. Free space or fix the "
            "folder's permissions, or set DEDUP_DATABASE to a file on a disk with room (its .wal, .tmp and "
            ".payloads sit beside it), then run again."
        )
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        with pytest.raises(DuckDBUnavailable) as raised:
            open_database(str(database), "1GB", "dedup")
        assert str(raised.value) == (
            f"Cannot write {database}: the file system is read-only. Free space or fix the folder's "
            "permissions, or set DEDUP_DATABASE to a file on a disk with room (its .wal, .tmp and .payloads "
            "sit beside it), then run again."
        )
    finally:
        subprocess.run(["umount", "--lazy", str(disk)], check=True)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("kind", ["table", "positional view"])
def test_rows_with_ids_gives_the_rows_asked_for_in_the_order_asked(tmp_path, seed, kind):
    import random

    rng = random.Random(seed)
    rows = {f"d{i:05d}": f"body {i} " * rng.randint(0, 5) for i in range(3_000)}
    with open_database(str(tmp_path / "db.duckdb"), "256MB", "dedup") as connection:
        connection.register("given", pa.table({"doc_id": list(rows), "body": list(rows.values())}))
        if kind == "table":
            connection.execute("create table dedup.documents as select * from given")
        else:  # as documents over a Parquet input is: a view whose rows DuckDB cannot estimate
            connection.execute("create table dedup.ids as select doc_id from given")
            connection.execute("create table dedup.texts as select body from given")
            connection.execute("create view dedup.documents as select i.doc_id, t.body from dedup.ids i positional join dedup.texts t")
        wanted = rng.sample(list(rows), 400) + ["not-a-document"]
        found = rows_with_ids(connection, "dedup.documents", pa.array(wanted), ["body"])
        none = rows_with_ids(connection, "dedup.documents", pa.array([], pa.string()), ["body"])
    expected = [(doc_id, rows[doc_id]) for doc_id in wanted if doc_id in rows]
    assert list(zip(found.column("doc_id").to_pylist(), found.column("body").to_pylist())) == expected
    assert found.column_names == none.column_names == ["doc_id", "body"] and none.num_rows == 0
    assert found.schema == none.schema  # one type whether anything is found or not


@pytest.mark.slow
def test_rows_with_ids_gives_bodies_of_more_than_2_gib_together(tmp_path):
    """Taken in order, the bodies are joined into one column: 32-bit string offsets overflowed
    past 2 GiB (the removals check at 5M documents)."""
    body = "w" * (1 << 21)  # 2 MiB
    half = pa.array([body] * 560)  # 1.1 GiB, given twice without a second copy
    ids = pa.chunked_array([pa.array([f"a{i:04d}" for i in range(560)]), pa.array([f"b{i:04d}" for i in range(560)])])
    with open_database(str(tmp_path / "db.duckdb"), "1GB", "dedup") as connection:
        connection.register("documents", pa.table({"doc_id": ids, "body": pa.chunked_array([half, half])}))
        wanted = pa.array([f"b{i:04d}" for i in range(559, -1, -1)] + [f"a{i:04d}" for i in range(560)])
        found = rows_with_ids(connection, "documents", wanted, ["body"])
    assert found.column("doc_id").to_pylist() == wanted.to_pylist()
    assert pc.sum(pc.binary_length(found.column("body"))).as_py() == 1_120 * len(body)


@pytest.mark.parametrize("damage", ["text", "cut short"])
def test_a_file_that_is_no_database_is_named_so_at_once_and_left_as_it_is(tmp_path, damage):
    """Not blamed on a process holding it (no lock is waited for): a text file at the path, or a
    database cut in half; the bytes are untouched."""
    database = tmp_path / "pipeline.duckdb"
    if damage == "text":
        database.write_text("doc_id,body\n1,a page\n")
    else:
        with duckdb.connect(str(database)) as connection:
            connection.execute("create table t as select range as i from range(200000)")
        database.write_bytes(database.read_bytes()[: database.stat().st_size // 2])
    before = database.read_bytes()
    with pytest.raises(DuckDBUnavailable) as raised:
        open_database(str(database), "256MB", "dedup")
    message = str(raised.value)
    what = "is not a DuckDB database" if damage == "text" else "is a damaged DuckDB database"
    assert message.startswith(f"{database} {what} (")
    assert "it was left as it is" in message and "set DEDUP_DATABASE to another file" in message
    assert "Another process" not in message
    assert database.read_bytes() == before


def test_duckdb_out_of_memory_is_one_message_naming_the_limit_and_its_setting():
    """Issue 49: held to DEDUP_DUCKDB_MEMORY=64MB, a 100k run ended with DuckDB's 'See also
    https://duckdb.org/...' line and a stack trace. A query over the limit, inside a step's
    user_errors, is a refusal that says what the limit is and which setting raises it."""
    from dagster import Failure

    from dedup_assets.launch.user_messages import user_errors

    connection = duckdb.connect(config={"memory_limit": "16MB", "threads": 1})
    with pytest.raises(Failure) as raised, user_errors():
        connection.execute("select list(i) from range(5000000) t(i)").fetchall()
    message = raised.value.description
    assert message.startswith("DuckDB ran out of memory: the step needed more than its memory limit of ")
    assert "MiB, even spilling to disk (Out of Memory Error: " in message and "\n" not in message
    assert message.endswith(
        "Raise the limit: DEDUP_DUCKDB_MEMORY (or the warehouse resource's memory_limit), "
        "e.g. DEDUP_DUCKDB_MEMORY=2GB, the default."
    )


def test_out_of_memory_at_the_default_limit_suggests_a_larger_one():
    """At the default limit, suggesting the default is no advice (seen at 2 GB on 33M audit pairs)."""
    error = duckdb.OutOfMemoryException(
        "Out of Memory Error: could not allocate block of size 256.0 KiB (1.8 GiB/1.8 GiB used)"
    )
    message = str(out_of_memory(error, "fingerprinted"))
    assert message.startswith("DuckDB ran out of memory in fingerprinted: the step needed more than its memory limit of 1.8 GiB")
    assert message.endswith("e.g. DEDUP_DUCKDB_MEMORY=4GB, twice the limit.")
