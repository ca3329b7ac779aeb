"""Asset checks are plain functions: each must pass on good tables and fail on broken ones."""

import pandas as pd

from dedup_assets import checks
from dedup_assets.core.select import KEPT, REMOVED


def _pairs(rows):
    return pd.DataFrame(rows, columns=["left_doc_id", "right_doc_id", "jaccard"])


def test_doc_id_unique():
    assert checks.doc_id_unique(pd.DataFrame({"doc_id": ["a", "b"]})).passed
    failed = checks.doc_id_unique(pd.DataFrame({"doc_id": ["a", "b", "a"]}))
    assert not failed.passed and "'a'" in failed.description


def test_pairs_ordered_and_unique():
    assert checks.pairs_ordered_and_unique("x", _pairs([("a", "b", 1.0), ("a", "c", 1.0)])).passed
    reversed_pair = checks.pairs_ordered_and_unique("x", _pairs([("b", "a", 1.0)]))
    repeated = checks.pairs_ordered_and_unique("x", _pairs([("a", "b", 1.0), ("a", "b", 0.9)]))
    assert not reversed_pair.passed and "not left < right" in reversed_pair.description
    assert not repeated.passed and "more than once" in repeated.description


def test_duplicate_edges_meet_threshold():
    assert checks.duplicate_edges_meet_threshold(_pairs([("a", "b", 0.7)]), 0.7).passed
    assert checks.duplicate_edges_meet_threshold(_pairs([]), 0.7).passed
    weak = checks.duplicate_edges_meet_threshold(_pairs([("a", "b", 0.69)]), 0.7)
    assert not weak.passed and "0.6900 < 0.7" in weak.description


def _clusters(rows):
    return pd.DataFrame(rows, columns=["doc_id", "cluster_id", "decision"])


def test_every_document_in_one_cluster():
    documents = pd.DataFrame({"doc_id": ["a", "b"]})
    good = _clusters([("a", "cluster-a", KEPT), ("b", "cluster-a", REMOVED)])
    assert checks.every_document_in_one_cluster(documents, good).passed
    lost = checks.every_document_in_one_cluster(documents, good.iloc[:1])
    twice = checks.every_document_in_one_cluster(documents, pd.concat([good, _clusters([("b", "cluster-b", KEPT)])]))
    assert not lost.passed and "b is in no cluster" in lost.description
    assert not twice.passed and "b is in 2 clusters" in twice.description


def test_one_representative_per_cluster():
    assert checks.one_representative_per_cluster(_clusters([("a", "c1", KEPT), ("b", "c1", REMOVED)])).passed
    none_kept = checks.one_representative_per_cluster(_clusters([("a", "c1", REMOVED)]))
    two_kept = checks.one_representative_per_cluster(_clusters([("a", "c1", KEPT), ("b", "c1", KEPT)]))
    assert not none_kept.passed and "c1 has 0" in none_kept.description
    assert not two_kept.passed and "c1 has 2" in two_kept.description


def test_representatives_account_for_input():
    documents = pd.DataFrame({"doc_id": ["a", "b", "c"]})
    clusters = _clusters([("a", "c1", KEPT), ("b", "c1", REMOVED), ("c", "c2", KEPT)])
    assert checks.representatives_account_for_input(documents, clusters, pd.DataFrame({"doc_id": ["a", "c"]})).passed
    lost = checks.representatives_account_for_input(documents, clusters, pd.DataFrame({"doc_id": ["a"]}))
    assert not lost.passed and "1 representatives + 1 removed != 3" in lost.description
