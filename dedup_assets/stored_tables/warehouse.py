"""The ``warehouse`` resource: the DuckDB file every asset's table lives in.

Assets read their upstream tables' lineage and write their own tables through it, each table
with its lineage (the settings and input that produced it) beside it. One connection is held for
the whole run, so DuckDB's buffer pool and catalog survive from step to step; every step and
check works on a cursor of it. (The run's steps execute one at a time, in one process: the
definitions use the in-process executor.) A missing upstream table fails at once with the
command that builds it, and a locked file fails in seconds with the reason.

It is a dagster-duckdb ``DuckDBResource``, so an asset of your own can take ``warehouse:
DuckDBResource`` and call ``get_connection()``. That hands out a cursor of the run's connection
rather than a new connection per call as DuckDBResource's does: a second connection to the file
in this process would be refused (its config differs), its lock wait is minutes rather than
seconds, and DuckDB's cache would not last from step to step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import duckdb
from dagster import InitResourceContext
from dagster_duckdb import DuckDBResource
from pydantic import Field, PrivateAttr

from ..core.util.errors import DedupError
from ..core.storage.places import DATABASE, SPACE, said_of_the_place
from ..core.storage.store import TableBuild, open_database, read_lineage, table_exists, write_table
from ..core.storage.tables import SCHEMA, Tables
from ..launch.environment import DATABASE as DATABASE_FILE
from ..launch.environment import DUCKDB_MEMORY
from ..launch.user_messages import refusal, user_errors


class DuckDBWarehouse(DuckDBResource):
    """The DuckDB file holding every pipeline table (resource key ``warehouse``)."""

    database: str | None = Field(
        default=None,
        description=f"The DuckDB file. Unset: env {DATABASE_FILE.name}, else {DATABASE_FILE.default}. "
        "A relative path resolves against the run's working directory, and a missing folder is created.",
    )
    memory_limit: str | None = Field(
        default=None,
        description=f"DuckDB's memory limit, e.g. 2GB. Unset: env {DUCKDB_MEMORY.name}, else {DUCKDB_MEMORY.default}.",
    )
    schema_name: str = Field(default=SCHEMA, description="The schema the tables are stored in.")

    _connection: duckdb.DuckDBPyConnection | None = PrivateAttr(default=None)

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    @property
    def path(self) -> str:
        """The DuckDB file this run uses."""
        return self.database or DATABASE_FILE.value()

    @property
    def memory(self) -> str:
        """DuckDB's memory limit for this run."""
        return self.memory_limit or DUCKDB_MEMORY.value()

    @property
    def tables(self) -> Tables:
        return Tables.in_schema(self.schema_name)

    def qualified(self, name: str) -> str:
        """``name`` in the run's schema; a schema-qualified name (an incremental index's) as is."""
        return name if "." in name else f"{self.schema_name}.{name}"

    def open(self) -> None:
        """Open the run's connection unless it is open (a user error if the file is locked)."""
        if self._connection is None:
            with user_errors():
                self._connection = open_database(self.path, self.memory, self.schema_name, self.connection_config)

    @contextmanager
    def cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor of the run's connection, which is opened on first use. A full disk under the
        database (its file, WAL or spill folder) ends the step with one sentence naming it,
        wherever the query was."""
        self.open()
        with (
            said_of_the_place(self.path, DATABASE, refusal, codes=SPACE),
            self._connection.cursor() as cursor,
        ):
            yield cursor

    def get_connection(self):
        """DuckDBResource's way in, for assets of your own: a cursor of the run's connection."""
        return self.cursor()

    def upstream_lineage(self, name: str, downstream: str) -> dict:
        """The lineage of table ``name``, read for asset ``downstream``; fails with the command
        that builds both when ``name`` has not been materialized into this database."""
        table = self.qualified(name)
        with self.cursor() as cursor:
            if not table_exists(cursor, table):
                with user_errors():
                    raise DedupError(
                        f"Table {table} does not exist in {self.path}: asset '{name}' has not been "
                        f"materialized into this database. Build '{downstream}' together with its "
                        "upstream assets.",
                        select=f"*{downstream}",
                    )
            return read_lineage(cursor, table)

    def write(self, name: str, build: TableBuild, lineage: Mapping | Callable[[], Mapping]) -> int:
        """Replace table ``name`` and its lineage in one transaction; its row count."""
        return self.write_table(self.qualified(name), build, lineage)

    def write_table(self, table: str, build: TableBuild, lineage: Mapping | Callable[[], Mapping] | None = None) -> int:
        """Replace ``table`` (schema-qualified, in any schema) and its lineage in one
        transaction; its row count."""
        with self.cursor() as cursor, user_errors():
            return write_table(cursor, table, build, lineage)
