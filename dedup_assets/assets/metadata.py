"""How tables look in the UI: row counts, column schemas, markdown previews and small tables."""

from __future__ import annotations

from collections.abc import Iterable

import duckdb
from dagster import MetadataValue, TableColumn, TableSchema

from .column_docs import describe

PREVIEW_ROWS = 10


def scalar(cursor: duckdb.DuckDBPyConnection, query: str):
    return cursor.execute(query).fetchall()[0][0]


def table_metadata(cursor: duckdb.DuckDBPyConnection, table: str, rows: int) -> dict:
    """The row count and column schema Dagster shows for every stored table, each column with
    what it holds."""
    columns = cursor.execute(f"describe {table}").fetchall()
    return {
        "dagster/row_count": MetadataValue.int(rows),
        "dagster/column_schema": MetadataValue.table_schema(
            TableSchema(columns=[TableColumn(name, kind, describe(table, name)) for name, kind, *_ in columns])
        ),
    }


def preview(cursor: duckdb.DuckDBPyConnection, query: str) -> MetadataValue:
    """The first rows of ``query`` as a markdown table."""
    frame = cursor.execute(f"select * from ({query}) limit {PREVIEW_ROWS}").fetchdf()
    return MetadataValue.md(frame.to_markdown(index=False) if len(frame) else "_no rows_")


def markdown_table(header: Iterable[str], rows: Iterable[Iterable]) -> MetadataValue:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(value) for value in row) + " |" for row in rows]
    return MetadataValue.md("\n".join(lines))


def percent_fewer(possible: int, candidates: int) -> str:
    """The reduction as a percentage with two decimals, or as many as it takes not to round a
    large corpus's reduction up to a misleading 100%."""
    if not possible:
        return "0%"
    fewer = 1.0 - candidates / possible
    decimals = 2
    while round(fewer * 100, decimals) == 100 and candidates and decimals < 12:
        decimals += 1
    return f"{fewer * 100:.{decimals}f}%"
