"""The asset checks: thin Dagster wrappers that run the plain functions of ``rules.py`` and
``cluster_rules.py`` on the stored tables after each materialization. The blocking ones stop downstream assets from running
on bad data."""

import warnings
from dataclasses import replace
from pathlib import Path

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    PreviewWarning,
    asset_check,
)

from ..assets.batch_graph import staged_batch_lineage
from ..batch_runs.batch_partitions import BATCHES, folder_batches
from ..core.audit.recall import stored_audit_summary
from ..core.pipeline.capabilities import CAPABILITIES, REFERENCE
from ..core.audit.consistency import engine_differences
from ..core.audit.contract import contract_path_for
from ..core.incremental.batch_order import index_settings, settings_problems
from ..core.incremental.index_tables import IndexTables, indexed_batches
from ..core.settings.model import Settings, SettingsError
from ..core.storage.store import table_exists
from ..core.text.passages import lineage_shingling
from ..core.read import count_input_records
from ..engine_resource import EngineResource
from ..launch.entry_point import how_to_fix
from ..launch.user_messages import user_errors
from ..settings_resource import DedupSettings
from ..stored_tables.warehouse import DuckDBWarehouse
from . import cluster_rules, rules

INDEX_TABLES = IndexTables.in_schema()


@asset_check(asset="documents", blocking=True, description="Every document has its own doc_id.")
def doc_id_unique(warehouse: DuckDBWarehouse) -> AssetCheckResult:
    with warehouse.cursor() as cursor:
        return rules.doc_id_unique(cursor, warehouse.tables.documents)


@asset_check(
    asset="documents",
    blocking=True,
    description="Input rows = documents + rejected_documents, counted again from the input file.",
    additional_deps=["rejected_documents"],
)
def input_records_accounted(warehouse: DuckDBWarehouse) -> AssetCheckResult:
    tables = warehouse.tables
    lineage = warehouse.upstream_lineage("documents", "documents")
    records = count_input_records(Path(lineage["input_path"]), lineage.get("source_format"))
    with warehouse.cursor() as cursor:
        return rules.input_records_accounted(cursor, records, tables.documents, tables.rejected_documents)


@asset_check(
    asset="candidate_pairs",
    blocking=True,
    description="Each pair appears once, with left_doc_id < right_doc_id.",
)
def candidate_pairs_ordered_and_unique(warehouse: DuckDBWarehouse) -> AssetCheckResult:
    with warehouse.cursor() as cursor:
        return rules.pairs_ordered_and_unique(cursor, warehouse.tables.candidate_pairs)


@asset_check(
    asset="duplicate_pairs",
    blocking=True,
    description="Each edge appears once, with left_doc_id < right_doc_id.",
)
def duplicate_pairs_ordered_and_unique(warehouse: DuckDBWarehouse) -> AssetCheckResult:
    with warehouse.cursor() as cursor:
        return rules.pairs_ordered_and_unique(cursor, warehouse.tables.duplicate_pairs)


@asset_check(
    asset="duplicate_pairs",
    blocking=True,
    description="Every accepted edge has exact Jaccard at or above the threshold it was scored with.",
)
def duplicate_edges_meet_threshold(warehouse: DuckDBWarehouse) -> AssetCheckResult:
    threshold = warehouse.upstream_lineage("duplicate_pairs", "duplicate_pairs")["jaccard_threshold"]
    with warehouse.cursor() as cursor:
        return rules.duplicate_edges_meet_threshold(cursor, warehouse.tables.duplicate_pairs, float(threshold))


@asset_check(
    asset="clusters",
    blocking=True,
    description="Every input document is in exactly one cluster.",
    additional_deps=["documents"],
)
def every_document_in_one_cluster(warehouse: DuckDBWarehouse) -> AssetCheckResult:
    with warehouse.cursor() as cursor:
        return cluster_rules.every_document_in_one_cluster(cursor, warehouse.tables.documents, warehouse.tables.clusters)


@asset_check(asset="clusters", blocking=True, description="Each cluster keeps exactly one representative.")
def one_representative_per_cluster(warehouse: DuckDBWarehouse) -> AssetCheckResult:
    with warehouse.cursor() as cursor:
        return cluster_rules.one_representative_per_cluster(cursor, warehouse.tables.clusters)


