"""The benchmark's corpus generator (benchmarks/dedup_bench/corpus.py), on a few hundred
documents."""

import string

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dedup_bench.common import truth_path
from dedup_bench.corpus import EDIT_RATES, MAX_TOKENS, MIN_TOKENS, SCHEMA, generate
from dedup_bench.tokens import ZipfSampler, ragged_index

DOCUMENTS = 400


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[pa.Table, pa.Table]:
    path = tmp_path_factory.mktemp("corpus") / "c.parquet"
    generate(DOCUMENTS, path, seed=7)
    return pq.read_table(path), pq.read_table(truth_path(path))


def shingles(body: str) -> set:
    tokens = body.lower().translate(str.maketrans(string.punctuation, " " * 32)).split()
    return set(zip(*(tokens[start:] for start in range(5))))


def jaccard(left: str, right: str) -> float:
    a, b = shingles(left), shingles(right)
    return len(a & b) / len(a | b)


def test_same_seed_writes_the_same_bytes_and_another_seed_does_not(tmp_path):
    paths = [tmp_path / name for name in ("a.parquet", "b.parquet", "c.parquet")]
    for path, seed in zip(paths, (11, 11, 12)):
        generate(300, path, seed=seed)
    read = [(path.read_bytes(), truth_path(path).read_bytes()) for path in paths]
    assert read[0] == read[1]
    assert read[0][0] != read[2][0] and read[0][1] != read[2][1]


def test_documents_have_the_input_columns_and_web_like_bodies(corpus):
    documents, _ = corpus
    assert documents.schema == SCHEMA
    assert documents["doc_id"].to_pylist() == list(range(DOCUMENTS))
    body = documents["body"][0].as_py()
    assert body[0].isupper() and body.endswith(".") and ", " in body and ". " in body
    originals = [len(text.split()) for text in documents["body"].to_pylist()[:20]]
    assert all(MIN_TOKENS // 2 <= count <= 2 * MAX_TOKENS for count in originals)
    assert documents["body"].to_pylist()[0].startswith(documents["title"][0].as_py())


def test_truth_rows_refer_to_earlier_documents_of_the_corpus(corpus):
    documents, truth = corpus
    ids = set(documents["doc_id"].to_pylist())
    rows = truth.to_pylist()
    assert 0.1 * DOCUMENTS < len(rows) < 0.3 * DOCUMENTS
    for row in rows:
        assert row["doc_id"] in ids and row["origin_doc_id"] in ids
        assert row["origin_doc_id"] < row["doc_id"]
        if row["kind"] == "mirror":
            assert row["edit_rate"] == 0
        else:
            assert row["kind"] == "edited"
            assert EDIT_RATES[0] <= row["edit_rate"] <= EDIT_RATES[1]


def test_mirrors_are_identical_text_on_another_domain(corpus):
    documents, truth = corpus
    by_id = {row["doc_id"]: row for row in documents.to_pylist()}
    mirrors = [row for row in truth.to_pylist() if row["kind"] == "mirror"]
    assert mirrors
    for row in mirrors:
        copy, origin = by_id[row["doc_id"]], by_id[row["origin_doc_id"]]
        assert copy["body"] == origin["body"]
        assert copy["domain"] != origin["domain"]


def test_edited_copies_spread_around_the_threshold(corpus):
    documents, truth = corpus
    bodies = documents["body"].to_pylist()
    edited = [row for row in truth.to_pylist() if row["kind"] == "edited"]
    pairs = [(bodies[row["origin_doc_id"]], bodies[row["doc_id"]]) for row in edited]
    scores = np.array([jaccard(*pair) for pair in pairs])
    assert 0.25 < scores.min() and np.median(scores) < 0.9
    assert 0.2 < (scores >= 0.7).mean() < 0.8
    # the more edits, the lower the Jaccard
    rates = np.array([row["edit_rate"] for row in edited])
    assert np.corrcoef(rates, scores)[0, 1] < -0.8


def test_zipf_sampler_draws_rank_r_about_once_per_r_draws_of_rank_1():
    draws = ZipfSampler(1000)(np.random.default_rng(3), 200_000)
    counts = np.bincount(draws, minlength=1000)
    assert draws.max() < 1000
    assert counts[0] / counts[1] == pytest.approx(2, rel=0.1)
    assert counts[0] / counts[9] == pytest.approx(10, rel=0.2)


def test_ragged_index_lays_ranges_end_to_end():
    index = ragged_index(np.array([5, 0, 9]), np.array([2, 3, 0]))
    assert index.tolist() == [5, 6, 0, 1, 2]
