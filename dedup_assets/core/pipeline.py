"""The whole pipeline in one call, without Dagster: for scripts and the benchmark.

It runs the same stage builders as the assets, on one DuckDB file, and times each stage.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import duckdb

from .fingerprint import SketchParams, lsh_probability
from .inputs import describe_input
from .settings import Settings
from .release import library_versions, write_release
from .stages import (
    BucketPressure,
    Tables,
    build_band_memberships,
    build_candidate_pairs,
    build_clusters,
    build_deduped_documents,
    build_documents,
    build_rejected_documents,
    build_duplicate_pairs,
    build_fingerprinted,
    build_scored_pairs,
)
from .summary import reason_counts, rejected_by_reason, run_counts
from .tables import connect, write_table
from .verify import Thresholds


def run_library(
    input_path: str,
    database_path: str,
    output_dir: str | None,
    settings: Settings = Settings(),
    *,
    duckdb_memory: str = "2GB",
    log: Callable[[str], None] = lambda message: None,
) -> dict:
    """Run every stage into ``database_path`` (schema ``dedup``) and, with ``output_dir``, write
    the release files. Returns per-stage seconds and the main counts."""
    params, thresholds = settings.sketch_params(), settings.thresholds()
    batch_size, max_pair_slots, memory_budget_mb = settings.batch_size, settings.max_pair_slots, settings.memory_budget_mb
    tables = Tables.in_schema("dedup")
    stages: dict[str, float] = {}

    @contextmanager
    def stage(name: str):
        started = time.perf_counter()
        yield
        stages[name] = stages.get(name, 0.0) + time.perf_counter() - started

    Path(database_path).parent.mkdir(parents=True, exist_ok=True)
    with connect(database_path, duckdb_memory) as connection:
        connection.execute("create schema if not exists dedup")
        with stage("documents"):
            build, stats = build_documents(Path(input_path), batch_size, settings.input_policy(), log)
            write_table(connection, tables.documents, build)
            write_table(connection, tables.rejected_documents, build_rejected_documents(stats))
        with stage("fingerprint"):
            build = build_fingerprinted(connection.cursor(), tables, params, batch_size, log)
            write_table(connection, tables.fingerprinted, build)
            write_table(connection, tables.band_memberships, build_band_memberships(tables))
        with stage("candidates"):
            build, pressure = build_candidate_pairs(connection, tables, max_pair_slots)
            write_table(connection, tables.candidate_pairs, build)
        with stage("verify"):
            build = build_scored_pairs(connection, tables, params, thresholds, memory_budget_mb)
            write_table(connection, tables.scored_pairs, build)
            write_table(connection, tables.duplicate_pairs, build_duplicate_pairs(tables))
        with stage("cluster"):
            write_table(connection, tables.clusters, build_clusters(connection, tables))
            write_table(connection, tables.deduped_documents, build_deduped_documents(tables))

        def summarize(cursor) -> tuple[dict, dict]:
            return release_summary(
                cursor,
                tables,
                pressure,
                params,
                thresholds,
                {**params.__dict__, **thresholds.__dict__},
                lambda counts: describe_input(Path(input_path)).__dict__,
            )

        if output_dir is None:
            counts = run_counts(connection, tables, pressure.pair_slots)
        else:
            with stage("release"):
                counts = write_release(connection, tables, Path(output_dir), summarize)["counts"]
    return {
        "stages": stages,
        "documents": counts["document_rows"],
        "candidates": counts["candidate_pair_rows"],
        "duplicates": counts["duplicate_pair_rows"],
        "counts": counts,
    }


def release_summary(
    cursor: duckdb.DuckDBPyConnection,
    tables: Tables,
    pressure: BucketPressure,
    params: SketchParams,
    thresholds: Thresholds,
    settings: dict,
    input_entry: Callable[[dict], dict],
) -> tuple[dict, dict]:
    """The candidate summary row and the manifest's entries besides its files, for the manifest
    asset and :func:`run_library` alike. ``input_entry(counts)`` describes the input."""
    counts = run_counts(cursor, tables, pressure.pair_slots)
    return candidate_summary(counts, pressure, params, thresholds), {
        "product": "dedup-assets",
        "settings": settings,
        "input": input_entry(counts),
        "versions": library_versions(),
        "counts": counts,
        "pair_reasons": reason_counts(cursor, tables.scored_pairs),
        "rejected_by_reason": rejected_by_reason(cursor, tables.rejected_documents),
    }


def candidate_summary(counts: dict, pressure, params: SketchParams, thresholds: Thresholds) -> dict:
    """The one-row ``candidate_summary.csv``."""
    return {
        "document_rows": counts["document_rows"],
        "possible_pair_rows": counts["possible_pair_rows"],
        "candidate_pair_rows": counts["candidate_pair_rows"],
        "candidate_reduction_ratio": counts["candidate_reduction_ratio"],
        "candidate_pair_slots": pressure.pair_slots,
        "largest_bucket_size": pressure.largest_bucket_size,
        "bands": params.bands,
        "rows_per_band": params.rows_per_band,
        "lsh_probability_at_threshold": round(
            lsh_probability(thresholds.jaccard, params.bands, params.rows_per_band), 4
        ),
    }
