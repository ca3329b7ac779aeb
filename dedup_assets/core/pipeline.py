"""The whole pipeline in one call, without Dagster: for scripts and the benchmark.

It calls the same step builders with the same :class:`Settings` as the assets, on one DuckDB
file (schema ``dedup``), and times each step. Its release files are byte-identical to the asset
graph's (``manifest.json`` aside from paths).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import duckdb

from .audit import build_recall_audit, stored_true_pairs
from .audit_probe import AUDIT_SAMPLED, audit_pairs_table, audit_probe
from .batches import BatchFolder
from .cluster import build_clusters, build_deduped_documents
from .evaluation import EVALUATION_SUMMARY, build_evaluation_table
from .incremental.batch_clusters import build_batch_clusters
from .incremental.batch_order import index_settings, refuse_other_settings, refuse_out_of_order
from .incremental.batch_pairs import build_batch_pairs
from .incremental.batch_staging import UNSCREENED, batch_start, screen_indexed_doc_ids, staged_lineage
from .incremental.index_changes import add_batch
from .incremental.index_reports import batch_manifest, batch_release_queries
from .incremental.index_tables import IndexTables, indexed_batches
from .ingest import build_documents, build_rejected_documents, input_identity
from .lsh import BucketPressure, build_band_memberships, build_candidate_pairs, hot_buckets_build
from .publish import publish_batch_release, publish_release
from .release import library_versions
from .settings import DEFAULT_DUCKDB_MEMORY, Settings, value_sources
from .sketch import build_fingerprinted
from .store import open_database, write_table
from .streams import stop_on_signals
from .summary import run_counts
from .tables import DOCUMENT_ROWS, HOT_BUCKETS, SCHEMA, Tables, beside
from .verify import build_duplicate_pairs, build_scored_pairs


@contextmanager
def _timed(stages: dict[str, float], name: str) -> Iterator[None]:
    started = time.perf_counter()
    yield
    stages[name] = stages.get(name, 0.0) + time.perf_counter() - started


@dataclass(frozen=True)
class CoreRun:
    """What the core steps came to: the buckets the join was admitted with, and the rows of
    candidate_pairs and duplicate_pairs."""

    pressure: BucketPressure
    candidates: int
    edges: int


def run_core_steps(
    connection: duckdb.DuckDBPyConnection,
    tables: Tables,
    settings: Settings,
    log: Callable[[str], None],
    stage: Callable[[str], AbstractContextManager] = lambda name: nullcontext(),
    audit: bool = True,
) -> CoreRun:
    """From the documents table to duplicate_pairs: fingerprints and bands (and, with ``audit``,
    the recall audit's true pairs, found on the same pass), candidates, exact verification; each
    step inside ``stage(name)`` (fingerprint, candidates, verify)."""
    params = settings.sketch_params()
    with stage("fingerprint"), connection.cursor() as reader:
        probe = (
            audit_probe(
                reader, tables.documents, params.shingling, settings.jaccard_threshold, settings.audit_sample_size,
                params.minhash_seed,
            )
            if audit
            else None
        )
        build = build_fingerprinted(reader, tables, params, settings.batch_size, log, probe)
        write_table(connection, tables.fingerprinted, build)
        if probe is not None:
            write_table(connection, audit_pairs_table(tables), probe.build(), probe.lineage())
        write_table(connection, tables.band_memberships, build_band_memberships(tables))
    with stage("candidates"):
        build, pressure, hot = build_candidate_pairs(connection, tables, settings.pair_limits())
        candidates = write_table(connection, tables.candidate_pairs, build)
        write_table(connection, beside(tables.candidate_pairs, HOT_BUCKETS), hot_buckets_build(hot))
    with stage("verify"):
        build, _ = build_scored_pairs(connection, tables, params, settings.thresholds(), settings.memory_budget_mb)
        write_table(connection, tables.scored_pairs, build)
        edges = write_table(connection, tables.duplicate_pairs, build_duplicate_pairs(tables))
    return CoreRun(pressure, candidates, edges)


def run_library(
    input_path: str,
    database_path: str,
    output_dir: str | None,
    settings: Settings = Settings(),
    *,
    duckdb_memory: str = DEFAULT_DUCKDB_MEMORY,
    log: Callable[[str], None] = lambda message: None,
    labels_path: str | None = None,
) -> dict:
    """Run every step into ``database_path`` and, with ``output_dir``, write the release files.
    ``labels_path`` names labels to evaluate the clusters against. Returns per-step seconds and
    the main counts."""
    tables = Tables.in_schema(SCHEMA)
    params = settings.sketch_params()
    stages: dict[str, float] = {}

    def stage(name: str):
        return _timed(stages, name)

    with open_database(database_path, duckdb_memory, SCHEMA) as connection:
        stop = threading.Event()  # for the fetches of a targets file, in threads a signal never reaches
        with stage("documents"), input_identity(Path(input_path), settings.source_format) as identity:
            rows_table = f"{SCHEMA}.{DOCUMENT_ROWS}" if settings.bodies_read_in_place() else None
            policy = settings.input_policy(stop)
            build, stats = build_documents(Path(input_path), settings.batch_size, policy, log, rows_table)
            with stop_on_signals(stop):
                write_table(connection, tables.documents, build)
            write_table(connection, tables.rejected_documents, build_rejected_documents(stats))
            input_file = identity.result()
        pressure = run_core_steps(connection, tables, settings, log, stage).pressure
        with stage("cluster"):
            write_table(connection, tables.clusters, build_clusters(connection, tables, settings.cluster_params()))
            write_table(connection, tables.deduped_documents, build_deduped_documents(tables))
        with stage("audit"):
            found, sampled = stored_true_pairs(connection, tables, settings.jaccard_threshold)
            build = build_recall_audit(connection, tables, settings.jaccard_threshold, found)
            write_table(connection, tables.recall_audit, build, {AUDIT_SAMPLED: sampled})
        with stage("evaluation"):
            build, summary = build_evaluation_table(
                connection, tables, Path(labels_path) if labels_path else None, params.shingling, params.hash_scheme
            )
            write_table(connection, tables.evaluation, build, {EVALUATION_SUMMARY: summary})
        if output_dir is None:
            counts = run_counts(connection, tables, pressure)
        else:
            with stage("release"):
                paths = {"input_path": input_path, "output_dir": output_dir, "labels_path": labels_path}
                sources = value_sources({**settings.as_dict(), **paths}, {**Settings().as_dict(), **dict.fromkeys(paths)})
                written = publish_release(
                    connection, tables, Path(output_dir), settings, input_file, pressure, database=database_path,
                    log=log, settings_sources=sources, input_read_in_place=bool(stats.read_in_place),
                )
            counts = written["counts"]
    return {
        "stages": stages,
        "documents": counts["document_rows"],
        "candidates": counts["candidate_pair_rows"],
        "duplicates": counts["duplicate_pair_rows"],
        "counts": counts,
    }


def run_batch(
    folder: BatchFolder,
    key: str,
    database_path: str,
    output_dir: str | None,
    settings: Settings = Settings(),
    *,
    duckdb_memory: str = DEFAULT_DUCKDB_MEMORY,
    log: Callable[[str], None] = lambda message: None,
) -> dict:
    """Add batch ``key`` of ``folder`` to the incremental index in ``database_path`` (schema
    ``incremental``), with the same steps as the ``incremental`` assets, and with ``output_dir``
    write its release to ``output_dir/batches/NAME`` (:func:`key_path_name`). Returns per-step
    seconds and the batch's counts."""
    tables = IndexTables.in_schema()
    path = folder.batch(key).path
    params = settings.sketch_params()
    stages: dict[str, float] = {}
    with open_database(database_path, duckdb_memory, tables.schema) as connection:
        indexed = indexed_batches(connection, tables)
        refuse_out_of_order(indexed, folder.earlier(key), key)
        current = index_settings(settings)
        refuse_other_settings(indexed, current, key)
        start = batch_start(indexed, key)
        stop = threading.Event()  # for the fetches of a targets file, in threads a signal never reaches
        with _timed(stages, "documents"), input_identity(path, settings.source_format) as identity:
            build, stats = build_documents(path, settings.batch_size, settings.input_policy(stop), log)
            with stop_on_signals(stop):
                write_table(connection, tables.staged_documents, build, UNSCREENED)
            lineage = staged_lineage(indexed, key, current, identity.result())
            screen_indexed_doc_ids(connection, tables, lineage, stats, settings.fail_on_reject)
            write_table(connection, tables.staged_rejected, build_rejected_documents(stats), lineage)
        with _timed(stages, "fingerprint"), connection.cursor() as reader:
            build = build_fingerprinted(reader, tables.staged(), params, settings.batch_size, log)
            write_table(connection, tables.staged_fingerprints, build, lineage)
        with _timed(stages, "pairs"):
            pairs = build_batch_pairs(
                connection, tables, start, params, settings.thresholds(), settings.pair_limits(),
                settings.memory_budget_mb,
            )
            write_table(connection, tables.staged_pairs, pairs.build, lineage)
        with _timed(stages, "cluster"):
            decided = build_batch_clusters(connection, tables, key, start, settings.prefer_domains)
            for table, build in decided.builds(tables).items():
                write_table(connection, table, build, lineage)
        with _timed(stages, "add"):
            add_batch(connection, tables, key)
        manifest = batch_manifest(connection, tables, key, settings.as_dict(), library_versions())
        if output_dir is not None:
            with _timed(stages, "release"):
                manifest = publish_batch_release(
                    connection, Path(output_dir), key, batch_release_queries(connection, tables, key),
                    manifest, database=database_path, log=log,
                )
    return {"stages": stages, "counts": manifest["counts"], "totals": manifest["totals"]}
