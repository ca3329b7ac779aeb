"""A release file from a query: the one function that writes each of them, on the Dagster node
and, for the large files of an engine that writes them on its cluster, on the workers
(``distributed/ray_release.py``); and text cells made safe for spreadsheets."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa

from ..read.files import file_sha256
from ..settings.choices import DEFAULT_COMPRESSION
from .parquet_files import Written, write_parquet, write_parquet_parts


def write_output(
    cursor: duckdb.DuckDBPyConnection,
    query: str,
    output_dir: Path,
    name: str,
    arrow_inputs: dict[str, pa.Table],
    params: dict | None = None,
    compression: str = DEFAULT_COMPRESSION,
    written: Written | None = None,
) -> list[dict]:
    """Release file ``name`` in ``output_dir`` from ``query`` (with ``params`` bound by name) on
    ``cursor`` (which it closes): the file's name, rows and sha256, or each part's for a name
    without a suffix, a folder of Parquet parts (Parquet compressed with ``compression``;
    ``written`` told each row group's rows). Cursors are made by the calling thread: making them
    concurrently is not safe."""
    path = output_dir / name
    with cursor:
        for table_name, table in arrow_inputs.items():
            cursor.register(table_name, table)
        if not path.suffix:
            parts = write_parquet_parts(cursor.sql(query, params=params), path, compression=compression, written=written)
            return [{**part, "file": f"{name}/{part['file']}"} for part in parts]
        if path.suffix == ".parquet":
            return [{"file": name, **write_parquet(cursor.sql(query, params=params), path, compression, written)}]
        # the written rows come back from the copy itself, so the query runs once
        columns = spreadsheet_safe_columns(cursor.sql(f"select * from ({query}) limit 0", params=params))
        written = cursor.execute(
            f"copy (select {columns} from ({query})) to $release_file (header)", {**(params or {}), "release_file": str(path)}
        ).fetchall()[0][0]
    return [{"file": name, "rows": int(written), "sha256": file_sha256(path)}]


def spreadsheet_safe(relation: duckdb.DuckDBPyRelation) -> duckdb.DuckDBPyRelation:
    """The relation with its text cells made safe for spreadsheets (:func:`spreadsheet_safe_columns`)."""
    return relation.project(spreadsheet_safe_columns(relation))


def spreadsheet_safe_columns(relation: duckdb.DuckDBPyRelation) -> str:
    """The select list that gives the relation's columns with every text cell that a spreadsheet
    would run as a formula (one that starts with =, +, -, @, a tab or a carriage return) prefixed
    with a single quote, as OWASP advises for CSV files. A cell that starts with a quote gets one
    more, so that removing one leading quote gives back every value (and doc_ids still join across
    the CSV files). Parquet files keep the values as they are."""
    columns = []
    for name, kind in zip(relation.columns, relation.types):
        quoted = '"' + name.replace('"', '""') + '"'
        if str(kind) == "VARCHAR":
            columns.append(
                f"case when regexp_matches({quoted}, '^[-=+@\\t\\r'']') then '''' || {quoted} "
                f"else {quoted} end as {quoted}"
            )
        else:
            columns.append(quoted)
    return ", ".join(columns)
