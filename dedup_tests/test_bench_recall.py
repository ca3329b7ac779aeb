"""The benchmark's planted-pair recall (benchmarks/dedup_bench/recall.py) on a generated corpus:
the recall of pairs of distinct texts, which the recall audit's near-copy figure comes closest
to, counted again in plain Python from the texts' content hashes and the accepted edges."""


import duckdb
import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.settings.model import Settings
from dedup_bench.common import THRESHOLD, BenchmarkError, truth_path
from dedup_bench.corpus import generate
from dedup_bench.recall import (
    CorpusBodies,
    PlantedPairs,
    needed_doc_ids,
    recall_report,
    stored_pairs,
)


def test_recall_of_distinct_texts_counts_each_pair_of_texts_once_whatever_copy_is_first(tmp_path):
    corpus = tmp_path / "c.parquet"
    generate(3_000, corpus, seed=11)
    database = tmp_path / "db.duckdb"
    run_library(str(corpus), str(database), None, Settings(num_perm=128, audit_sample_size=0))
    bodies = CorpusBodies(corpus, needed_doc_ids(truth_path(corpus), [database]))
    report = recall_report(database, PlantedPairs.load(truth_path(corpus), bodies), bodies)

    with duckdb.connect(str(database), read_only=True) as connection:
        text = {
            int(doc_id): (content_hash, first_band)
            for doc_id, content_hash, first_band in connection.execute(
                "select doc_id, content_hash, lsh_bands[1] from dedup.fingerprinted"
            ).fetchall()
        }
        edges = connection.execute("select left_doc_id, right_doc_id from dedup.duplicate_pairs").fetchall()
    linked = {frozenset((text[int(a)], text[int(b)])) for a, b in edges}
    truth = pq.read_table(truth_path(corpus), columns=["doc_id", "origin_doc_id"]).to_pydict()
    planted = PlantedPairs.load(truth_path(corpus), bodies)
    pairs = {
        frozenset((text[int(origin)], text[int(copy)]))
        for origin, copy, jaccard in zip(truth["origin_doc_id"], truth["doc_id"], planted.jaccard)
        if jaccard >= THRESHOLD and text[int(origin)] != text[int(copy)]
    }
    assert report["planted_distinct_text_pairs"] == len(pairs) > 100
    assert report["recall_distinct_texts"] == np.mean([pair in linked for pair in pairs])
    # every planted pair of distinct texts is a near-copy true pair of the exhaustive audit, once
    # per pair of their copies
    assert report["audit_true_pairs"] > report["audit_near_true_pairs"] >= len(pairs)


def test_corpus_bodies_holds_only_the_planted_and_accepted_documents(tmp_path):
    corpus = tmp_path / "c.parquet"
    generate(2_000, corpus, seed=5)
    database = tmp_path / "db.duckdb"
    run_library(str(corpus), str(database), None, Settings(num_perm=128, audit_sample_size=0))
    needed = needed_doc_ids(truth_path(corpus), [database])
    truth = pq.read_table(truth_path(corpus), columns=["doc_id", "origin_doc_id"])
    accepted = stored_pairs(database, "duplicate_pairs")
    expected = np.unique(np.concatenate([*(column.to_numpy() for column in truth.columns), *accepted]))
    all_ids = pq.read_table(corpus, columns=["doc_id"])["doc_id"].to_numpy()
    assert np.array_equal(needed, expected) and len(needed) < len(all_ids)

    bodies = CorpusBodies(corpus, needed, batch_size=100)  # several batches
    assert np.array_equal(np.sort(bodies.doc_ids.to_numpy()), needed)
    assert bodies.id_base == all_ids.max() + 1
    corpus_table = pq.read_table(corpus, columns=["doc_id", "body"])
    some = needed[:: max(1, len(needed) // 50)]
    positions = pc.index_in(some, value_set=corpus_table["doc_id"])
    assert bodies.bodies_of(some).to_pylist() == corpus_table["body"].take(positions).to_pylist()

    not_loaded = np.setdiff1d(all_ids, needed)[:3]
    with pytest.raises(BenchmarkError, match="3 doc_id.*not among the loaded documents"):
        bodies.bodies_of(np.concatenate([needed[:2], not_loaded]))
