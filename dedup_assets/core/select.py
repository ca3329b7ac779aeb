"""Representative selection: newest ``crawled_at``, then more tokens, then smallest ``doc_id``."""

from __future__ import annotations

import pandas as pd

KEPT = "kept_representative"
REMOVED = "removed_duplicate"


def rank_cluster_members(members: pd.DataFrame) -> pd.DataFrame:
    """Add ``representative_rank`` (1 = kept), ``representative_doc_id`` and ``decision``.

    ``members`` needs ``doc_id``, ``cluster_id``, ``crawled_at`` (timestamps) and ``token_count``.
    """
    ordered = members.sort_values(
        ["cluster_id", "crawled_at", "token_count", "doc_id"],
        ascending=[True, False, False, True],
        kind="mergesort",
        ignore_index=True,
    )
    ordered["representative_rank"] = ordered.groupby("cluster_id").cumcount().astype("int64") + 1
    winners = ordered.loc[ordered["representative_rank"] == 1, ["cluster_id", "doc_id"]]
    ordered = ordered.merge(
        winners.rename(columns={"doc_id": "representative_doc_id"}), on="cluster_id", how="left"
    )
    ordered["decision"] = ordered["representative_rank"].map(lambda rank: KEPT if rank == 1 else REMOVED)
    return ordered.sort_values(["cluster_id", "representative_rank"], ignore_index=True)
