"""The boilerplate benchmark's corpus (benchmarks/dedup_bench/boilerplate.py): the generated
corpus with one shared footer on every fifth page, and the benchmark's two runs of it."""

import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from dedup_bench.boilerplate import FOOTER_EVERY, footer, write_boilerplate_corpus
from dedup_bench.corpus import generate

from .conftest import PROJECT_ROOT


def test_every_fifth_page_carries_the_footer_and_the_rest_are_the_corpus_as_generated(tmp_path):
    corpus = pq.read_table(write_boilerplate_corpus(40, tmp_path, seed=3))
    generate(40, tmp_path / "plain.parquet", seed=3)
    plain = pq.read_table(tmp_path / "plain.parquet")
    assert corpus.schema == plain.schema and corpus["doc_id"] == plain["doc_id"]
    shared = " " + footer(3)
    for doc_id, body, original in zip(corpus["doc_id"].to_pylist(), corpus["body"].to_pylist(), plain["body"].to_pylist()):
        assert body == (original + shared if doc_id % FOOTER_EVERY == 0 else original)
    assert len(shared.encode()) > 2_500  # a web footer's few KB
    assert not (tmp_path / "boilerplate-40.base.parquet").exists()


@pytest.mark.slow
def test_the_benchmark_runs_both_settings_and_accounts_for_every_page(tmp_path):
    result = subprocess.run(
        [sys.executable, "benchmarks/benchmark.py", "--boilerplate", "600", "--workdir", str(tmp_path), "--json-out", str(tmp_path / "r.jsonl")],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((tmp_path / "r.jsonl").read_text())
    skip = record["runs"]["skip"]
    assert record["every_document_accounted_for"] and skip["documents"] == 600 == skip["clustered"]
    assert "| skip |" in result.stdout and "Every document accounted for: True" in result.stdout
