"""The boilerplate benchmark's corpus (benchmarks/dedup_bench/boilerplate.py): the generated
corpus with one shared footer on every fifth page, and the benchmark's two runs of it."""

import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from dedup_bench.boilerplate import (
    FOOTER_EVERY,
    footer,
    measure_boilerplate,
    print_boilerplate_report,
    write_boilerplate_corpus,
)
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
def test_the_benchmark_refuses_then_skips_and_accounts_for_every_page(tmp_path, capsys):
    # 120 footer pages and a bucket limit of 20: hot buckets, which the default 1,000 would need
    # some 30,000 pages to make
    record = measure_boilerplate(tmp_path, 600, max_bucket_size=20)
    refuse, skip = record["runs"]["refuse"], record["runs"]["skip"]
    assert "above max_bucket_size=20" in refuse["refused"]
    assert skip["hot_buckets_skipped"] > 0 and skip["largest_hot_bucket_texts"] > 20
    assert record["every_document_accounted_for"] and skip["documents"] == 600 == skip["clustered"]
    print_boilerplate_report(record)
    printed = capsys.readouterr().out
    assert "| refuse |" in printed and "hot buckets left out:" in printed
    assert "Every document accounted for: True" in printed


def test_the_benchmark_script_takes_boilerplate_alone():
    result = subprocess.run(
        [sys.executable, "benchmarks/benchmark.py", "--boilerplate", "600", "--peers", "rensa"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2 and "--boilerplate N takes N" in result.stderr
