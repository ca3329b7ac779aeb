from __future__ import annotations

import pandas as pd
from dagster import MetadataValue, Output, asset

from .. import checks
from ..core.pipeline import accepted_edges, score_candidates
from ..settings import DedupSettings
from ._shared import GROUP, lineage_for, preview, stamped, user_errors

PAIR_PREVIEW = ["left_doc_id", "right_doc_id", "jaccard", "signature_overlap", "reason"]


@asset(group_name=GROUP, kinds={"duckdb", "pandas"})
def scored_pairs(
    dedup: DedupSettings,
    documents: pd.DataFrame,
    fingerprinted: pd.DataFrame,
    candidate_pairs: pd.DataFrame,
):
    """Every candidate pair with its exact shingle Jaccard, its MinHash signature overlap and a
    decision. Only Jaccard >= `jaccard_threshold` makes a duplicate; the overlap is a diagnostic.

    `reason` is `jaccard_and_minhash`, `jaccard_match`, `minhash_only_rejected` or
    `below_jaccard_threshold`. `is_exact` marks pairs whose normalized text is identical. Only
    documents that appear in a candidate pair are shingled again. Depends on `jaccard_threshold`
    and `signature_overlap_threshold`.
    """
    lineage = lineage_for(
        "scored_pairs",
        dedup,
        documents=documents,
        fingerprinted=fingerprinted,
        candidate_pairs=candidate_pairs,
    )
    with user_errors():
        thresholds = dedup.thresholds()
    frame = score_candidates(
        documents, fingerprinted, candidate_pairs, dedup.shingle_size, thresholds
    )
    reasons = frame["reason"].value_counts().sort_index()
    return Output(
        stamped(frame, lineage),
        metadata={
            "scored_pairs": MetadataValue.int(len(frame)),
            "accepted_pairs": MetadataValue.int(int(frame["is_duplicate"].sum())),
            "rejected_pairs": MetadataValue.int(int((~frame["is_duplicate"]).sum())),
            "jaccard_threshold": MetadataValue.float(thresholds.jaccard),
            "reasons": MetadataValue.md(reasons.rename("pairs").to_frame().to_markdown())
            if len(reasons)
            else MetadataValue.md("_no pairs_"),
            "preview": preview(frame, PAIR_PREVIEW),
        },
    )


@asset(
    group_name=GROUP,
    kinds={"duckdb", "pandas"},
    check_specs=[
        checks.spec(
            "duplicate_pairs_ordered_and_unique",
            "duplicate_pairs",
            "Each edge appears once, with left_doc_id < right_doc_id.",
        ),
        checks.spec(
            "duplicate_edges_meet_threshold",
            "duplicate_pairs",
            "Every accepted edge has exact Jaccard at or above the threshold it was scored with.",
        ),
    ],
)
def duplicate_pairs(dedup: DedupSettings, scored_pairs: pd.DataFrame):
    """The accepted duplicate edges: scored pairs whose exact Jaccard met the threshold.
    `is_exact` separates identical normalized text (exact duplicates) from near duplicates."""
    lineage = lineage_for("duplicate_pairs", dedup, scored_pairs=scored_pairs)
    frame = accepted_edges(scored_pairs)
    exact = int(frame["is_exact"].sum())
    yield Output(
        stamped(frame, lineage),
        metadata={
            "duplicate_edges": MetadataValue.int(len(frame)),
            "exact_duplicate_edges": MetadataValue.int(exact),
            "near_duplicate_edges": MetadataValue.int(len(frame) - exact),
            "cross_domain_edges": MetadataValue.int(int((frame["left_domain"] != frame["right_domain"]).sum())),
            "preview": preview(frame, PAIR_PREVIEW),
        },
    )
    yield checks.pairs_ordered_and_unique("duplicate_pairs_ordered_and_unique", frame)
    yield checks.duplicate_edges_meet_threshold(frame, float(lineage["jaccard_threshold"]))