@asset_check(
    asset="deduped_documents",
    blocking=True,
    description="Representatives plus removed duplicates equal the input documents.",
    additional_deps=["documents", "clusters"],
)
def representatives_account_for_input(warehouse: DuckDBWarehouse) -> AssetCheckResult:
    tables = warehouse.tables
    with warehouse.cursor() as cursor:
        return cluster_rules.representatives_account_for_input(
            cursor, tables.documents, tables.clusters, tables.deduped_documents
        )


@asset_check(
    asset="clusters",
    description="Warns when a cluster has more than max_cluster_size documents (usually a chain "
    "through shared boilerplate); the metadata names the largest clusters.",
)
def largest_cluster_within_max_cluster_size(dedup: DedupSettings, warehouse: DuckDBWarehouse) -> AssetCheckResult:
    with user_errors():
        settings = dedup.settings()
    with warehouse.cursor() as cursor:
        return cluster_rules.largest_cluster_within(cursor, warehouse.tables.clusters, settings.max_cluster_size)


@asset_check(
    asset="clusters",
    description="Warns when documents are removed with Jaccard below the threshold with their "
    "representative, chained to it through other members; the metadata names the worst clusters.",
)
def no_chained_members(warehouse: DuckDBWarehouse) -> AssetCheckResult:
    threshold = warehouse.upstream_lineage("clusters", "clusters")["jaccard_threshold"]
    with warehouse.cursor() as cursor:
        return cluster_rules.no_chained_members(cursor, warehouse.tables.clusters, float(threshold))


@asset_check(
    asset="clusters",
    blocking=True,
    description="Every removed document's exact Jaccard with its representative is at least the "
    "threshold; with cluster_mode components, a document below it is marked chained (and only such "
    "a one). With star, none is below it. A pair scored_pairs scored keeps its Jaccard there, but "
    f"{cluster_rules.REFERENCE_SAMPLE:,} of them, drawn by a hash of their doc_ids keyed by "
    "minhash_seed, are recomputed from their bodies by the Python reference (no kernel) and must "
    "equal it, which catches a wrong Jaccard kernel or scored_pairs; every removal scored_pairs did "
    "not score is measured again from its two bodies.",
    additional_deps=["documents", "fingerprinted", "scored_pairs"],
)
def removals_meet_threshold(warehouse: DuckDBWarehouse) -> AssetCheckResult:
    lineage = warehouse.upstream_lineage("clusters", "clusters")
    with warehouse.cursor() as cursor:
        return cluster_rules.removals_meet_threshold(
            cursor, warehouse.tables, lineage_shingling(lineage), lineage["hash_scheme"],
            float(lineage["jaccard_threshold"]), lineage["cluster_mode"], int(lineage["minhash_seed"]),
        )


def not_compared(why: str) -> AssetCheckResult:
    """The result of a comparison with nothing to compare with: it passes, as what it states
    holds for no input it applies to, and says why nothing was compared (``compared`` false)."""
    return AssetCheckResult(passed=True, description=f"not compared: {why}", metadata={"compared": False})


@asset_check(
    asset="manifest",
    blocking=True,
    description="When the input ships <name>.expected.json written for the run's settings, the "
    "run's counts, pair reasons and duplicate clusters match it. Otherwise nothing is compared: "
    "it passes, saying why (compared: false in its metadata).",
    additional_deps=["scored_pairs", "clusters"],
)
def fixture_contract(
    context: AssetCheckExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse
) -> AssetCheckResult:
    with user_errors():
        settings = dedup.settings()
    contract, contract_file = rules.comparable_contract(dedup.input_file(), settings.as_dict())
    if contract is None:
        if contract_path_for(dedup.input_file()).is_file():  # one the run's settings do not fit: worth a line
            context.log.info(f"fixture_contract not compared: {contract_file}")
        return not_compared(contract_file)
    tables = warehouse.tables
    with warehouse.cursor() as cursor:
        return rules.fixture_contract(
            cursor, contract, contract_file, warehouse.qualified("manifest"), tables.scored_pairs, tables.clusters
        )


