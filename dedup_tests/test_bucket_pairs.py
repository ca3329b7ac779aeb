"""The ray engine's pairs of each band bucket's texts (``ray_candidates.bucket_pairs``), which
replaced a self-join of the band rows: every pair once, its smaller id first, whatever the
buckets' sizes and however the lists are sliced. No Daft or Ray is started."""

from __future__ import annotations

from itertools import combinations

import pyarrow as pa
import pytest

pytest.importorskip("daft")  # the module imports Daft: the ray extra

from dedup_assets.core.distributed.ray_candidates import bucket_pairs  # noqa: E402

BUCKETS = [["b", "a"], ["c"], [], None, ["z", "y", "x"], ["d", "e"], ["q", "p", "o", "n"], ["f", "g", "h"]]


def _expected(buckets: list[list[str] | None]) -> list[list[dict[str, str]]]:
    return [
        [{"left_doc_id": min(pair), "right_doc_id": max(pair)} for pair in combinations(ids or [], 2)]
        for ids in buckets
    ]


def test_every_pair_of_each_bucket_once_with_its_smaller_id_first():
    pairs = bucket_pairs(pa.array(BUCKETS, pa.list_(pa.large_string())))
    assert pairs.to_pylist() == _expected(BUCKETS)
    assert len(pairs.flatten()) == 1 + 3 + 1 + 6 + 3


def test_sliced_and_chunked_lists_give_their_own_buckets_pairs():
    lists = pa.array(BUCKETS, pa.list_(pa.large_string()))
    assert bucket_pairs(lists.slice(4, 3)).to_pylist() == _expected(BUCKETS[4:7])
    chunked = pa.chunked_array([lists.slice(0, 5), lists.slice(5)])
    assert bucket_pairs(chunked).to_pylist() == _expected(BUCKETS)


def test_no_bucket_of_two_texts_gives_no_pairs():
    pairs = bucket_pairs(pa.array([["a"], [], None], pa.list_(pa.large_string())))
    assert pairs.to_pylist() == [[], [], []]
