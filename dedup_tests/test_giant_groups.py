"""A giant group of identical copies (issue 49) through a real CLI run: 20,000 copies of one page
among generated pages make one cluster with one kept, change no other count, and the recall
audit counts their pairs from the group's size. Its memory is measured by the benchmark
(``benchmarks/benchmark.py --docs N --copies-of-one C``), not asserted here."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from dedup_assets.core.audit.sample import sample_doc_ids
from dedup_assets.core.settings.model import Settings
from dedup_bench.giant_group import write_copies_corpus

pytestmark = pytest.mark.faults

OTHERS, COPIES = 5_000, 20_000


def _run(folder: Path, corpus: Path) -> dict:
    """``dedup run`` of ``corpus`` at the defaults in a fresh database: its manifest."""
    (folder / "dagster_home").mkdir(parents=True)
    env = {
        **os.environ,
        "DAGSTER_HOME": str(folder / "dagster_home"),
        "DEDUP_INPUT": str(corpus),
        "DEDUP_DATABASE": str(folder / "db.duckdb"),
        "DEDUP_OUTPUT_DIR": str(folder / "out"),
        "DEDUP_DUCKDB_MEMORY": "1GB",
    }
    done = subprocess.run(
        [sys.executable, "-m", "dedup_assets.cli", "run"], cwd=folder, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((folder / "out" / "manifest.json").read_text(encoding="utf-8"))


def test_twenty_thousand_copies_make_one_cluster_and_their_pairs_are_counted(tmp_path):
    corpus = write_copies_corpus(OTHERS + COPIES, COPIES, tmp_path / "corpora")
    alone = _run(tmp_path / "alone", write_copies_corpus(OTHERS, 0, tmp_path / "corpora"))["counts"]
    manifest = _run(tmp_path / "with-copies", corpus)
    counts = manifest["counts"]
    first_copy = str(OTHERS)  # doc_ids go on from the generated pages', in input order

    with (tmp_path / "with-copies" / "out" / "clusters.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == OTHERS + COPIES  # every document in the release's clusters
    cluster = next(row["cluster_id"] for row in rows if row["doc_id"] == first_copy)
    members = [row for row in rows if row["cluster_id"] == cluster]
    assert len(members) == COPIES and all(int(row["doc_id"]) >= OTHERS for row in members)
    assert sum(row["decision"].startswith("kept") for row in members) == 1

    # every other count is the generated pages' alone, with one cluster more and its copies
    assert counts["cluster_count"] == alone["cluster_count"] + 1
    assert counts["removed_document_rows"] == alone["removed_document_rows"] + COPIES - 1
    assert counts["exact_duplicate_pair_rows"] == alone["exact_duplicate_pair_rows"] + COPIES - 1
    for name in ("near_duplicate_pair_rows", "chained_member_rows", "rejected_document_rows"):
        assert counts[name] == alone[name], name

    # the audit: k sampled copies of the n count k(n - 1) - k(k - 1)/2 pairs, one row, found
    with duckdb.connect(str(tmp_path / "with-copies" / "db.duckdb"), read_only=True) as connection:
        doc_ids = connection.sql("select doc_id from dedup.documents").to_arrow_table().column("doc_id")
        among = connection.execute(
            "select pairs, found from dedup.recall_audit where left_doc_id = ? and right_doc_id = ?",
            [first_copy, first_copy],
        ).fetchall()
        kept = connection.execute(
            "select count(*) from dedup.audit_true_pairs where doc_id::bigint >= ?", [OTHERS]
        ).fetchall()[0][0]
    sample = sample_doc_ids(doc_ids, Settings().audit_sample_size, Settings().minhash_seed)
    sampled = sum(int(doc_id) >= OTHERS for doc_id in sample.to_pylist())
    assert sampled > 100
    assert among == [(sampled * (COPIES - 1) - sampled * (sampled - 1) // 2, True)]
    assert kept == sampled + 1  # the sampled copies, and the others as one row: never each pair
    assert manifest["recall_audit"]["true_pairs"] >= among[0][0]
