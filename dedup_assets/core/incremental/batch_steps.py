"""Each step of adding one batch, defined once: what it refuses, builds and stages, and the
transaction that adds the staged batch to the index. The ``incremental`` assets
(``assets/batch_graph.py``) call these steps and describe what they staged; ``pipeline/library.py``'s ``run_batch``
calls them in order. A batch's run is the one-shot steps' :class:`Run` with the batch's key, over
the index's tables; its input is read, and its fingerprints made, by the one-shot steps' calls
on the run's engine (which keeps any files of its own in a folder of the index's schema); the
pairs against the index and the decisions are SQL on the index, in the DuckDB file. Every staged table is written with the batch's lineage, which the next step
reads to know it stages on top of the same batch and settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb

from ..read.ingest import build_rejected_documents
from ..read import InputStats
from ..release.files import library_versions
from ..pipeline.run import Run
from ..pipeline.steps import reading
from ..keep.columns import typed_policy
from ..storage.store import TableBuild, table_exists
from .batch_clusters import build_batch_clusters
from .batch_order import index_settings, refuse_other_settings, refuse_out_of_order
from .batch_pairs import BatchPairs, build_batch_pairs
from .batch_staging import UNSCREENED, screen_indexed_doc_ids, staged_lineage
from .index_changes import add_batch
from .index_reports import batch_manifest
from .index_tables import indexed_batches, payload_folder


@dataclass(frozen=True)
class StagedDocuments:
    lineage: dict  # the batch's, which every staged table carries
    stats: InputStats
    earlier_doc_ids: int  # doc_ids an earlier batch holds, rejected as duplicate_doc_id
    rejected: int


def stage_documents(run: Run, path: Path, earlier_in_folder: list[str]) -> StagedDocuments:
    """Refuse, before reading, a batch whose earlier batches are not in the index yet, one that
    later batches depend on, and settings other than the index's; then stage the batch's
    documents and rejects, a doc_id an earlier batch holds rejected as a one-shot run would."""
    settings, tables = run.settings, run.tables
    current = index_settings(settings)
    with run.cursor() as cursor:
        payload_folder(cursor)  # refuses a database the payloads cannot sit beside
        cursor.execute(f"create schema if not exists {tables.schema}")
        indexed = indexed_batches(cursor, tables)
    refuse_out_of_order(indexed, earlier_in_folder, run.batch)
    refuse_other_settings(indexed, current, run.batch)
    with reading(run, path) as (build, stats, identity):
        run.write(tables.staged_documents, _rows(build), UNSCREENED)
    lineage = staged_lineage(indexed, run.batch, current, identity.result())
    with run.cursor() as cursor:
        earlier = screen_indexed_doc_ids(cursor, tables, lineage, stats, settings.fail_on_reject)
    rejected = run.write(tables.staged_rejected, build_rejected_documents(stats), lineage)
    return StagedDocuments(lineage, stats, earlier, rejected)


def stage_fingerprints(run: Run, lineage: Mapping) -> int:
    """The batch's fingerprints, as the one-shot step makes them."""
    settings = run.settings
    with run.cursor() as reader:  # the build streams through it
        build = run.engine.fingerprinted(
            reader, run.tables.staged(), settings.sketch_params(), settings.batch_size, run.log, None
        )
        return run.write(run.tables.staged_fingerprints, _rows(build), lineage)


def _rows(build: TableBuild) -> TableBuild:
    """The build's rows: a staged table is added to the index, which keeps rows, never a view of
    an engine's files (the next batch's replace them)."""
    return replace(build, view=False)


def stage_pairs(run: Run, lineage: Mapping) -> tuple[int, BatchPairs]:
    """The batch's scored pairs, with each other and with the earlier batches' documents."""
    settings = run.settings
    with run.cursor() as cursor:
        pairs = build_batch_pairs(
            cursor, run.tables, lineage["first_position"],
            settings.sketch_params(), settings.thresholds(), settings.pair_limits(), settings.memory_budget_mb,
        )
    return run.write(run.tables.staged_pairs, pairs.build, lineage), pairs


def stage_clusters(run: Run, lineage: Mapping) -> dict[str, int]:
    """The batch's decisions, the earlier clusters it renames and its bridges: rows by table."""
    with run.cursor() as cursor:
        # typed over the index's documents and the batch's, which the decisions compare
        documents = [run.tables.staged_documents] + ([run.tables.documents] if table_exists(cursor, run.tables.documents) else [])
        keep = typed_policy(cursor, run.settings.keep_policy(), documents)
        decided = build_batch_clusters(cursor, run.tables, run.batch, lineage["first_position"], keep)
    return {table: run.write(table, build, lineage) for table, build in decided.builds(run.tables).items()}


def add_to_index(run: Run, cursor: duckdb.DuckDBPyConnection) -> dict:
    """Add the staged batch to the index in one transaction; the batch's manifest (its counts and
    the running totals)."""
    add_batch(cursor, run.tables, run.batch)
    return batch_manifest(cursor, run.tables, run.batch, run.settings.as_dict(), library_versions())
