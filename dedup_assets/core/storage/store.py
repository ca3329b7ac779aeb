"""How a step's table is written into DuckDB, and the lineage stored beside it.

Steps return a :class:`TableBuild` (one SQL query, or a stream of Arrow batches) instead of
writing; the caller (the Dagster ``warehouse`` resource, or the library runner) writes it with
:func:`write_table`. Writing is transactional: the table and its lineage are replaced together,
and a stream that fails half way leaves the previous table in place. :func:`rows_with_ids` reads
some documents' rows by scanning rather than joining.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from ..util.errors import DedupError
from .places import DATABASE, SPACE, place_error
from .tables import CONSISTENCY_SCHEMA, INDEX_SCHEMA, SCHEMA
from ..settings.choices import DEFAULT_DUCKDB_MEMORY

LINEAGE_TABLE = "asset_lineage"
_LOCK_RETRY_SECONDS = (0.5, 1.0, 2.0, 4.0)


class DuckDBUnavailable(DedupError, RuntimeError):
    """The database file cannot be opened for writing."""


class DuckDBOutOfMemory(DedupError, MemoryError):
    """A query needed more than DuckDB's memory limit, even spilling to disk."""


def out_of_memory(error: duckdb.OutOfMemoryException, step: str | None = None) -> DuckDBOutOfMemory:
    """DuckDB's out-of-memory error as what to do: its limit, and the setting that raises it
    (issue 49: held to 64 MB, a 100k run ended with DuckDB's text and a stack trace)."""
    words = str(error).strip().splitlines()[0]
    used = re.search(r"\(([\d.]+ \w+)/(([\d.]+) (\w+)) used\)", words)
    limit = f" of {used.group(2)}" if used else ""
    where = f" in {step}" if step else ""
    return DuckDBOutOfMemory(
        f"DuckDB ran out of memory{where}: the step needed more than its memory limit{limit}, even spilling "
        f"to disk ({words}). Raise the limit: DEDUP_DUCKDB_MEMORY (or the warehouse resource's memory_limit), "
        f"e.g. {_larger_limit(used.group(3), used.group(4)) if used else _DEFAULT_LIMIT}."
    )


_DEFAULT_LIMIT = f"DEDUP_DUCKDB_MEMORY={DEFAULT_DUCKDB_MEMORY}, the default"
_UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def _larger_limit(amount: str, unit: str) -> str:
    """The default where the limit was below it, else twice the limit in whole GB (a limit at the
    default that was not enough is no advice)."""
    gigabytes = float(amount) * _UNITS.get(unit, 1 << 30) / 1e9
    if gigabytes < 1.5:
        return _DEFAULT_LIMIT
    return f"DEDUP_DUCKDB_MEMORY={math.ceil(2 * gigabytes)}GB, twice the limit"


def connect(database: str, memory_limit: str, config: Mapping[str, object] | None = None) -> duckdb.DuckDBPyConnection:
    """A connection to the pipeline database.

    String compression (FSST, dictionary) is off: analysing web text for it at every checkpoint
    costs more than the space it saves is worth here. Bit-packing and RLE are off too: most
    numbers are 64-bit hashes, which they cannot shrink. (DuckDB ignores this setting in the connect config,
    hence the SET.) DuckDB keeps the block memory it has used, up to ``memory_limit``, instead of
    returning it to the operating system and faulting fresh pages in again. ``config``: other
    DuckDB settings for the connection.
    """
    connection = duckdb.connect(database, config={**(config or {}), "memory_limit": memory_limit})
    # the limit as DuckDB resolved it: a percentage means something else to block_allocator_memory
    connection.execute("set block_allocator_memory = current_setting('memory_limit')")
    connection.execute("set disabled_compression_methods = 'fsst,dictionary,dict_fsst,bitpacking,rle'")
    connection.execute("set enable_progress_bar = false")
    return connection


