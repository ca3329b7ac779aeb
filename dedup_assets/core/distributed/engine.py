"""The ``ray`` engine: the steps of ``core/pipeline/engines.py``'s protocol on a Ray cluster over the
run's Parquet folders, each handed to DuckDB as a view, every step on Daft's Ray runner
(``ray_sketch.py``, ``ray_candidates.py``, ``ray_verify.py``, ``components.py``,
``ray_clusters.py``), the engine issue 51 chose to replace Ray Data. ``deduped_documents`` is
the DuckDB engine's view, over this engine's views of ``documents`` and ``clusters``.

The rules are the DuckDB engine's (``lsh/candidates.py``, ``verify/pairs.py``, ``cluster/components.py`` and their SQL):
copy groups and first copies in input order, the same pair slots and limits, exact Jaccard from
the bodies, connected components named by their smallest doc_id, the same keep rule. The recall
audit's probe is fed by the workers as they fingerprint, and the release's two large files
(``fingerprinted.parquet`` and ``deduped_documents/``) are written by them (``ray_release.py``);
reading the input, the audit's counts, the release's other files and its manifest stay on the
Dagster node (docs/scale-out.md).
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from pathlib import Path

from ..cluster.components import build_deduped_documents, reference_members
from ..keep.columns import typed_params
from ..lsh.candidates import hot_bucket_rows
from ..pipeline.step_assets import BATCH_STEP_ASSETS, ONE_SHOT_STEP_ASSETS
from ..storage.store import table_exists
from ..storage.tables import INDEX_SCHEMA, SCHEMA
from ..verify.pairs import verification_memory_estimate
from .ray_candidates import candidate_pairs, first_copies
from .daft_watch import watch_daft, watched_steps
from .datasets import table_bytes
from .plan import ClusterOptions, shuffle_plan
from .ray_clusters import clusters
from .ray_release import release_write
from .ray_sketch import documents, documents_of_table, fingerprint
from .ray_tables import RayTables
from .ray_verify import duplicate_pairs, scored_pairs
from .session import cluster_cpus, cluster_object_store, ray_session, use_shuffle


@watched_steps
class RayStepsEngine:
    """``tables``: the run's folders and partitions; components of at most ``driver_edges``
    accepted edges run on the Dagster node."""

    def __init__(self, tables: RayTables, driver_edges: int) -> None:
        self.tables = tables
        self.driver_edges = driver_edges

    def documents(self, build):
        return documents(self.tables, build.batches)

    def fingerprinted(self, connection, tables, params, batch_size, log, probe):
        if table_exists(connection, tables.documents, "BASE TABLE"):
            # rows the run keeps in DuckDB, not a view of this engine's folder: a batch's
            # documents, screened against the index after this engine wrote them
            documents_of_table(self.tables, connection, tables.documents, batch_size)
        return fingerprint(self.tables, params, batch_size, probe)

    def candidate_pairs(self, connection, tables, limits):
        build, pressure, hot = candidate_pairs(self.tables, limits)
        # listed by the DuckDB engine's query: only when buckets were left out, over the band keys' view
        return build, pressure, hot_bucket_rows(connection, tables, hot)

    def scored_pairs(self, connection, tables, params, thresholds, memory_budget_mb, log):
        build = scored_pairs(self.tables, params, thresholds)
        reshingled, _ = verification_memory_estimate(connection, tables, params.num_perm)
        return build, reshingled

    def duplicate_pairs(self, tables):
        return duplicate_pairs(self.tables)

    def clusters(self, connection, tables, params, log):
        matched = reference_members(connection, tables)  # reference_matches is a table of the Dagster node's file
        return clusters(self.tables, typed_params(connection, params, tables), self.driver_edges, matched, log)

    def deduped_documents(self, tables):
        # a view, as on engine duckdb, over this engine's views of documents and clusters: written
        # out, it copied every kept body once more (35 s of 280 at 1M on two nodes) before the
        # release copied them again
        return build_deduped_documents(tables)

    def first_copies(self, connection, tables):
        return first_copies(self.tables)

    def release_files(self, connection, queries, output_dir, compression, log):
        # not watched for stalls: one call writes a whole file, which at 100M documents runs past
        # any stall timeout with no task finishing; its calls run in Daft's workers, which hold
        # the nodes' CPUs, so they wait for none, and a failure has the Dagster node write the file
        return release_write(connection, queries, output_dir, compression, log)


def open_ray_engine(database: str, cluster: ClusterOptions, session: ExitStack, schema: str = SCHEMA) -> RayStepsEngine:
    """The ray engine over the Parquet folders of the run on ``database`` (those of tables in
    another schema than the one-shot run's, a batch's, in a folder of that name), with Ray started
    or joined on ``session`` (a session already open is used as is, so each step may ask again),
    and the shuffle planned for the documents written so far."""
    session.enter_context(ray_session(cluster.address or os.environ.get("DEDUP_RAY_ADDRESS") or None))
    root = cluster.dataset_root or os.environ.get("DEDUP_DATASETS") or f"{Path(database).expanduser()}.datasets"
    root = Path(root).expanduser().resolve() / ("" if schema == SCHEMA else schema)
    documents = table_bytes(root, "documents")
    plan = shuffle_plan(cluster.shuffle, cluster.shuffle_partitions, documents, cluster_cpus(), cluster_object_store())
    use_shuffle(plan.disk, cluster.shuffle_partitions)
    watch_daft(cluster.stall_timeout_s, BATCH_STEP_ASSETS if schema == INDEX_SCHEMA else ONE_SHOT_STEP_ASSETS)
    return RayStepsEngine(RayTables(root, plan.partitions), cluster.components_on_driver_up_to_edges)
