"""The audit's true pairs: prefix filtering over shingle hashes must find exactly the pairs a
plain all-pairs computation finds, on the fixtures and on a generated corpus."""

import random
from itertools import combinations

import numpy as np
import pyarrow as pa
import pytest

from dedup_assets.core.audit import exact_pairs, sample_rows
from dedup_assets.core.readers import read_documents
from dedup_assets.core.text import document_shingles

from .conftest import FIXTURE, HARD_FIXTURE

SHINGLE_SIZE = 5


def _generated(count: int, seed: int = 11) -> list[str]:
    """Pages of random words, a third of them edited copies of an earlier page (a word or a few
    replaced), some exact copies, and a few too short to have a shingle."""
    rng = random.Random(seed)
    words = [f"w{index}" for index in range(300)]
    pages: list[str] = []
    for index in range(count):
        if pages and index % 3 == 0:
            page = rng.choice(pages).split()
            for _ in range(rng.choice([0, 1, 2, 4, 8])):
                page[rng.randrange(len(page))] = rng.choice(words)
            pages.append(" ".join(page))
        elif index % 97 == 0:
            pages.append("too short")
        else:
            pages.append(" ".join(rng.choice(words) for _ in range(rng.randint(20, 60))))
    return pages


def _all_pairs(bodies: list[str], threshold: float) -> dict[tuple[int, int], float]:
    sets = [set(document_shingles(body, SHINGLE_SIZE)) for body in bodies]
    found = {}
    for left, right in combinations(range(len(bodies)), 2):
        if sets[left] and sets[right]:
            jaccard = len(sets[left] & sets[right]) / len(sets[left] | sets[right])
            if jaccard >= threshold:
                found[(left, right)] = jaccard
    return found


def _audit(bodies: list[str], sample: np.ndarray, threshold: float, batch: int) -> dict[tuple[int, int], float]:
    column = pa.array(bodies, pa.large_string())
    batches = (column.slice(start, batch) for start in range(0, len(bodies), batch))
    pairs = exact_pairs(batches, column.take(pa.array(sample)), sample, SHINGLE_SIZE, threshold)
    assert (pairs.left < pairs.right).all()
    return dict(zip(zip(pairs.left.tolist(), pairs.right.tolist()), pairs.jaccard.tolist()))


def _bodies(path) -> list[str]:
    return read_documents(path).column("body").to_pylist()


@pytest.mark.parametrize("threshold", [0.7, 0.5, 0.9])
@pytest.mark.parametrize("name", ["fixture", "hard cases", "generated"])
def test_the_exhaustive_audit_finds_exactly_the_all_pairs_true_pairs(name, threshold):
    bodies = {"fixture": lambda: _bodies(FIXTURE), "hard cases": lambda: _bodies(HARD_FIXTURE),
              "generated": lambda: _generated(900)}[name]()
    expected = _all_pairs(bodies, threshold)
    found = _audit(bodies, sample_rows(len(bodies), 0, seed=1), threshold, batch=128)
    assert expected, "the corpus must have true pairs for this to compare anything"
    assert found.keys() == expected.keys()
    assert all(found[pair] == pytest.approx(expected[pair]) for pair in expected)


def test_a_sampled_audit_finds_the_true_pairs_of_its_sampled_documents_only():
    bodies = _generated(900, seed=5)
    expected = _all_pairs(bodies, 0.7)
    sample = sample_rows(len(bodies), 150, seed=3)
    sampled = set(sample.tolist())
    found = _audit(bodies, sample, 0.7, batch=97)
    touching = {pair for pair in expected if sampled & set(pair)}
    assert touching and found.keys() == touching


def test_the_sample_is_seeded_sorted_and_whole_when_asked_for_everything():
    assert sample_rows(10, 0, seed=1).tolist() == list(range(10))
    assert sample_rows(10, 50, seed=1).tolist() == list(range(10))
    drawn = sample_rows(1000, 20, seed=4)
    assert len(set(drawn.tolist())) == 20 and (np.diff(drawn) > 0).all()
    assert drawn.tolist() == sample_rows(1000, 20, seed=4).tolist()
    assert drawn.tolist() != sample_rows(1000, 20, seed=5).tolist()
