"""How a stage's table gets written: one SQL query, or a stream of Arrow batches.

Stages return a :class:`TableBuild` instead of writing, so the Dagster IO manager (or the
one-call library runner) decides where the table goes. Writing is transactional: a stream that
fails half way leaves the previous table in place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa


def connect(database: str, memory_limit: str = "2GB", **config) -> duckdb.DuckDBPyConnection:
    """A connection to the pipeline database.

    String compression (FSST, dictionary) is switched off: analysing web text for it made each
    checkpoint cost about 26 s per GB of bodies, five times the write itself, for a file about
    half the size. Bit-packing and RLE are off too: the bulk of the numbers are 64-bit hashes,
    which they cannot shrink, and trying cost 1.7 s per 1M 128-value signatures (4.3 s against
    2.6 s). (DuckDB ignores this setting in the connect config, hence the SET.)

    DuckDB keeps the block memory it has used, up to ``memory_limit``, instead of returning it to
    the operating system and faulting fresh pages in again: 1M documents through the whole graph
    took 42.2 and 43.0 s against 46.1 and 44.4 s without (documents and fingerprinted gain most).
    """
    connection = duckdb.connect(database, config={"memory_limit": memory_limit, **config})
    # the limit as DuckDB resolved it: a percentage means something else to block_allocator_memory
    connection.execute("set block_allocator_memory = current_setting('memory_limit')")
    connection.execute("set disabled_compression_methods = 'fsst,dictionary,dict_fsst,bitpacking,rle'")
    connection.execute("set enable_progress_bar = false")
    return connection


@dataclass
class TableBuild:
    """Either ``sql`` (a SELECT, run with ``params``; ``arrow_inputs`` are registered under their
    names first; ``view`` stores the query itself instead of its rows) or ``batches`` (with a
    ``schema`` if the stream can be empty). ``lineage`` says which settings and input
    produced the table; ``metadata`` holds figures known before writing and ``describe`` computes
    more from the written table."""

    lineage: dict
    sql: str | None = None
    params: Sequence = ()
    arrow_inputs: Mapping[str, pa.Table] = field(default_factory=dict)
    batches: Iterable[pa.RecordBatch] | None = None
    schema: pa.Schema | None = None
    metadata: dict = field(default_factory=dict)
    describe: Callable[[duckdb.DuckDBPyConnection, str], dict] | None = None
    view: bool = False

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


def _drop_other_kind(connection: duckdb.DuckDBPyConnection, table: str, kind: str) -> None:
    # CREATE OR REPLACE cannot turn a table into a view or back
    schema, name = table.split(".") if "." in table else ("main", table)
    wanted = "VIEW" if kind == "view" else "BASE TABLE"
    found = connection.execute(
        "select count(*) from information_schema.tables "
        "where table_schema = ? and table_name = ? and table_type = ?",
        [schema, name, wanted],
    ).fetchall()[0][0]
    if found:
        connection.execute(f"drop {kind} {table}")


def write_table(connection: duckdb.DuckDBPyConnection, table: str, build: TableBuild) -> int:
    """Replace ``table`` with the build's rows inside one transaction; returns the row count."""
    connection.execute("begin transaction")
    try:
        _drop_other_kind(connection, table, "view" if not build.view else "table")
        if build.view:
            connection.execute(f"create or replace view {table} as {build.sql}")
        elif build.sql is not None:
            for name, value in build.arrow_inputs.items():
                connection.register(name, value)
            connection.execute(f"create or replace table {table} as {build.sql}", list(build.params))
            for name in build.arrow_inputs:
                connection.unregister(name)
        else:
            batches = iter(build.batches)
            first = next(batches, None)
            if first is None and build.schema is None:
                raise ValueError(f"{table}: the stream was empty and has no schema to create from")
            schema = build.schema if first is None else first.schema
            # one statement over the whole stream: a statement per batch cost about 2 s per 1M
            # documents more
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
        rows = connection.execute(f"select count(*) from {table}").fetchall()[0][0]
        connection.execute("commit")
    except BaseException:
        connection.execute("rollback")
        raise
    return int(rows)
