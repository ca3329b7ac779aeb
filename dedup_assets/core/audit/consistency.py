"""Whether another engine's tables are the DuckDB engine's (the reference, ``pipeline/capabilities.py``).

The DuckDB engine's steps run again over the same documents, in a scratch schema of the same
database, and each compared table is set against its DuckDB twin both ways, as multisets of
whole rows. The scratch schema is dropped afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import duckdb

from ..pipeline.capabilities import REFERENCE
from ..cluster.components import build_clusters, build_deduped_documents
from ..pipeline.library import found_settings, run_core_steps
from ..settings.model import Settings
from ..storage.store import TableBuild, write_table
from ..storage.tables import CONSISTENCY_SCHEMA, Tables

COMPARED = ("fingerprinted", "candidate_pairs", "scored_pairs", "duplicate_pairs", "clusters", "deduped_documents")
SCRATCH_SCHEMA = CONSISTENCY_SCHEMA


def engine_differences(
    connection: duckdb.DuckDBPyConnection, tables: Tables, settings: Settings, log: Callable[[str], None]
) -> dict[str, tuple[int, int]]:
    """Per compared table: (rows only in ``tables``, rows only in the DuckDB engine's)."""
    scratch = Tables.in_schema(SCRATCH_SCHEMA)
    duckdb_settings = replace(settings, engine=REFERENCE)
    connection.execute(f"drop schema if exists {SCRATCH_SCHEMA} cascade")
    connection.execute(f"create schema {SCRATCH_SCHEMA}")
    try:
        # a table, in input order: the DuckDB steps find first copies by row order
        write_table(connection, scratch.documents, TableBuild(sql=f"select * from {tables.documents}"))
        run_core_steps(connection, scratch, duckdb_settings, log)
        # both engines match references by the same SQL over their tables: the run's matches
        write_table(connection, scratch.reference_matches, TableBuild(sql=f"select * from {tables.reference_matches}"))
        # with the passages its fingerprinting found to leave out (ignore_shared_above), as the run's steps
        found = found_settings(connection, scratch, duckdb_settings)
        write_table(connection, scratch.clusters, build_clusters(connection, scratch, found.cluster_params()))
        write_table(connection, scratch.deduped_documents, build_deduped_documents(scratch))
        return {
            name: tuple(
                connection.execute(
                    f"select count(*) from (select * from {first} except all select * from {second})"
                ).fetchall()[0][0]
                for first, second in (
                    (getattr(tables, name), getattr(scratch, name)),
                    (getattr(scratch, name), getattr(tables, name)),
                )
            )
            for name in COMPARED
        }
    finally:
        connection.execute(f"drop schema if exists {SCRATCH_SCHEMA} cascade")
