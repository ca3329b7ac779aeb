"""The inputs of docs/fault-matrix.md's untried cases (dedup_tests/faults/untried_cases.py),
made small: what each case's page says of its input holds, and the command the page shows runs."""

import csv
import subprocess
import sys

import pyarrow.parquet as pq

from .conftest import PROJECT_ROOT
from .faults.untried_cases import FOOTER_WORDS, footer_pages, one_word


def test_one_word_bodies_repeat_in_groups_and_each_is_one_word(tmp_path):
    one_word(tmp_path / "w.parquet", documents=5_000)
    table = pq.read_table(tmp_path / "w.parquet").to_pydict()
    assert len(table["doc_id"]) == len(set(table["doc_id"])) == 5_000
    assert all(len(body.split()) == 1 for body in table["body"])
    counts = {body: table["body"].count(body) for body in set(table["body"])}
    assert max(counts.values()) > 100 and len(counts) < 5_000  # groups of copies, the largest big


def test_footer_pages_are_distinct_and_end_with_one_footer(tmp_path):
    footer_pages(tmp_path / "f.parquet", documents=200, words=(20, 60))
    bodies = pq.read_table(tmp_path / "f.parquet").column("body").to_pylist()
    footers = {" ".join(body.split()[-FOOTER_WORDS:]) for body in bodies}
    assert len(bodies) == len(set(bodies)) == 200 and len(footers) == 1
    assert all(20 <= len(body.split()) - FOOTER_WORDS <= 60 for body in bodies)


def test_small_files_as_the_page_shows_them_made_with_repeated_ids_across_files(tmp_path):
    made = subprocess.run(
        [sys.executable, "-m", "dedup_tests.faults.untried_cases", "small-files", str(tmp_path / "in"), "--files", "300"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
    )
    assert made.returncode == 0, made.stderr
    files = sorted((tmp_path / "in").glob("*.csv"))
    rows = [row for path in files for row in csv.DictReader(path.open(encoding="utf-8", newline=""))]
    assert len(files) == 300 and all(2 <= sum(1 for _ in path.open()) - 1 <= 6 for path in files)
    ids = [row["doc_id"] for row in rows]
    assert len(ids) > len(set(ids))  # some rows repeat an earlier file's doc_id
    assert len({row["body"] for row in rows}) < len(rows)  # copies across files
    assert f"wrote 300 CSV files, {len(rows):,} rows" in made.stderr
