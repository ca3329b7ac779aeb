"""Run counts, shared by the manifest, asset metadata and the fixture contracts."""

from __future__ import annotations

import pandas as pd

from .select import KEPT


def possible_pairs(document_count: int) -> int:
    return document_count * (document_count - 1) // 2


def reduction_ratio(possible: int, candidates: int) -> float:
    """Share of the all-pairs baseline that LSH spared from exact scoring, rounded to 4 places."""
    return round(1.0 - candidates / possible, 4) if possible else 0.0


def run_counts(
    documents: pd.DataFrame,
    candidate_pairs: pd.DataFrame,
    pair_slots: int,
    duplicate_pairs: pd.DataFrame,
    clusters: pd.DataFrame,
) -> dict[str, int | float]:
    possible = possible_pairs(len(documents))
    cluster_sizes = clusters.drop_duplicates("cluster_id")["cluster_size"]
    exact = int(duplicate_pairs["is_exact"].sum())
    representatives = int((clusters["decision"] == KEPT).sum())
    return {
        "document_rows": len(documents),
        "possible_pair_rows": possible,
        "candidate_pair_rows": len(candidate_pairs),
        "candidate_pair_slots": int(pair_slots),
        "candidate_reduction_ratio": reduction_ratio(possible, len(candidate_pairs)),
        "duplicate_pair_rows": len(duplicate_pairs),
        "exact_duplicate_pair_rows": exact,
        "near_duplicate_pair_rows": len(duplicate_pairs) - exact,
        "cluster_count": len(cluster_sizes),
        "duplicate_cluster_rows": int((cluster_sizes > 1).sum()),
        "singleton_cluster_rows": int((cluster_sizes == 1).sum()),
        "representative_rows": representatives,
        "removed_document_rows": len(clusters) - representatives,
    }
