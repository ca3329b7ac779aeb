"""Exact copies at scale: many documents with one normalized text are folded into their first
copy before the LSH self-join, so they cost rows in proportion to their number and no pair slots,
and the clusters are the ones every pair would give."""

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.settings.model import Settings
from dedup_assets.core.storage.tables import SCHEMA, Tables
from dedup_assets.core.verify.pairs import verification_memory_estimate

# more copies than max_bucket_size (1,000 distinct texts): one bucket of them all would be refused
COPIES = 1_500
# the defaults but for batches small enough that the copies span several
SETTINGS = Settings(batch_size=400)
WORDS = [f"word{index}" for index in range(400)]


def _text(seed: int, length: int = 120) -> list[str]:
    return [WORDS[(seed * 7919 + index * 104729) % len(WORDS)] for index in range(length)]


def _corpus(path) -> None:
    page = _text(1)
    variant = page[:60] + ["changed"] + page[61:]
    other = _text(2)
    rows = [
        # copies differ in case and punctuation only: one normalized text
        (f"copy-{index:05d}", " ".join(page).upper() if index % 2 else " ".join(page) + ".")
        for index in reversed(range(COPIES))
    ]
    rows += [
        ("variant", " ".join(variant)),
        ("other-a", " ".join(other)),
        ("other-b", " ".join(other[:90] + ["edited"] + other[91:])),
        *((f"unique-{seed}", " ".join(_text(seed))) for seed in range(3, 8)),
    ]
    pq.write_table(
        pa.table(
            {
                "doc_id": [doc_id for doc_id, _ in rows],
                "source": ["crawl"] * len(rows),
                "domain": [f"site{index % 50}.example" for index in range(len(rows))],
                "crawled_at": ["2026-03-01"] * len(rows),
                "title": ["page"] * len(rows),
                "body": [body for _, body in rows],
            }
        ),
        path,
    )


# one worker runs them all, so the run below is made once
pytestmark = pytest.mark.xdist_group("exact_groups")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("exact")
    _corpus(folder / "copies.parquet")
    database = folder / "run.duckdb"
    result = run_library(str(folder / "copies.parquet"), str(database), None, SETTINGS)
    with duckdb.connect(str(database), read_only=True) as connection:
        yield result, connection, folder


def test_copies_take_no_slots_and_rows_in_proportion_to_their_number(run):
    result, connection, _ = run
    pairs = "from dedup.candidate_pairs"
    found_by = dict(connection.execute(f"select found_by, count(*) {pairs} group by all").fetchall())
    assert found_by == {"content_hash": COPIES - 1, "lsh": 2, "lsh_via_copy": COPIES - 1}
    bands = dict(connection.execute(f"select right_doc_id, shared_bands {pairs} where found_by = 'lsh'").fetchall())
    # the copies' bucket holds two texts, the page and its variant: the variant with each copy
    # in every band they share, and other-a with other-b; every copy alone would take none
    assert result["counts"]["grouped_candidate_pair_slots"] == COPIES * bands["variant"] + bands["other-b"]
    assert result["counts"]["duplicate_pair_rows"] == 2 * COPIES
    assert result["counts"]["exact_duplicate_pair_rows"] == COPIES - 1
    # only the documents of the two pairs LSH found are shingled again
    assert verification_memory_estimate(connection, Tables.in_schema(SCHEMA), 64)[0] == 4


def test_every_copy_is_paired_with_its_first_copy_and_the_variant(run):
    _, connection, _ = run
    # the copies are read from the last down: the first copy is the first read, not the
    # smallest doc_id, so that a later batch never changes an earlier group's first copy
    assert connection.execute(
        "select left_doc_id, right_doc_id, found_by, is_exact, jaccard from dedup.scored_pairs "
        "where 'copy-00017' in (left_doc_id, right_doc_id)"
    ).fetchall() == [
        ("copy-00017", f"copy-{COPIES - 1:05d}", "content_hash", True, 1.0),
        ("copy-00017", "variant", "lsh_via_copy", False, pytest.approx(111 / 121)),  # 5 of 116 shingles changed
    ]
    lsh, via_copy = connection.execute(
        "select list(distinct jaccard) filter (where found_by = 'lsh' and right_doc_id = 'variant'), "
        "list(distinct jaccard) filter (where found_by = 'lsh_via_copy') from dedup.scored_pairs"
    ).fetchall()[0]
    assert len(lsh) == 1 and via_copy == lsh


def test_clusters_are_the_connected_components_of_all_pairs(run):
    _, connection, _ = run
    clusters = connection.execute(
        "select cluster_id, count(*) from dedup.clusters where cluster_size > 1 group by all order by all"
    ).fetchall()
    # named by the smallest member, which is not the first copy
    assert clusters == [("cluster-copy-00000", COPIES + 1), ("cluster-other-a", 2)]
    assert connection.execute("select count(*) from dedup.clusters where cluster_size = 1").fetchall() == [(5,)]
    assert connection.execute("select count(*) from dedup.deduped_documents").fetchall() == [(7,)]


def test_identical_input_gives_identical_tables(run):
    _, connection, folder = run
    database = folder / "again.duckdb"
    run_library(str(folder / "copies.parquet"), str(database), None, SETTINGS)
    with duckdb.connect(str(database), read_only=True) as again:
        for table in ("candidate_pairs", "scored_pairs", "duplicate_pairs", "clusters"):
            query = f"select * from dedup.{table}"
            assert again.execute(query).fetchall() == connection.execute(query).fetchall(), table
