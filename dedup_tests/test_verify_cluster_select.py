import numpy as np
import pandas as pd
import pytest

from dedup_assets.core.cluster import connected_clusters
from dedup_assets.core.select import KEPT, REMOVED, rank_cluster_members
from dedup_assets.core.verify import (
    BELOW_JACCARD_THRESHOLD,
    JACCARD_AND_MINHASH,
    JACCARD_MATCH,
    MINHASH_ONLY_REJECTED,
    Thresholds,
    decide,
    jaccard,
    score_pairs,
    signature_overlap,
)

THRESHOLDS = Thresholds(jaccard=0.7, signature_overlap=0.7)


def test_jaccard_and_overlap():
    assert jaccard({"a", "b", "c"}, {"b", "c", "d"}) == 0.5
    assert jaccard(set(), set()) == 0.0
    assert signature_overlap(np.array([1, 2, 3, 4], dtype=np.uint64), np.array([1, 2, 0, 0], dtype=np.uint64)) == 0.5


@pytest.mark.parametrize(
    "exact, minhash, expected",
    [
        (0.7, 0.7, (True, JACCARD_AND_MINHASH)),
        (0.95, 0.5, (True, JACCARD_MATCH)),
        (0.69, 0.9, (False, MINHASH_ONLY_REJECTED)),
        (0.2, 0.1, (False, BELOW_JACCARD_THRESHOLD)),
    ],
)
def test_only_exact_jaccard_accepts(exact, minhash, expected):
    assert decide(exact, minhash, THRESHOLDS) == expected


def test_score_pairs_reshingles_only_candidate_documents():
    shingled = []

    def shingles_of(doc_id):
        shingled.append(doc_id)
        return {"a": {"x", "y"}, "b": {"x", "y"}}[doc_id]

    candidates = pd.DataFrame(
        [("a", "b", "s1", "s2", 3)],
        columns=["left_doc_id", "right_doc_id", "left_domain", "right_domain", "shared_bands"],
    )
    signature = np.array([5, 6], dtype=np.uint64)
    scored = score_pairs(candidates, shingles_of, {"a": signature, "b": signature, "c": signature}, {"a": "h", "b": "h"}, THRESHOLDS)
    assert sorted(shingled) == ["a", "b"]
    row = scored.iloc[0]
    assert (row.jaccard, row.signature_overlap, row.is_exact, row.is_duplicate, row.reason) == (1.0, 1.0, True, True, JACCARD_AND_MINHASH)


def test_transitive_chain_is_one_cluster_named_by_smallest_id():
    clusters = connected_clusters(["c", "b", "a", "z"], [("a", "b"), ("b", "c")])
    assert clusters.values.tolist() == [
        ["a", "cluster-a", 3],
        ["b", "cluster-a", 3],
        ["c", "cluster-a", 3],
        ["z", "cluster-z", 1],
    ]


def _members(rows):
    frame = pd.DataFrame(rows, columns=["doc_id", "cluster_id", "crawled_at", "token_count"])
    frame["crawled_at"] = pd.to_datetime(frame["crawled_at"])
    return frame


def test_representative_prefers_newest_then_more_tokens_then_smallest_id():
    ranked = rank_cluster_members(
        _members(
            [
                ("old", "c1", "2026-01-01", 999),
                ("new", "c1", "2026-01-03", 10),
                ("tie-short", "c2", "2026-01-02", 10),
                ("tie-long", "c2", "2026-01-02", 11),
                ("b", "c3", "2026-01-02", 10),
                ("a", "c3", "2026-01-02", 10),
            ]
        )
    )
    kept = ranked[ranked["decision"] == KEPT].set_index("cluster_id")["doc_id"].to_dict()
    assert kept == {"c1": "new", "c2": "tie-long", "c3": "a"}
    old = ranked.set_index("doc_id").loc["old"]
    assert (old["decision"], old["representative_doc_id"], old["representative_rank"]) == (REMOVED, "new", 2)
