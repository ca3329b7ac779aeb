from dedup_assets.assets.metadata import percent_fewer
from dedup_assets.core.release.summary import possible_pairs, reduction_ratio


def test_fixture_reduction_figures():
    assert possible_pairs(24) == 276
    assert reduction_ratio(276, 18) == 0.9348
    assert percent_fewer(276, 18) == "93.48%"


def test_large_corpus_reduction_is_not_rounded_up_to_100_percent():
    possible = possible_pairs(1_000_000)
    assert percent_fewer(possible, 176_628) == "99.99996%"
    assert percent_fewer(possible, 0) == "100.00%"
    assert percent_fewer(0, 0) == "0%"
