from dagster import MetadataValue, asset

from ..core.fingerprint import lsh_probability
from ..core.stages import build_candidate_pairs
from ..core.summary import percent_fewer, possible_pairs, reduction_ratio
from ..core.tables import TableBuild
from ..errors import user_errors
from ..io_manager import TableRef
from ..settings import DedupSettings
from ._shared import GROUP, KINDS, lineage_for, markdown_preview, scalar, tables_of


@asset(group_name=GROUP, kinds=KINDS | {"sql"})
def candidate_pairs(
    dedup: DedupSettings, documents: TableRef, band_memberships: TableRef
) -> TableBuild:
    """Global LSH candidates: a DuckDB self-join of `band_memberships` on `(band_index, lsh_band)`
    across all domains, one row per document pair sharing at least one band, with
    `shared_bands`, `left_doc_id < right_doc_id`.

    Before joining, the band buckets are sized: if they would create more than `max_pair_slots`
    self-join rows the run stops and names the worst bucket, instead of exhausting memory.
    """
    lineage = lineage_for(
        "candidate_pairs", dedup, documents=documents, band_memberships=band_memberships
    )
    with user_errors(), documents.connect() as connection:
        params = dedup.sketch_params()
        build, pressure = build_candidate_pairs(
            connection, tables_of(documents), dedup.max_pair_slots
        )
        document_count = scalar(connection, f"select count(*) from {documents.table}")
    possible = possible_pairs(document_count)

    def describe(connection, table: str) -> dict:
        candidates = scalar(connection, f"select count(*) from {table}")
        ratio = reduction_ratio(possible, candidates)
        return {
            "pair_reduction": f"{possible:,} → {candidates:,}, {percent_fewer(possible, candidates)} fewer",
            "candidate_reduction_ratio": MetadataValue.float(ratio),
            "cross_domain_pairs": MetadataValue.int(
                scalar(connection, f"select count(*) from {table} where left_domain <> right_domain")
            ),
            "preview": markdown_preview(connection, f"select * from {table}"),
        }

    build.lineage = {**lineage, **pressure.as_lineage()}
    build.describe = describe
    build.metadata = {
        "possible_pairs": MetadataValue.int(possible),
        "pair_slots": MetadataValue.int(pressure.pair_slots),
        "max_pair_slots": MetadataValue.int(dedup.max_pair_slots),
        "buckets": MetadataValue.int(pressure.bucket_count),
        "largest_bucket_size": MetadataValue.int(pressure.largest_bucket_size),
        "largest_bucket_key": pressure.largest_bucket_key or "none",
        "lsh_probability_at_threshold": MetadataValue.float(
            round(lsh_probability(dedup.jaccard_threshold, params.bands, params.rows_per_band), 4)
        ),
    }
    return build
