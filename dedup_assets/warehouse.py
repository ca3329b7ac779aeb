"""The ``warehouse`` resource: the DuckDB file every asset's table lives in.

Assets read their upstream tables and write their own through it, each table with its lineage
(the settings and input that produced it) beside it. One connection is held for the whole run,
so DuckDB's buffer pool and catalog survive from step to step; every step and check works on a
cursor of it. A missing upstream table fails at once with the command that builds it, and a
locked file fails in seconds with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import duckdb
from dagster import ConfigurableResource, Failure, InitResourceContext
from pydantic import Field, PrivateAttr

from .core.store import TableBuild, open_database, read_lineage, table_exists, write_table
from .core.tables import Tables
from .errors import user_errors
from .lineage import MATERIALIZE_COMMAND


@dataclass(frozen=True)
class Upstream:
    """An upstream table as an asset reads it: its qualified name and how it was built."""

    table: str
    lineage: dict


class DuckDBWarehouse(ConfigurableResource):
    """The DuckDB file holding every pipeline table (resource key ``warehouse``)."""

    database: str = Field(
        description="The DuckDB file (env DEDUP_DATABASE); a relative path resolves against the "
        "run's working directory, and a missing folder is created."
    )
    memory_limit: str = Field(description="DuckDB's memory limit, e.g. 2GB (env DEDUP_DUCKDB_MEMORY).")
    schema_name: str = Field(default="dedup", description="The schema the tables are stored in.")

    _connection: duckdb.DuckDBPyConnection | None = PrivateAttr(default=None)

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    @property
    def tables(self) -> Tables:
        return Tables.in_schema(self.schema_name)

    def qualified(self, name: str) -> str:
        return f"{self.schema_name}.{name}"

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor of the run's connection, opened on first use (a user error if locked)."""
        if self._connection is None:
            with user_errors():
                connection = open_database(self.database, self.memory_limit)
            connection.execute(f"create schema if not exists {self.schema_name}")
            self._connection = connection
        return self._connection.cursor()

    def upstream(self, name: str, downstream: str) -> Upstream:
        """Table ``name`` as ``downstream`` reads it; fails with the command that builds it when
        it has not been materialized into this database."""
        table = self.qualified(name)
        with self.cursor() as cursor:
            if not table_exists(cursor, table):
                raise Failure(
                    f"Table {table} does not exist in {self.database}: asset '{name}' has not been "
                    f"materialized into this database. Build '{downstream}' together with its "
                    f"upstream assets: {MATERIALIZE_COMMAND} '*{downstream}'"
                )
            return Upstream(table, read_lineage(cursor, table))

    def write(self, name: str, build: TableBuild, lineage: Mapping | Callable[[], Mapping]) -> int:
        """Replace table ``name`` and its lineage in one transaction; its row count."""
        with self.cursor() as cursor, user_errors():
            return write_table(cursor, self.qualified(name), build, lineage)
