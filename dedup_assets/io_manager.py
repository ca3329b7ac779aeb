"""DuckDB IO manager for the pipeline's pandas tables.

It differs from the stock dagster-duckdb pandas handler where the stock one is wrong for us
(see ../shared/notes/dagster-duckdb.md):

- Tables are replaced, not appended into, so a table always follows the frame's current schema,
  and an empty frame still creates an empty table with its columns.
- Each table's lineage (the settings and input that produced it) is stored beside it in
  ``<schema>.asset_lineage`` and comes back as ``frame.attrs["lineage"]`` on load.
- A missing upstream table fails at once with the command that builds it, and a locked database
  fails in seconds with the reason, instead of a CatalogException or a 100-second retry loop.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pandas as pd
from dagster import InputContext, MetadataValue, OutputContext, TableColumn, TableSchema
from dagster._core.storage.db_io_manager import DbIOManager, DbTypeHandler, TableSlice
from dagster_duckdb.io_manager import DuckDbClient, DuckDBIOManager

LINEAGE_TABLE = "asset_lineage"
MATERIALIZE_HINT = "dagster asset materialize -m dedup_assets.definitions --select"
_LOCK_RETRY_SECONDS = (0.5, 1.0, 2.0, 4.0)


class DuckDBUnavailable(RuntimeError):
    """The database file cannot be opened for writing."""


class UpstreamTableMissing(RuntimeError):
    """An asset's input table has not been materialized into this database."""


def _with_concrete_types(frame: pd.DataFrame) -> pd.DataFrame:
    # An object column with no values (an empty frame, or all nulls) would become DuckDB's
    # "NULL" type; store it as text so the table keeps a usable schema.
    untyped = [
        column
        for column in frame.columns
        if frame[column].dtype == object and frame[column].isna().all()
    ]
    return frame.astype({column: "string" for column in untyped}) if untyped else frame


class LineagePandasTypeHandler(DbTypeHandler[pd.DataFrame]):
    def handle_output(
        self, context: OutputContext, table_slice: TableSlice, obj: pd.DataFrame, connection
    ) -> None:
        table = f"{table_slice.schema}.{table_slice.table}"
        frame = _with_concrete_types(obj)
        connection.register("frame_to_store", frame)
        connection.execute(f"create or replace table {table} as select * from frame_to_store")
        connection.unregister("frame_to_store")
        connection.execute(
            f"create table if not exists {table_slice.schema}.{LINEAGE_TABLE} "
            "(table_name varchar primary key, lineage varchar)"
        )
        connection.execute(
            f"insert or replace into {table_slice.schema}.{LINEAGE_TABLE} values (?, ?)",
            [table_slice.table, json.dumps(obj.attrs.get("lineage", {}), sort_keys=True)],
        )
        context.add_output_metadata(
            {
                "dagster/row_count": MetadataValue.int(len(obj)),
                "table": MetadataValue.text(table),
                "columns": MetadataValue.table_schema(
                    TableSchema(
                        columns=[
                            TableColumn(name=str(name), type=str(dtype))
                            for name, dtype in frame.dtypes.items()
                        ]
                    )
                ),
            }
        )

    def load_input(
        self, context: InputContext, table_slice: TableSlice, connection
    ) -> pd.DataFrame:
        table = f"{table_slice.schema}.{table_slice.table}"
        exists = connection.execute(
            "select count(*) from information_schema.tables "
            "where table_schema = ? and table_name = ?",
            [table_slice.schema, table_slice.table],
        ).fetchone()[0]
        if not exists:
            downstream = context.op_def.name if context.has_asset_key else table_slice.table
            raise UpstreamTableMissing(
                f"Table {table} does not exist in {context.resource_config['database']}: asset "
                f"'{table_slice.table}' has not been materialized into this database. Build "
                f"'{downstream}' together with its upstream assets: "
                f"{MATERIALIZE_HINT} '*{downstream}'"
            )
        frame = connection.execute(DuckDbClient.get_select_statement(table_slice)).fetchdf()
        row = connection.execute(
            f"select lineage from {table_slice.schema}.{LINEAGE_TABLE} where table_name = ?",
            [table_slice.table],
        ).fetchone()
        frame.attrs["lineage"] = json.loads(row[0]) if row else {}
        return frame

    @property
    def supported_types(self):
        return [pd.DataFrame]


class FailFastDuckDbClient(DuckDbClient):
    @staticmethod
    @contextmanager
    def connect(context, _):
        database = context.resource_config["database"]
        if database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        config = {"custom_user_agent": "dagster", **context.resource_config["connection_config"]}
        connection = None
        for delay in (*_LOCK_RETRY_SECONDS, None):
            try:
                connection = duckdb.connect(database=database, read_only=False, config=config)
                break
            except duckdb.IOException as error:
                if delay is None:
                    raise DuckDBUnavailable(
                        f"Cannot open {database} for writing: {error}. Another process (a DuckDB "
                        "CLI, a notebook or a second run) holds it; close it and retry, or set "
                        "DEDUP_DATABASE to another file."
                    ) from None
                time.sleep(delay)
        try:
            yield connection
        finally:
            connection.close()


class DedupDuckDBIOManager(DuckDBIOManager):
    """Stores every asset as a table in one DuckDB file, replacing it on each materialization."""

    @staticmethod
    def type_handlers() -> Sequence[DbTypeHandler]:
        return [LineagePandasTypeHandler()]

    @staticmethod
    def default_load_type() -> type | None:
        return pd.DataFrame

    def create_io_manager(self, context) -> DbIOManager:
        return DbIOManager(
            db_client=FailFastDuckDbClient(),
            database=self.database,
            schema=self.schema_,
            type_handlers=self.type_handlers(),
            default_load_type=self.default_load_type(),
            io_manager_name="DedupDuckDBIOManager",
        )
