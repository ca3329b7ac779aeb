"""The benchmark's recall-across-seeds arithmetic (benchmarks/dedup_bench/recall_spread.py)."""


import numpy as np
import pyarrow as pa
import pytest

from dedup_assets.core.lsh.scurve import lsh_probability
from dedup_bench import recall_spread


def test_a_pair_is_found_only_when_a_whole_band_agrees():
    signatures = np.array(
        [
            [1, 2, 3, 4],
            [1, 2, 9, 9],  # agrees with row 0 on band 0 (rows 0-1)
            [1, 9, 3, 9],  # agrees with row 0 on one row of each band: not enough
        ],
        dtype=np.uint64,
    )
    hits = recall_spread.banded_hits(signatures, np.array([0, 0, 1]), np.array([1, 2, 2]), 2)
    assert hits.tolist() == [True, False, False]


def test_independent_expectation_is_the_mean_lsh_probability():
    jaccard = np.array([0.7, 0.85, 1.0])
    expected = np.mean([lsh_probability(value, 16, 8) for value in jaccard])
    assert recall_spread.independent_expectation(jaccard, 16, 8) == pytest.approx(expected)


def test_seeds_never_share_a_round_seed():
    seeds = recall_spread.seeds(3)
    assert min(np.diff(seeds)) >= 2 * 512  # the fss scheme draws 2 * num_perm consecutive seeds


@pytest.mark.parametrize(
    ("ours", "peer", "verdict"),
    [
        ([0.948, 0.949, 0.947], [0.948, 0.947, 0.949], "a tie"),
        ([0.950, 0.951, 0.950], [0.940, 0.941, 0.940], "ours higher"),
        ([0.940, 0.941, 0.940], [0.950, 0.951, 0.950], "ours LOWER"),
    ],
)
def test_comparison_tells_a_tie_from_a_difference(ours, peer, verdict):
    line = recall_spread.comparison(
        recall_spread.SpreadRow("ours", ours), [recall_spread.SpreadRow("peer", peer)]
    )
    assert verdict in line


def test_our_sketcher_finds_identical_documents_and_misses_unrelated_ones():
    bodies = pa.array(
        [
            "the quick brown fox jumps over the lazy dog near the quiet river bank",
            "the quick brown fox jumps over the lazy dog near the quiet river bank",
            "completely different words make up this other sentence about nothing much",
        ]
    )
    ours = recall_spread.sketchers(bodies, 5, 16, 8)["dedup-assets (fss)"]
    hits = recall_spread.banded_hits(ours(42), np.array([0, 0]), np.array([1, 2]), 8)
    assert hits.tolist() == [True, False]
