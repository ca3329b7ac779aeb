from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from ..core.pipeline import steps
from ..core.lsh.candidates import FOUND_BY
from ..core.release.plots import markdown_image, scurve_png
from ..core.lsh.scurve import lsh_probability
from ..core.release.summary import possible_pairs, reduction_ratio
from ..engine_resource import EngineResource
from ..launch.user_messages import user_errors
from ..settings_resource import DedupSettings
from ..stored_tables.warehouse import DuckDBWarehouse
from .asset_common import GROUP, KINDS, checked_lineage, step_run
from .metadata import markdown_table, percent_fewer, preview, scalar, table_metadata


@asset(group_name=GROUP, kinds=KINDS | {"sql"}, deps=["documents", "band_memberships"])
def candidate_pairs(
    context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse, engine: EngineResource
) -> MaterializeResult:
    """Global LSH candidates: one row per document pair sharing a bucket (`band_index`,
    `lsh_band` of `band_memberships`) in at least one band, across all domains, with
    `shared_bands`, `left_doc_id < right_doc_id`. A compiled kernel sorts each band's keys once,
    sizes the buckets and pairs the texts in each; DuckDB adds the copies and the domains.

    Exact copies (same `content_hash`) are folded first: only each copy group's first copy (the
    first in input order) is paired by LSH (`found_by` `lsh`); the other copies are paired with it
    (`content_hash`) and with its LSH partners (`lsh_via_copy`), so identical pages cost no pair
    slots.

    Before pairing, the band buckets are sized: if they would create more pair rows than
    `max_pair_slots` (unset: derived from `memory_budget_mb`), or one bucket holds more than
    `max_bucket_size` distinct texts, the run stops and names the worst bucket, instead of
    exhausting memory. With `hot_buckets: skip`, buckets over `max_bucket_size` are left out of
    the pairs instead and listed in the table `hot_buckets` (key, distinct texts, documents, three
    example doc_ids) and the release's `hot_buckets.csv`; pairs only they would have made are
    missed, which the recall audit measures.
    """
    lineage, settings = checked_lineage(context, dedup, warehouse)
    tables = warehouse.tables
    with user_errors():
        found = steps.candidates(step_run(context, warehouse, engine, lineage, settings))
    rows, pressure, hot = found.rows, found.pressure, found.hot
    limits = settings.pair_limits()
    params = settings.sketch_params()
    with warehouse.cursor() as cursor:
        possible = possible_pairs(scalar(cursor, f"select count(*) from {tables.documents}"))
        found_by = dict(
            cursor.execute(f"select found_by, count(*) from {tables.candidate_pairs} group by found_by").fetchall()
        )
        return MaterializeResult(
            metadata={
                **table_metadata(cursor, tables.candidate_pairs, rows),
                "possible_pairs": MetadataValue.int(possible),
                "candidate_pair_slots": MetadataValue.int(pressure.document_pair_slots),
                "grouped_pair_slots": MetadataValue.int(pressure.pair_slots),
                "max_pair_slots": MetadataValue.int(limits.max_pair_slots),
                "buckets": MetadataValue.int(pressure.bucket_count),
                "largest_bucket_size": MetadataValue.int(pressure.largest_bucket_size),
                "largest_bucket_key": pressure.largest_bucket_key or "none",
                "max_bucket_size": MetadataValue.int(limits.max_bucket_size),
                "hot_buckets_skipped": MetadataValue.int(hot.num_rows),
                **(
                    {"hot_buckets": markdown_table(
                        ["bucket", "texts", "documents", "example doc_ids"],
                        [
                            (row["bucket_key"], row["texts"], row["documents"], ", ".join(row["example_doc_ids"]))
                            for row in hot.slice(0, 20).to_pylist()
                        ],
                    )}
                    if hot.num_rows
                    else {}
                ),
                "pairs_found_by": markdown_table(
                    ["found_by", "pairs"], [(name, found_by.get(name, 0)) for name in FOUND_BY]
                ),
                "lsh_bands_in_use": f"{params.bands} bands x {params.rows_per_band} rows"
                + (" (chosen by auto_bands)" if settings.auto_bands else ""),
                "lsh_probability_at_threshold": MetadataValue.float(
                    round(lsh_probability(settings.jaccard_threshold, params.bands, params.rows_per_band), 4)
                ),
                "scurve": MetadataValue.md(
                    "The share of pairs of each Jaccard that these bands make candidates; a pair "
                    "LSH misses is never verified.\n\n"
                    + markdown_image(
                        scurve_png(settings.jaccard_threshold, params.bands, params.rows_per_band, settings.auto_bands),
                        "LSH S-curve",
                    )
                ),
                "pair_reduction": f"{possible:,} → {rows:,}, {percent_fewer(possible, rows)} fewer",
                "candidate_reduction_ratio": MetadataValue.float(reduction_ratio(possible, rows)),
                "cross_domain_pairs": MetadataValue.int(
                    scalar(
                        cursor,
                        f"select count(*) from {tables.candidate_pairs} where left_domain <> right_domain",
                    )
                ),
                "preview": preview(cursor, f"select * from {tables.candidate_pairs}"),
            }
        )
