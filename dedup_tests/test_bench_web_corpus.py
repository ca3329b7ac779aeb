"""The benchmark's web-length corpus (benchmarks/dedup_bench/web_corpus.py): the planned length
distribution, the sites' boilerplate, and pairs that are all planted and known."""

from __future__ import annotations

from functools import reduce

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dedup_assets.core.verify.jaccard import pair_jaccard, shingle_sets
from dedup_assets.core.text.normalize import Shingling
from dedup_bench.common import THRESHOLD, truth_path
from dedup_bench.corpus import COPY_SHARE, MIRROR_SHARE, generate
from dedup_bench.web_corpus import HEAVY_FRACTION, HEAVY_SHARE, LENGTH_SIGMA, WebPages

pytestmark = pytest.mark.bench

DOCUMENTS = 20_000


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[pa.Table, pa.Table, np.ndarray]:
    path = tmp_path_factory.mktemp("web") / "web.parquet"
    generate(DOCUMENTS, path, seed=5, pages=WebPages)
    documents = pq.read_table(path)
    sizes = np.asarray(pc.binary_length(documents["body"].cast(pa.binary())))
    return documents, pq.read_table(truth_path(path)), sizes


def test_same_seed_writes_the_same_bytes(tmp_path):
    paths = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    for path in paths:
        generate(500, path, seed=3, pages=WebPages)
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert truth_path(paths[0]).read_bytes() == truth_path(paths[1]).read_bytes()


def test_page_lengths_follow_web_pages(corpus):
    _, truth, sizes = corpus
    assert 2_700 <= np.median(sizes) <= 3_300
    assert 4_000 <= sizes.mean() <= 6_000
    assert (sizes > 100_000).sum() >= 1
    # the log-normal's spread, on the originals (copies repeat them) above the short boilerplate pages
    originals = np.setdiff1d(np.arange(DOCUMENTS), truth["doc_id"].to_numpy())
    logs = np.log(sizes[originals])
    upper = np.quantile(logs, 0.84) - np.quantile(logs, 0.5)
    assert 0.8 * LENGTH_SIGMA <= upper <= 1.2 * LENGTH_SIGMA


def _site_pages(documents: pa.Table, truth: pa.Table) -> dict[str, np.ndarray]:
    """The originals of every site with at least 20 of them."""
    originals = np.setdiff1d(np.arange(DOCUMENTS), truth["doc_id"].to_numpy())
    domains = documents["domain"].to_numpy(zero_copy_only=False)[originals]
    names, counts = np.unique(domains, return_counts=True)
    return {name: originals[domains == name] for name in names[counts >= 20]}


def test_some_pages_are_mostly_their_sites_boilerplate(corpus):
    documents, truth, _ = corpus
    heavy = pages = 0
    for ids in _site_pages(documents, truth).values():
        values, offsets = shingle_sets(documents["body"].take(ids), Shingling(5))
        sets = [values[start:end] for start, end in zip(offsets[:-1], offsets[1:])]
        template = reduce(np.intersect1d, sets)  # a site's boilerplate is on every page of it
        assert len(template)
        shares = np.array([np.isin(shingles, template).mean() for shingles in sets])
        heavy += int((shares >= HEAVY_FRACTION[0] - 0.05).sum())
        pages += len(ids)
    assert 0.5 * HEAVY_SHARE <= heavy / pages <= 2 * HEAVY_SHARE


def test_every_pair_over_the_threshold_within_a_site_is_planted(corpus):
    """Boilerplate makes a site's pages alike, but no two originals reach the threshold."""
    documents, truth, _ = corpus
    left, right = [], []
    for ids in _site_pages(documents, truth).values():
        a, b = np.triu_indices(len(ids), 1)
        left.append(ids[a])
        right.append(ids[b])
    left, right = np.concatenate(left), np.concatenate(right)
    scores = pair_jaccard(documents["body"].combine_chunks(), left, right, Shingling(5), "fss")
    assert len(scores) > 10_000
    assert scores.max() < THRESHOLD
    assert scores.max() > 0.3  # the boilerplate is shared


def test_planted_copies_are_known_exact_and_near(corpus):
    documents, truth, _ = corpus
    assert 0.8 * COPY_SHARE <= truth.num_rows / DOCUMENTS <= 1.2 * COPY_SHARE
    kinds = truth["kind"].to_numpy(zero_copy_only=False)
    assert 0.8 * MIRROR_SHARE <= (kinds == "mirror").mean() <= 1.2 * MIRROR_SHARE
    copies, origins = truth["doc_id"].to_numpy(), truth["origin_doc_id"].to_numpy()
    assert (origins < copies).all()
    body = documents["body"]
    same = pc.equal(body.take(copies), body.take(origins)).to_numpy(zero_copy_only=False)
    assert same[kinds == "mirror"].all()
    assert same[kinds == "edited"].mean() < 0.05  # a short page at a low rate may draw no edit
    edited = kinds == "edited"
    scores = pair_jaccard(body.combine_chunks(), copies[edited], origins[edited], Shingling(5), "fss")
    assert 0.3 < (scores >= THRESHOLD).mean() < 0.9  # near-duplicates, and edited past the threshold
