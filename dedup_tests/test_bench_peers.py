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


@pytest.mark.bench  # polars, from the bench extra
def test_the_vectorized_front_end_makes_the_python_front_ends_sets():
    import pyarrow as pa

    from dedup_bench.peers import FRONT_ENDS, set_jaccard

    bodies = pa.array(
        [
            "One, two; three four FIVE six seven eight nine ten",
            "one two three four five six seven eight nine ten.",
            "one two three four five six seven eight nine other",
            "Two words",  # shorter than a shingle: one shingle of both
            "two\twords!",
            "",
            None,
            "a b c d e a b c d e a b c d e",  # 11 shingles, 5 distinct
            "Café au lait, s'il vous plaît",
        ]
    )
    python, vector = (
        front.hash(front.shingle(front.bodies(bodies)))
        for front in (FRONT_ENDS["python"](), FRONT_ENDS["vectorized"]())
    )
    assert np.diff(vector[1]).tolist() == np.diff(python[1]).tolist() == [6, 6, 6, 1, 1, 0, 0, 5, 3]
    left, right = np.triu_indices(len(bodies), 1)
    assert set_jaccard(*vector, left, right).tolist() == set_jaccard(*python, left, right).tolist()


@pytest.mark.bench
def test_the_vectorized_peer_finds_the_planted_pairs_of_the_python_one(tmp_path):
    pytest.importorskip("FastSketchLSH")
    from dedup_bench.corpus import generate
    from dedup_bench.theirs import run_peer

    corpus = tmp_path / "corpus.parquet"
    generate(2_000, corpus, seed=5)
    python, vector = (run_peer(name, corpus, 128) for name in ("fastsketch-pre", "fastsketch-vec"))
    assert vector["engine"] == "fastsketch-vec (T=2)"
    # the same sets, so the same planted pairs to find; other hashes, so other sketches
    for field in ("documents", "shingles", "planted_positive"):
        assert vector["report"][field] == python["report"][field]
    assert vector["report"]["planted_positive"] > 200
    assert vector["accepted"] == pytest.approx(python["accepted"], rel=0.05)
    assert vector["recall"] == pytest.approx(python["recall"], abs=0.03)
    assert vector["recall"] > 0.9