def open_database(
    database: str, memory_limit: str, schema: str | None = None, config: Mapping[str, object] | None = None
) -> duckdb.DuckDBPyConnection:
    """Connect (``~`` expanded, the parent folder created, ``schema`` created if given, other
    DuckDB settings in ``config``); a held lock fails within seconds with what to do, instead
    of retrying for minutes."""
    if not database.strip():
        raise DuckDBUnavailable(
            "No database file given: set DEDUP_DATABASE to a file path, e.g. var/dedup_assets.duckdb."
        )
    if database != ":memory:":
        database = str(Path(database).expanduser())
        _refuse_schema_name(database, schema)
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    existed = database == ":memory:" or Path(database).exists()
    for delay in (*_LOCK_RETRY_SECONDS, None):
        try:
            connection = connect(database, memory_limit, config)
        except duckdb.IOException as error:
            problem = _not_a_database(error, database) or place_error(error, database, DATABASE)
            if problem is not None:
                if not existed:
                    _remove_if_empty(Path(database))
                raise DuckDBUnavailable(problem) from None
            if delay is None:
                raise DuckDBUnavailable(
                    f"Cannot open {database} for writing: {error}. Another process (a DuckDB "
                    "CLI, a notebook or a second run) holds it; close it and retry, or set "
                    "DEDUP_DATABASE to another file."
                ) from None
            time.sleep(delay)
            continue
        except duckdb.Error as error:
            if problem := _not_a_database(error, database):
                raise DuckDBUnavailable(problem) from None
            raise DuckDBUnavailable(
                f"Cannot open {database} (memory limit {memory_limit!r}): {error}. Check that "
                "DEDUP_DATABASE names a DuckDB file and DEDUP_DUCKDB_MEMORY a size such as 2GB."
            ) from None
        if schema:
            connection.execute(f"create schema if not exists {schema}")
        return connection
    raise AssertionError("unreachable")


def _refuse_schema_name(database: str, schema: str | None) -> None:
    """DuckDB names a file's catalog by its name up to the first dot: a file named as a schema in
    it (``dedup.duckdb``, ``incremental.v2.duckdb``) makes every ``<schema>.<table>`` of that
    schema ambiguous, in our SQL and yours."""
    catalog = Path(database).name.split(".", 1)[0]
    if catalog.lower() in {SCHEMA, INDEX_SCHEMA, CONSISTENCY_SCHEMA, (schema or SCHEMA).lower()}:
        raise DuckDBUnavailable(
            f"Cannot use {database}: DuckDB names the file's catalog '{catalog}', the name of a schema "
            f"the pipeline keeps in it, so every '{catalog.lower()}.<table>' would be ambiguous. Name "
            f"the file otherwise (DEDUP_DATABASE), e.g. {Path(database).with_name('dedup_assets.duckdb')}."
        )


# DuckDB's words for a file it cannot take as a database: another kind of file, or one damaged
# (cut short, or a block whose checksum fails); a lock is said otherwise
_NOT_A_DATABASE = ("not a valid DuckDB database file", "Could not read enough bytes", "Corrupt database file")


def _not_a_database(error: duckdb.Error, database: str) -> str | None:
    """What to do with a file at the database path that DuckDB cannot read as a database, which
    is no lock to wait for and must never be overwritten; None for any other error."""
    text = " ".join(str(error).split())
    if not any(words in text for words in _NOT_A_DATABASE):
        return None
    what = "is not a DuckDB database" if _NOT_A_DATABASE[0] in text else "is a damaged DuckDB database"
    return (
        f"{database} {what} ({text.removeprefix('IO Error: ')}), so its tables cannot be read; it was left as it "
        "is. Move it away (restore it from a copy if it held tables you need) or set DEDUP_DATABASE to "
        "another file, then run again: the pipeline builds a new database."
    )


def _remove_if_empty(path: Path) -> None:
    """Remove the empty file a creation that could not write its header leaves: DuckDB refuses
    it as not a database, so the run after space is freed would fail too."""
    if path.is_file() and path.stat().st_size == 0:
        path.unlink()


@dataclass(frozen=True)
class TableBuild:
    """Either ``sql`` (a SELECT, run with ``params``; ``arrow_inputs`` are registered under their
    names first; ``view`` stores the query itself instead of its rows) or ``batches`` (with a
    ``schema`` if the stream can be empty). ``prepare``: (table, build) of tables the build
    reads, written first, in the same transaction."""

    sql: str | None = None
    params: Sequence = ()
    arrow_inputs: Mapping[str, pa.Table] = field(default_factory=dict)
    batches: Iterable[pa.RecordBatch] | None = None
    schema: pa.Schema | None = None
    view: bool = False
    prepare: tuple[tuple[str, TableBuild], ...] = ()
    # (name, build) of temporary tables the build reads, written first and dropped once it is
    # written: DuckDB spills a large grouping, or a large sort, but could not spill one feeding
    # the other in one query (the recall audit's tens of millions of boilerplate pairs)
    staged: tuple[tuple[str, TableBuild], ...] = ()

    def __post_init__(self) -> None:
        if (self.sql is None) == (self.batches is None):
            raise ValueError("a TableBuild needs exactly one of sql or batches")