def _index_not_comparable(settings: Settings, indexed: list) -> str | None:
    """Why this run cannot be compared with the incremental index's batches, if it cannot."""
    if not indexed:
        return "the incremental index holds no batch"
    if settings.cluster_mode != "components":
        return f"this run's clusters are {settings.cluster_mode} clusters, the incremental index's are connected components"
    if settings.hot_buckets != "refuse":
        return "this run left hot buckets out of its join (hot_buckets skip); the incremental index refuses them"
    # the index is always the reference engine's; another's tables are compared with it the same
    try:
        current = index_settings(replace(settings, engine=REFERENCE))
    except SettingsError as refused:  # settings an index cannot take (reference, ignore_shared_above)
        return f"the incremental index cannot be built with this run's settings: {refused}"
    changed = settings_problems(indexed, current)
    if changed:
        return (
            "the index was built with other settings ("
            + ", ".join(f"{name}={built!r}" for name, built, _ in changed) + ")"
        )
    return None


@asset_check(
    asset="clusters",
    description="When the incremental index holds exactly this run's documents (the batches of "
    "DEDUP_BATCHES, run one-shot over that folder) with the same settings, its edges and clusters "
    "are this run's. Otherwise nothing is compared: it passes, saying why (compared: false in its "
    "metadata), and where the index holds batches the run's log says why too.",
    additional_deps=["fingerprinted", "duplicate_pairs"],
)
def same_as_incremental(
    context: AssetCheckExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse
) -> AssetCheckResult:
    with user_errors():
        settings = dedup.settings()
    with warehouse.cursor() as cursor:
        indexed = indexed_batches(cursor, INDEX_TABLES)
        why = _index_not_comparable(settings, indexed)
        result = None if why else rules.same_as_incremental(cursor, warehouse.tables, INDEX_TABLES)
    if why is None and result is None:
        why = (
            "this run's documents are not the incremental index's (run the one-shot graph with "
            "DEDUP_INPUT set to the batch folder to compare)"
        )
    if why is None:
        return result
    if indexed:  # the usual case, an empty index, is no news
        context.log.info(f"same_as_incremental not compared: {why}")
    return not_compared(why)


def batch_check(**spec):
    """An asset check of the incremental graph, declared per batch (the batches' partitions):
    Dagster records its result under the batch it checked, so each batch's checks are seen for
    that batch (in the UI, the GraphQL API and the run's log), where a check without partitions
    keeps one latest result for every batch. Blocking: a batch that fails one is not released."""

    def declare(function):
        with warnings.catch_warnings():
            # partitions on a check are a preview in Dagster 1.13 (pinned below 1.14), said on
            # every load of the definitions, in every dagster and dg command's output; what they
            # record per batch is pinned down by test_incremental_assets
            warnings.simplefilter("ignore", PreviewWarning)
            return asset_check(partitions_def=BATCHES, blocking=True, **spec)(function)

    return declare


@batch_check(
    asset="batch_documents",
    description="The batch's input rows = its documents + its rejected rows, counted again from its file.",
    additional_deps=["batch_rejected_documents"],
)
def batch_records_accounted(context: AssetCheckExecutionContext, warehouse: DuckDBWarehouse) -> AssetCheckResult:
    key = context.partition_key
    with user_errors():
        batch = folder_batches().batch(key)
    lineage = staged_batch_lineage(warehouse, INDEX_TABLES.staged_documents, key)
    records = count_input_records(batch.path, lineage.get("source_format"))
    with warehouse.cursor() as cursor:
        return rules.input_records_accounted(
            cursor, records, INDEX_TABLES.staged_documents, INDEX_TABLES.staged_rejected
        )


@batch_check(asset="batch_pairs", description="Each pair appears once, with left_doc_id < right_doc_id.")
def batch_pairs_ordered_and_unique(context: AssetCheckExecutionContext, warehouse: DuckDBWarehouse) -> AssetCheckResult:
    staged_batch_lineage(warehouse, INDEX_TABLES.staged_pairs, context.partition_key)
    with warehouse.cursor() as cursor:
        return rules.pairs_ordered_and_unique(cursor, INDEX_TABLES.staged_pairs)


