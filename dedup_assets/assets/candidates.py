from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from ..core.lsh import build_candidate_pairs, lsh_probability
from ..core.summary import possible_pairs, reduction_ratio
from ..errors import user_errors
from ..settings import DedupSettings
from ..warehouse import DuckDBWarehouse
from .common import GROUP, KINDS, checked_lineage
from .metadata import percent_fewer, preview, scalar, table_metadata


@asset(group_name=GROUP, kinds=KINDS | {"sql"}, deps=["documents", "band_memberships"])
def candidate_pairs(
    context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse
) -> MaterializeResult:
    """Global LSH candidates: a DuckDB self-join of `band_memberships` on `(band_index, lsh_band)`
    across all domains, one row per document pair sharing at least one band, with
    `shared_bands`, `left_doc_id < right_doc_id`.

    Before joining, the band buckets are sized: if they would create more than `max_pair_slots`
    self-join rows the run stops and names the worst bucket, instead of exhausting memory.
    """
    lineage, settings = checked_lineage(context, dedup, warehouse)
    tables = warehouse.tables
    with user_errors(), warehouse.cursor() as cursor:
        build, pressure = build_candidate_pairs(cursor, tables, settings.max_pair_slots)
    rows = warehouse.write("candidate_pairs", build, {**lineage, **pressure.as_lineage()})
    params = settings.sketch_params()
    with warehouse.cursor() as cursor:
        possible = possible_pairs(scalar(cursor, f"select count(*) from {tables.documents}"))
        return MaterializeResult(
            metadata={
                **table_metadata(cursor, tables.candidate_pairs, rows),
                "possible_pairs": MetadataValue.int(possible),
                "pair_slots": MetadataValue.int(pressure.pair_slots),
                "max_pair_slots": MetadataValue.int(settings.max_pair_slots),
                "buckets": MetadataValue.int(pressure.bucket_count),
                "largest_bucket_size": MetadataValue.int(pressure.largest_bucket_size),
                "largest_bucket_key": pressure.largest_bucket_key or "none",
                "lsh_probability_at_threshold": MetadataValue.float(
                    round(lsh_probability(settings.jaccard_threshold, params.bands, params.rows_per_band), 4)
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
