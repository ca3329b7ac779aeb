from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from ..core.pipeline import steps
from ..core.release.plots import jaccard_histogram_png, markdown_image
from ..core.release.summary import reason_counts
from ..engine_resource import EngineResource
from ..launch.user_messages import user_errors
from ..settings_resource import DedupSettings
from ..stored_tables.tables_io import WAREHOUSE_TABLES
from ..stored_tables.warehouse import DuckDBWarehouse
from .asset_common import GROUP, KINDS, checked_lineage, step_run
from .metadata import markdown_table, preview, scalar, table_metadata

PAIR_PREVIEW = "left_doc_id, right_doc_id, round(jaccard, 4) as jaccard, signature_overlap, reason"


@asset(group_name=GROUP, kinds=KINDS | {"sql"}, deps=["documents", "fingerprinted", "candidate_pairs"])
def scored_pairs(
    context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse, engine: EngineResource
) -> MaterializeResult:
    """Every candidate pair with its exact shingle `jaccard`, its sketch `signature_overlap` and
    a decision. Only Jaccard >= `jaccard_threshold` makes a duplicate; the overlap is a diagnostic.

    `reason` is `jaccard_and_minhash`, `jaccard_match`, `minhash_only_rejected` or
    `below_jaccard_threshold`; `is_exact` marks identical normalized text. Only the documents of
    pairs LSH found (`found_by` `lsh`) are shingled again, after a memory estimate against
    `memory_budget_mb`; pairs with exact copies take the scores of their first copies.
    """
    lineage, settings = checked_lineage(context, dedup, warehouse)
    tables = warehouse.tables
    with user_errors():
        rows, reshingled = steps.score(step_run(context, warehouse, engine, lineage, settings))
    context.log.info(f"scored_pairs: shingled {reshingled:,} candidate documents again")
    with warehouse.cursor() as cursor:
        return MaterializeResult(
            metadata={
                **table_metadata(cursor, tables.scored_pairs, rows),
                "jaccard_threshold": MetadataValue.float(settings.jaccard_threshold),
                "reshingled_documents": MetadataValue.int(reshingled),
                "accepted_pairs": MetadataValue.int(
                    scalar(cursor, f"select count(*) from {tables.scored_pairs} where is_duplicate")
                ),
                "reasons": markdown_table(["reason", "pairs"], reason_counts(cursor, tables.scored_pairs).items()),
                "jaccard_histogram": MetadataValue.md(
                    markdown_image(
                        jaccard_histogram_png(cursor, tables, settings.jaccard_threshold), "Jaccard of the candidates"
                    )
                ),
                "preview": preview(cursor, f"select {PAIR_PREVIEW} from {tables.scored_pairs}"),
            }
        )


@asset(group_name=GROUP, kinds=KINDS | {"sql"}, deps=["scored_pairs"], io_manager_key=WAREHOUSE_TABLES)
def duplicate_pairs(
    context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse, engine: EngineResource
) -> MaterializeResult:
    """The accepted duplicate edges: scored pairs whose exact Jaccard met the threshold.
    `is_exact` separates identical normalized text (exact duplicates) from near duplicates."""
    lineage, settings = checked_lineage(context, dedup, warehouse)
    table = warehouse.tables.duplicate_pairs
    with user_errors():
        rows = steps.duplicate_pairs(step_run(context, warehouse, engine, lineage, settings))
    with warehouse.cursor() as cursor:
        exact, cross = cursor.execute(
            f"select count(*) filter (where is_exact), count(*) filter (where left_domain <> right_domain) from {table}"
        ).fetchall()[0]
        return MaterializeResult(
            metadata={
                **table_metadata(cursor, table, rows),
                "exact_duplicate_edges": MetadataValue.int(int(exact)),
                "near_duplicate_edges": MetadataValue.int(int(rows - exact)),
                "cross_domain_edges": MetadataValue.int(int(cross)),
                "preview": preview(cursor, f"select {PAIR_PREVIEW} from {table}"),
            }
        )