@batch_check(
    asset="batch_clusters",
    description="Every document of the batch has exactly one decision.",
    additional_deps=["batch_documents"],
)
def batch_documents_decided(context: AssetCheckExecutionContext, warehouse: DuckDBWarehouse) -> AssetCheckResult:
    staged_batch_lineage(warehouse, INDEX_TABLES.staged_clusters, context.partition_key)
    with warehouse.cursor() as cursor:
        return cluster_rules.every_document_in_one_cluster(cursor, INDEX_TABLES.staged_documents, INDEX_TABLES.staged_clusters)


@batch_check(
    asset="batch_clusters",
    description="Each document the batch removes names a document kept in the batch it names "
    "(representative_doc_id, representative_batch): this batch's, or an earlier one's in the index.",
)
def batch_removals_name_kept_documents(context: AssetCheckExecutionContext, warehouse: DuckDBWarehouse) -> AssetCheckResult:
    key = context.partition_key
    staged_batch_lineage(warehouse, INDEX_TABLES.staged_clusters, key)
    with warehouse.cursor() as cursor:
        earlier = INDEX_TABLES.clusters if table_exists(cursor, INDEX_TABLES.clusters) else None
        return cluster_rules.removals_name_kept_representatives(cursor, INDEX_TABLES.staged_clusters, key, earlier)


# the incremental graph's checks, which materialize() needs beside INCREMENTAL_ASSETS
BATCH_CHECKS = [batch_records_accounted, batch_pairs_ordered_and_unique, batch_documents_decided, batch_removals_name_kept_documents]


@asset_check(
    asset="recall_audit",
    description="Warns when the recall the audit measured is below min_recall, over every true pair, "
    "over the near copies or in any Jaccard band, in one line with the bands in use and the command "
    "that makes LSH find more (preset web, or bands chosen for recall). When the sample has no true "
    "pair nothing is measured: it passes, saying so (compared: false in its metadata).",
)
def recall_reaches_min_recall(dedup: DedupSettings, warehouse: DuckDBWarehouse) -> AssetCheckResult:
    with user_errors():
        settings = dedup.settings()
    with warehouse.cursor() as cursor:
        summary = stored_audit_summary(cursor, warehouse.tables.recall_audit)
    if not summary["true_pairs"]:
        return not_compared(f"the {summary['sampled_documents']:,} sampled documents have no true pair to measure recall on")
    return rules.recall_reaches_min_recall(summary, settings, how_to_fix)


@asset_check(
    asset="deduped_documents",
    blocking=True,
    description="On engine ray: fingerprinted, candidate_pairs, scored_pairs, duplicate_pairs, clusters and deduped_documents "
    "are the DuckDB engine's, row for row, both ways (the DuckDB steps run again over the same "
    "documents, up to the engine resource's compare_up_to_documents).",
    additional_deps=["fingerprinted", "candidate_pairs", "scored_pairs", "duplicate_pairs", "clusters"],
)
def engine_matches_duckdb(
    context: AssetCheckExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse, engine: EngineResource
) -> AssetCheckResult:
    lineage = warehouse.upstream_lineage("deduped_documents", "deduped_documents")
    built_on = lineage.get("engine", REFERENCE)  # tables from before the setting were duckdb's
    with warehouse.cursor() as cursor:
        documents = cursor.execute(f"select count(*) from {warehouse.tables.documents}").fetchall()[0][0]
        differences = None
        if not CAPABILITIES[built_on].reference and documents <= engine.compare_up_to_documents:
            with user_errors():
                differences = engine_differences(cursor, warehouse.tables, dedup.settings(), context.log.info)
    return rules.engine_matches_duckdb(built_on, differences, documents, engine.compare_up_to_documents)


PIPELINE_CHECKS = [
    doc_id_unique,
    input_records_accounted,
    candidate_pairs_ordered_and_unique,
    duplicate_pairs_ordered_and_unique,
    duplicate_edges_meet_threshold,
    every_document_in_one_cluster,
    one_representative_per_cluster,
    largest_cluster_within_max_cluster_size,
    no_chained_members,
    removals_meet_threshold,
    representatives_account_for_input,
    fixture_contract,
    same_as_incremental,
    *BATCH_CHECKS,
    recall_reaches_min_recall,
    engine_matches_duckdb,
]
