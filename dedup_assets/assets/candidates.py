from __future__ import annotations

import pandas as pd
from dagster import MetadataValue, Output, asset

from .. import checks
from ..core.fingerprint import lsh_probability
from ..core.lsh import bucket_pressure, candidate_pairs as join_candidates, ensure_within_budget
from ..core.summary import possible_pairs, reduction_ratio
from ..settings import DedupSettings
from ._shared import GROUP, lineage_for, preview, stamped, user_errors


@asset(
    group_name=GROUP,
    kinds={"duckdb", "pandas", "sql"},
    check_specs=[
        checks.spec(
            "candidate_pairs_ordered_and_unique",
            "candidate_pairs",
            "Each pair appears once, with left_doc_id < right_doc_id.",
        )
    ],
)
def candidate_pairs(dedup: DedupSettings, fingerprinted: pd.DataFrame, band_memberships: pd.DataFrame):
    """Global LSH candidates: a DuckDB self-join of `band_memberships` on `(band_index, lsh_band)`
    across all domains, one row per document pair that shares at least one band, with
    `shared_bands`.

    Before joining, the band buckets are sized: if they would create more than `max_pair_slots`
    self-join rows the run stops and names the worst bucket, instead of exhausting memory.
    """
    lineage = lineage_for(
        "candidate_pairs", dedup, fingerprinted=fingerprinted, band_memberships=band_memberships
    )
    pressure = bucket_pressure(band_memberships)
    with user_errors():
        ensure_within_budget(pressure, dedup.max_pair_slots)
        params = dedup.sketch_params()
    frame = join_candidates(band_memberships)
    possible = possible_pairs(len(fingerprinted))
    ratio = reduction_ratio(possible, len(frame))
    yield Output(
        stamped(frame, lineage),
        metadata={
            "pair_reduction": f"{possible:,} → {len(frame):,}, {ratio:.2%} fewer",
            "possible_pairs": MetadataValue.int(possible),
            "candidate_pairs": MetadataValue.int(len(frame)),
            "candidate_reduction_ratio": MetadataValue.float(ratio),
            "pair_slots": MetadataValue.int(pressure.pair_slots),
            "max_pair_slots": MetadataValue.int(dedup.max_pair_slots),
            "largest_bucket_size": MetadataValue.int(pressure.largest_bucket_size),
            "largest_bucket_key": pressure.largest_bucket_key or "none",
            "lsh_probability_at_threshold": MetadataValue.float(
                round(lsh_probability(dedup.jaccard_threshold, params.bands, params.rows_per_band), 4)
            ),
            "cross_domain_pairs": MetadataValue.int(int((frame["left_domain"] != frame["right_domain"]).sum())),
            "preview": preview(frame),
        },
    )
    yield checks.pairs_ordered_and_unique("candidate_pairs_ordered_and_unique", frame)
