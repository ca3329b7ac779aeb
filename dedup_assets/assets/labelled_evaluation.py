from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from ..core.pipeline import steps
from ..launch.user_messages import user_errors
from ..settings_resource import DedupSettings
from ..stored_tables.warehouse import DuckDBWarehouse
from .asset_common import GROUP, KINDS, checked_lineage, step_run
from .metadata import preview, table_metadata


@asset(group_name=GROUP, kinds=KINDS | {"csv"}, deps=["documents", "clusters"])
def evaluation(context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse) -> MaterializeResult:
    """The clusters against labels you supply (`DEDUP_LABELS` or `labels_path`: a CSV with the
    header `left_doc_id,right_doc_id,label` or `doc_id,cluster_label`, or a folder of them).
    Pair labels give precision, recall and F1 (a pair is predicted a duplicate when its two
    documents are in one cluster); cluster labels give the adjusted Rand index. One row per pair
    on which clusters and labels disagree, with its exact Jaccard. Labels naming a doc_id that is
    not in the input are counted and left out. Without labels, or when no label names an input
    document, it records that nothing was evaluated: no figure is shown."""
    lineage, settings = checked_lineage(context, dedup, warehouse)
    with user_errors():
        rows, summary = steps.evaluation(step_run(context, warehouse, None, lineage, settings), dedup.labels())
    if not summary["evaluated"]:  # a warning only when labels were given: most runs have none
        log = context.log.warning if summary["labels_files"] else context.log.debug
        log(f"evaluation: nothing evaluated, {summary['not_evaluated_because']}")
    unknown = summary["pair_labels"]["unknown_doc_id_pairs"] + summary["cluster_labels"]["unknown_doc_ids"]
    if unknown:
        context.log.warning(f"evaluation: {unknown:,} labels name a doc_id that is not in the input; they are left out")
    table = warehouse.tables.evaluation
    figures = {
        name: MetadataValue.float(summary[name])
        for name in ("precision", "recall", "f1", "adjusted_rand_index")
        if summary[name] is not None
    }
    with warehouse.cursor() as cursor:
        return MaterializeResult(
            metadata={
                **table_metadata(cursor, table, rows),
                "evaluated": MetadataValue.bool(summary["evaluated"]),
                **({} if summary["evaluated"] else {"not_evaluated_because": MetadataValue.text(summary["not_evaluated_because"])}),
                **figures,
                "labelled_pairs": MetadataValue.int(summary["pair_labels"]["labelled_pairs"]),
                "labelled_documents": MetadataValue.int(
                    summary["cluster_labels"]["labelled_documents"] + summary["cluster_labels"]["unknown_doc_ids"]
                ),
                "unknown_doc_id_labels": MetadataValue.int(unknown),
                "disagreeing_pairs": MetadataValue.int(summary["disagreeing_pairs"]),
                "disagreements": preview(
                    cursor, f"select left_doc_id, right_doc_id, labels, error, round(jaccard, 4) as jaccard from {table}"
                ),
            }
        )
