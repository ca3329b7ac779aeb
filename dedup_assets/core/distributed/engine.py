"""The ``ray`` engine: the steps of ``core/engines.py``'s protocol as Ray Data pipelines over the
run's Parquet folders (``steps.py``), each handed to DuckDB as a view."""

from __future__ import annotations

from ..lsh import HOT_BUCKET_ROWS_SCHEMA
from ..verify import verification_memory_estimate
from . import steps
from .steps import RayTables


class RayStepsEngine:
    """``tables``: the run's folders and partitions; components of at most ``driver_edges``
    accepted edges run on the Dagster node."""

    def __init__(self, tables: RayTables, driver_edges: int) -> None:
        self.tables = tables
        self.driver_edges = driver_edges

    def documents(self, build):
        return steps.documents(self.tables, build.batches)

    def fingerprinted(self, connection, tables, params, batch_size, log):
        return steps.fingerprint(self.tables, params, batch_size)

    def candidate_pairs(self, connection, tables, limits):
        # hot buckets are refused on this engine (capabilities.py), so none is ever left out
        build, pressure = steps.candidate_pairs(self.tables, limits)
        return build, pressure, HOT_BUCKET_ROWS_SCHEMA.empty_table()

    def scored_pairs(self, connection, tables, params, thresholds, memory_budget_mb):
        build = steps.scored_pairs(self.tables, params, thresholds)
        reshingled, _ = verification_memory_estimate(connection, tables, params.num_perm)
        return build, reshingled

    def duplicate_pairs(self, tables):
        return steps.duplicate_pairs(self.tables)

    def clusters(self, connection, tables, params, log):
        return steps.clusters(self.tables, params, self.driver_edges, log)

    def deduped_documents(self, tables):
        return steps.deduped_documents(self.tables)

    def first_copies(self, connection, tables):
        return steps.first_copies(self.tables)
