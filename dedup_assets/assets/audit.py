from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from ..core.audit import AUDIT_SAMPLED, audit_summary, build_recall_audit
from ..errors import user_errors
from ..ray_engine import RayEngine
from ..settings import DedupSettings
from ..warehouse import DuckDBWarehouse
from .common import GROUP, KINDS, checked_lineage
from .metadata import markdown_table, preview, table_metadata


@asset(group_name=GROUP, kinds=KINDS | {"numba"}, deps=["documents", "fingerprinted", "duplicate_pairs"])
def recall_audit(
    context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse, ray_engine: RayEngine
) -> MaterializeResult:
    """Recall measured, not assumed: for a seeded sample of `audit_sample_size` documents (0:
    all; seeded by `minhash_seed`), every pair with exact shingle Jaccard at or above
    `jaccard_threshold`, found without LSH (prefix filtering over the shingle hashes of every
    document), and whether the pipeline found it. One row per true pair: `jaccard`,
    `jaccard_band`, `shared_bands` (LSH bands the two share; 0 is why a pair was missed) and
    `found`. The metadata gives recall with its 95% Wilson interval, overall and per band."""
    lineage, settings = checked_lineage(context, dedup, warehouse)
    params = settings.sketch_params()
    with user_errors(), warehouse.cursor() as cursor:
        build, sampled = build_recall_audit(
            cursor, warehouse.tables, params.shingling, settings.jaccard_threshold,
            settings.audit_sample_size, params.minhash_seed, settings.batch_size,
            copies=ray_engine.engine(settings.engine, warehouse.path).first_copies(cursor, warehouse.tables),
        )
    table = warehouse.tables.recall_audit
    rows = warehouse.write("recall_audit", build, {**lineage, AUDIT_SAMPLED: sampled})
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
