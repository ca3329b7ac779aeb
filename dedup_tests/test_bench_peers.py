"""The peer harness's own candidate and verification code (benchmarks/dedup_bench/peer_engines.py
and peers.py), which every peer engine's accepted edges and recall go through."""


import numpy as np
import pytest

from dedup_bench.peer_engines import band_pairs, neighbor_list_pairs


def test_band_pairs_are_rows_agreeing_on_a_whole_band():
    signatures = np.array(
        [
            [1, 2, 3, 4],
            [1, 2, 9, 9],  # band 0 of row 0
            [7, 2, 3, 9],  # one value of each band of row 0: no band
            [1, 2, 3, 4],  # both bands of row 0, band 0 of row 1
            [5, 5, 9, 9],  # band 1 of row 1
        ],
        dtype=np.uint64,
    )
    left, right = band_pairs(signatures, 2)
    assert list(zip(left.tolist(), right.tolist())) == [(0, 1), (0, 3), (1, 3), (1, 4)]


def test_neighbor_lists_become_distinct_ordered_pairs_without_self_pairs():
    left, right = neighbor_list_pairs([[0, 2], [1], [2, 0], [3, 1, 3]])
    assert list(zip(left.tolist(), right.tolist())) == [(0, 2), (1, 3)]


@pytest.mark.bench  # peers.py verifies with xxhash and SciPy, from the bench extra
def test_verification_is_the_exact_jaccard_of_normalized_shingles():
    from dedup_bench.peers import hashed_sets, set_jaccard, shingle_set

    words = "one two three four five six seven eight nine ten".split()
    bodies = [
        " ".join(words) + ".",
        "One, two; three four FIVE six seven eight nine ten",  # the same shingles
        " ".join(words[:9] + ["other"]),  # 5 of 7 shingles shared: J = 5 / 7
        "",
    ]
    hashes, offsets = hashed_sets([shingle_set(body) for body in bodies])
    scores = set_jaccard(hashes, offsets, np.array([0, 0, 3]), np.array([1, 2, 0]))
    assert scores.tolist() == pytest.approx([1.0, 5 / 7, 0.0])
