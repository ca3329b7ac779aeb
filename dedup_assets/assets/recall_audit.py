from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from ..core.pipeline import steps
from ..core.audit.recall import NEAR_COPIES, audit_summary
from ..engine_resource import EngineResource
from ..launch.user_messages import user_errors
from ..settings_resource import DedupSettings
from ..stored_tables.warehouse import DuckDBWarehouse
from .asset_common import GROUP, KINDS, checked_lineage, step_run
from .metadata import markdown_table, preview, table_metadata


@asset(group_name=GROUP, kinds=KINDS, deps=["documents", "fingerprinted", "duplicate_pairs"])
def recall_audit(
    context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse, engine: EngineResource
) -> MaterializeResult:
    """Recall measured, not assumed: the true pairs `fingerprinted` found for its seeded sample of
    `audit_sample_size` documents (0: all; the doc_ids with the smallest hash keyed by
    `minhash_seed`), every pair with exact shingle Jaccard at or above `jaccard_threshold` found
    without LSH, exact copies included, and whether the pipeline found it. One row per true pair:
    `jaccard`, `jaccard_band`, `shared_bands` (LSH bands the two share; 0 is why a pair was missed)
    and `found`, and `sampled_text`, the unit of the interval. The metadata gives recall with its
    95% interval (Wilson's at the effective number of pairs, since one text's pairs are found or
    missed together) over every true pair (the headline, which the check uses), per band, and for
    the near copies alone (pairs with Jaccard < 1, which LSH had to find: identical texts are
    paired by their content hash)."""
    lineage, settings = checked_lineage(context, dedup, warehouse)
    with user_errors():
        rows, sampled = steps.recall_audit(step_run(context, warehouse, engine, lineage, settings))
    table = warehouse.tables.recall_audit
    with warehouse.cursor() as cursor:
        summary = audit_summary(cursor, table, sampled)
        return MaterializeResult(
            metadata={
                **table_metadata(cursor, table, rows),
                **{
                    name: MetadataValue.int(summary[name])
                    for name in ("sampled_documents", "true_pairs", "found_pairs")
                },
                **{
                    name: MetadataValue.float(summary[name])
                    for name in ("recall", "ci_low", "ci_high")
                    if summary[name] is not None
                },
                **{
                    f"near_copy_{name}": MetadataValue.int(summary["near_copies"][name])
                    for name in ("true_pairs", "found_pairs")
                },
                **{
                    f"near_copy_{name}": MetadataValue.float(summary["near_copies"][name])
                    for name in ("recall", "ci_low", "ci_high")
                    if summary["near_copies"][name] is not None
                },
                "near_copy_pairs": f"the near_copy_ figures count only the {NEAR_COPIES}",
                "recall_by_jaccard_band": markdown_table(
                    ["Jaccard", "true pairs", "found", "recall", "95% interval"],
                    (
                        (band, f["true_pairs"], f["found_pairs"], f["recall"], f"{f['ci_low']}–{f['ci_high']}")
                        for band, f in summary["by_jaccard_band"].items()
                    ),
                ),
                "missed_pairs": preview(
                    cursor,
                    f"select left_doc_id, right_doc_id, round(jaccard, 4) as jaccard, shared_bands from {table} "
                    "where not found order by jaccard desc, left_doc_id, right_doc_id",
                ),
            }
        )