class _Source:
    """The batches of a build, keeping the exception that ended them, if any."""

    def __init__(self, first: pa.RecordBatch | None, rest: Iterator[pa.RecordBatch]):
        self.first, self.rest, self.error = first, rest, None

    def batches(self, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        try:
            if self.first is not None:
                yield self.first
            for batch in self.rest:
                # one stream has one schema; per-file readers may differ in string widths
                yield batch if batch.schema == schema else batch.cast(schema)
        except BaseException as error:
            self.error = error
            raise


def _schema_and_name(table: str) -> tuple[str, str]:
    """(``[catalog.]schema``, name) of ``[[catalog.]schema.]name``."""
    schema, _, name = table.rpartition(".")
    return schema or "main", name


def table_exists(connection: duckdb.DuckDBPyConnection, table: str, kind: str | None = None) -> bool:
    """Whether ``[[catalog.]schema.]name`` exists (as a ``"BASE TABLE"`` or ``"VIEW"`` when
    ``kind`` is given), in the catalog named (an attached database), else in any."""
    schema, name = _schema_and_name(table)
    catalog, _, schema = schema.rpartition(".")
    return bool(
        connection.execute(
            "select count(*) from information_schema.tables where table_catalog = coalesce(?, table_catalog) "
            "and table_schema = ? and table_name = ? and (? is null or table_type = ?)",
            [catalog or None, schema, name, kind, kind],
        ).fetchall()[0][0]
    )


def column_types(connection: duckdb.DuckDBPyConnection, relation: str) -> dict[str, str]:
    """Each column of ``relation`` (a table or view name) and its DuckDB type."""
    described = connection.sql(f"select * from {relation} limit 0")
    return {name: str(kind) for name, kind in zip(described.columns, described.types)}


def _create(connection: duckdb.DuckDBPyConnection, table: str, build: TableBuild) -> None:
    for prepared, inner in build.prepare:
        _create(connection, prepared, inner)
    for name, inner in build.staged:
        _execute(connection, f"create or replace temp table {name} as {inner.sql}", inner)
    try:
        _create_one(connection, table, build)
    finally:
        for name, _ in build.staged:
            connection.execute(f"drop table if exists temp.{name}")


def _execute(connection: duckdb.DuckDBPyConnection, statement: str, build: TableBuild) -> None:
    """``statement`` with the build's parameters, its Arrow inputs registered while it runs."""
    for name, value in build.arrow_inputs.items():
        connection.register(name, value)
    connection.execute(statement, list(build.params))
    for name in build.arrow_inputs:
        connection.unregister(name)


def _create_one(connection: duckdb.DuckDBPyConnection, table: str, build: TableBuild) -> None:
    # CREATE OR REPLACE cannot turn a table into a view or back
    other = "table" if build.view else "view"
    if table_exists(connection, table, "BASE TABLE" if build.view else "VIEW"):
        connection.execute(f"drop {other} {table}")
    if build.view:
        connection.execute(f"create or replace view {table} as {build.sql}")
    elif build.sql is not None:
        _execute(connection, f"create or replace table {table} as {build.sql}", build)
    else:
        batches = iter(build.batches)
        first = next(batches, None)
        if first is None and build.schema is None:
            raise ValueError(f"{table}: the stream was empty and has no schema to create from")
        schema = build.schema if first is None else first.schema
        # one statement over the whole stream: a statement per batch costs more
        source = _Source(first, batches)
        # DuckDB finds ``stream`` by its name in the SQL below (a replacement scan)
        stream = pa.RecordBatchReader.from_batches(schema, source.batches(schema))
        try:
            connection.execute(f"create or replace table {table} as select * from stream")
        except duckdb.Error:
            # DuckDB wraps an error of the stream in its own; raise the original one
            if source.error is not None:
                raise source.error from None
            raise


def write_table(
    connection: duckdb.DuckDBPyConnection,
    table: str,
    build: TableBuild,
    lineage: Mapping | Callable[[], Mapping] | None = None,
) -> int:
    """Replace ``table`` with the build's rows, and its lineage (a mapping, or a function giving
    it once the rows are in, for facts a stream learns as it is read), in one transaction.
    Returns the row count."""
    with transaction(connection, table):
        _create(connection, table, build)
        rows = connection.execute(f"select count(*) from {table}").fetchall()[0][0]
        if lineage is not None:
            write_lineage(connection, table, lineage() if callable(lineage) else lineage)
    return int(rows)


@contextmanager
def transaction(connection: duckdb.DuckDBPyConnection, what: str) -> Iterator[None]:
    """One DuckDB transaction: committed when the block ends, rolled back when it raises. A
    full disk is said in one sentence naming ``what`` was being written."""
    connection.execute("begin transaction")
    try:
        yield
        connection.execute("commit")
    except BaseException as error:
        try:
            connection.execute("rollback")
        except duckdb.TransactionException:  # a commit that failed has rolled back already
            pass
        if isinstance(error, duckdb.Error):
            problem = place_error(error, database_path(connection), DATABASE, what, SPACE)
            if problem is not None:
                raise DuckDBUnavailable(problem) from None
        raise


def database_path(connection: duckdb.DuckDBPyConnection) -> str:
    return connection.execute(
        "select path from duckdb_databases() where database_name = current_database()"
    ).fetchall()[0][0]


def _lineage_table(table: str) -> tuple[str, str]:
    schema, name = _schema_and_name(table)
    return f"{schema}.{LINEAGE_TABLE}", name


def write_lineage(connection: duckdb.DuckDBPyConnection, table: str, lineage: Mapping) -> None:
    """Record ``table``'s lineage (inside the caller's transaction, when there is one)."""
    lineage_table, name = _lineage_table(table)
    connection.execute(
        f"create table if not exists {lineage_table} (table_name varchar primary key, lineage varchar)"
    )
    connection.execute(
        f"insert or replace into {lineage_table} values (?, ?)", [name, json.dumps(lineage, sort_keys=True)]
    )


def read_lineage(connection: duckdb.DuckDBPyConnection, table: str) -> dict:
    """The settings and input ``table`` was built from; empty when none were recorded."""
    lineage_table, name = _lineage_table(table)
    if not table_exists(connection, lineage_table):
        return {}
    row = connection.execute(f"select lineage from {lineage_table} where table_name = ?", [name]).fetchall()
    return json.loads(row[0][0]) if row else {}



def rows_with_ids(
    connection: duckdb.DuckDBPyConnection, table: str, doc_ids: pa.Array | pa.ChunkedArray, columns: list[str]
) -> pa.Table:
    """``doc_id`` and ``columns`` of the rows of ``table`` whose doc_id is in ``doc_ids``, in the
    order of ``doc_ids`` (an id ``table`` lacks is left out). Text and binary ``columns`` come
    with 64-bit offsets (large_string, large_binary), whatever their size.

    Written as a mark join (``doc_id in (...)`` as a column), which DuckDB does not turn
    around: documents can be a view whose rows it cannot estimate (``ingest.build_documents``),
    and it would build a semi join's hash table on the view, every body of the corpus, instead
    of on the ids."""
    wanted = doc_ids.combine_chunks() if isinstance(doc_ids, pa.ChunkedArray) else doc_ids
    names = ", ".join('"' + name.replace('"', '""') + '"' for name in ["doc_id", *columns])
    if not len(wanted):  # nothing to scan the corpus for
        return with_large_offsets(connection.sql(f"select {names} from {table} limit 0").to_arrow_table(), columns)
    connection.register("wanted_doc_ids", pa.table({"doc_id": wanted}))
    try:
        found = connection.sql(
            f"select {names} from (select {names}, doc_id in (select doc_id from wanted_doc_ids) as wanted "
            f"from {table}) where wanted"
        ).to_arrow_table()
    finally:
        connection.unregister("wanted_doc_ids")
    return in_id_order(found, wanted, columns)


def in_id_order(found: pa.Table, doc_ids: pa.Array, columns: list[str]) -> pa.Table:
    """``found`` (``doc_id`` first, then ``columns``) in the order of ``doc_ids``, an id it lacks
    left out, with 64-bit offsets in its text and binary ``columns``."""
    at = pc.index_in(doc_ids.cast(found.schema.field(0).type), value_set=found.column(0).combine_chunks())
    # taking joins each column's chunks into one array, whose 32-bit offsets a few GB of bodies
    # overflow (the removals check's bodies at 5M documents did): wide columns take 64-bit ones
    return with_large_offsets(found, columns).take(pc.drop_null(at))


def with_large_offsets(table: pa.Table, columns: list[str]) -> pa.Table:
    wider = {pa.string(): pa.large_string(), pa.binary(): pa.large_binary()}
    return table.cast(
        pa.schema(
            [
                field.with_type(wider.get(field.type, field.type)) if field.name in columns else field
                for field in table.schema
            ]
        )
    )
