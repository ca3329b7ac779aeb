"""Incremental batches (core/incremental/, core/read/batches.py, pipeline/library.py's run_batch): batches added
in key order find the duplicate edges and clusters of one run over all of them, never take back
an earlier decision, and refuse whatever would make the index differ from that run."""

import csv
import random
import re
import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from dedup_assets.core.read.batches import BatchError, BatchFolder, find_batches
from dedup_assets.core.incremental.batch_order import BatchOrderError
from dedup_assets.core.incremental.index_changes import add_batch, forget_batches
from dedup_assets.core.incremental.index_reports import one_shot_differences
from dedup_assets.core.incremental.index_tables import IndexTables, indexed_batches
from dedup_assets.core.incremental.payloads import payload_folder
from dedup_assets.core.pipeline.library import run_batch, run_library
from dedup_assets.core.read.protocol import InputError
from dedup_assets.core.release.files import verify_release
from dedup_assets.core.settings.model import Settings
from dedup_assets.core.storage.store import read_lineage, write_lineage
from dedup_assets.core.storage.tables import SCHEMA, Tables
from dedup_assets.core.verify.jaccard import exact_jaccard

from .conftest import FIXTURE, document, sha256_of_files, write_csv

INDEX = IndexTables.in_schema()
# the index's own tables (staged_* and universe_* are the scratch space of the batch being added)
INDEX_TABLES = (
    "batches", "documents", "fingerprints", "band_index", "pairs",
    "clusters", "members", "moves", "bridges", "rejected",
)
FIRST, SECOND, THIRD = "2026-11-01", "2026-11-02", "2026-11-03"
# 16 bands of 4 rows: a pair at Jaccard 0.79 shares a band with probability > 0.999 (8 bands of
# 8 rows, the default, only 0.75), so the hand-made pairs below are always candidates
SURE_CANDIDATES = Settings(rows_per_band=4)


def _csv_rows(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _batch_files(folder: Path, batches: list[list[dict]]) -> BatchFolder:
    """One CSV per batch, keyed by consecutive days from FIRST on."""
    folder.mkdir(parents=True, exist_ok=True)
    for day, rows in enumerate(batches, start=1):
        write_csv(folder / f"2026-11-{day:02d}.csv", rows)
    return find_batches(folder)


def _fixture_in_three_batches(folder: Path) -> tuple[BatchFolder, Settings]:
    rows = _csv_rows(FIXTURE)
    return _batch_files(folder, [rows[:8], rows[8:16], rows[16:]]), Settings()


def _bridge_pages() -> tuple[dict, dict, dict]:
    """A, B, C: B is a near duplicate of A and of C, which are none of each other. A = 25 words
    + 100 shared, B = the 100, C = the 100 + 25 others: B's 96 shingles are all in A's 121 and in
    C's, so J(A, B) = J(B, C) = 96/121, and J(A, C) = 96/146. C is crawled after A, so it is the
    representative; A has the smallest doc_id, so it names the cluster; B is the newest."""
    middle = _words("mid", 100)
    return (
        document("page-a", " ".join(_words("left", 25) + middle), crawled_at="2026-01-01"),
        document("page-b", " ".join(middle), crawled_at="2026-02-01"),
        document("page-c", " ".join(middle + _words("right", 25)), crawled_at="2026-01-05"),
    )


def _bridge_batches(folder: Path) -> tuple[BatchFolder, Settings]:
    """A and C in the first batch, B in the second."""
    page_a, page_b, page_c = _bridge_pages()
    return _batch_files(folder, [[page_a, page_c], [page_b]]), SURE_CANDIDATES


def _add_batches(
    batches: BatchFolder, database: Path, output_dir: Path | None = None, settings: Settings = Settings()
) -> list[dict]:
    output = None if output_dir is None else str(output_dir)
    return [run_batch(batches, key, str(database), output, settings) for key in batches.keys()]


def _query(database: Path, query: str) -> list[tuple]:
    with duckdb.connect(str(database), read_only=True) as connection:
        return connection.execute(query).fetchall()


def _index(database: Path) -> dict:
    """Every row of the index's tables, and every file of its payload folder."""
    rows = {name: _query(database, f"select * from incremental.{name} order by all") for name in INDEX_TABLES}
    return {**rows, "payloads": sha256_of_files(payload_folder(str(database)))}


def _indexed_keys(database: Path) -> list[str]:
    with duckdb.connect(str(database), read_only=True) as connection:
        return [batch.key for batch in indexed_batches(connection, INDEX)]


def _differences(database: Path) -> list[str] | None:
    with duckdb.connect(str(database), read_only=True) as connection:
        return one_shot_differences(connection, Tables.in_schema(SCHEMA), INDEX)


def _releases(output_dir: Path) -> dict[str, dict[str, str]]:
    """Batch key -> file name -> sha256, for every batch release under ``output_dir``."""
    return {
        release.name: sha256_of_files(release)
        for release in (output_dir / "batches").iterdir()
        if not release.name.startswith(".")  # not the lock files and folders of releases beside them
    }


def _words(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{index}" for index in range(count)]


# --- equivalence with one run over all batches ---------------------------------------------------


def test_three_batches_of_the_fixture_find_the_edges_and_clusters_of_one_run(tmp_path):
    batches, _ = _fixture_in_three_batches(tmp_path / "batches")
    database, output = tmp_path / "index.duckdb", tmp_path / "out"
    added = _add_batches(batches, database, output)
    one_shot = run_library(str(batches.folder), str(database), None)["counts"]

    assert _differences(database) == []
    releases = {key: output / "batches" / key for key in batches.keys()}
    pairs = {key: _csv_rows(release / "duplicate_pairs.csv") for key, release in releases.items()}
    clusters = {key: _csv_rows(release / "clusters.csv") for key, release in releases.items()}
    assert sum(map(len, pairs.values())) == one_shot["duplicate_pair_rows"]
    assert sum(map(len, clusters.values())) == one_shot["document_rows"]
    assert sum(result["counts"]["document_rows"] for result in added) == one_shot["document_rows"]
    for result, key in zip(added, batches.keys()):
        counts = result["counts"]
        edges = counts["duplicate_pairs_within_batch"] + counts["duplicate_pairs_with_earlier"]
        assert edges == len(pairs[key])
        assert counts["kept_documents"] + counts["removed_documents"] == len(clusters[key])
    totals = added[-1]["totals"]
    assert totals["duplicate_pairs"] == one_shot["duplicate_pair_rows"]
    # every cluster keeps one document, and each bridge one more
    assert totals["kept_documents"] == one_shot["cluster_count"] + totals["bridges"]
    # the split cuts clusters, so batches did find edges with earlier ones
    assert sum(result["counts"]["duplicate_pairs_with_earlier"] for result in added) > 0


def _generated_corpus(pages: int = 1_500, seed: int = 2026) -> list[dict]:
    """Random-word pages; near duplicates of a third of them (1 to 6 words changed, so some fall
    below the threshold), placed anywhere, before their page too; exact copies (case and
    punctuation changed) of pages and near duplicates, each after its original but named to sort
    before it; and empty bodies."""
    rng = random.Random(seed)
    vocabulary = _words("w", 5_000)

    def row(doc_id: str, body: str, place: float) -> tuple[float, dict]:
        day = f"2026-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"
        return place, document(doc_id, body, domain=f"site{rng.randrange(40)}.example", crawled_at=day)

    placed = [
        row(f"page-{index:05d}", " ".join(rng.choices(vocabulary, k=rng.randrange(30, 160))), rng.random())
        for index in range(pages)
    ]
    for _, page in placed[: pages // 3]:
        words = page["body"].split()
        for version in range(rng.randrange(1, 3)):
            edited = list(words)
            for _ in range(rng.randrange(1, 7)):
                edited[rng.randrange(len(edited))] = rng.choice(vocabulary)
            placed.append(row(f"{page['doc_id']}-v{version}", " ".join(edited), rng.random()))
    for place, original in rng.sample(placed, len(placed) // 5):
        for copy in range(rng.randrange(1, 4)):
            body = original["body"].upper() if copy % 2 else original["body"].replace(" ", ", ") + "!"
            placed.append(row(f"copy-{original['doc_id']}-{copy}", body, place + (1 - place) * rng.random()))
    placed += [row(f"empty-{index:02d}", ["", "   ", "?!"][index % 3], rng.random()) for index in range(12)]
    return [row for _, row in sorted(placed, key=lambda item: item[0])]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The generated corpus, and one run over all of it (schema dedup) in a database file that
    each split's index is added to."""
    folder = tmp_path_factory.mktemp("corpus")
    rows = _generated_corpus()
    write_csv(folder / "all.csv", rows)
    one_shot = run_library(str(folder / "all.csv"), str(folder / "one_shot.duckdb"), None)["counts"]
    return rows, folder / "one_shot.duckdb", one_shot


def test_the_generated_corpus_has_copies_near_duplicates_borderline_pairs_and_empty_bodies(corpus):
    _, database, one_shot = corpus
    found_by = _query(database, "select distinct found_by from dedup.duplicate_pairs order by 1")
    assert found_by == [("content_hash",), ("lsh",), ("lsh_via_copy",)]
    assert ("below_jaccard_threshold",) in _query(database, "select distinct reason from dedup.scored_pairs")
    assert _query(database, "select count(*) from dedup.fingerprinted where shingle_count = 0") == [(12,)]
    assert one_shot["document_rows"] > 2_000 and one_shot["duplicate_cluster_rows"] > 300


@pytest.mark.parametrize(
    "ends",
    [(0.5, 1.0), (0.05, 0.4, 0.45, 0.8, 1.0), (1, 2, 0.5, 1.0)],
    ids=["two-halves", "five-uneven", "single-document-batches"],
)
def test_any_split_of_a_generated_corpus_finds_the_edges_and_clusters_of_one_run(tmp_path, corpus, ends):
    rows, one_shot_database, one_shot = corpus
    # each end is a row count (int) or a share of the rows (float)
    cuts = [0, *(end if isinstance(end, int) else round(end * len(rows)) for end in ends)]
    batches = _batch_files(tmp_path / "batches", [rows[start:end] for start, end in zip(cuts, cuts[1:])])
    database = tmp_path / "index.duckdb"
    shutil.copy(one_shot_database, database)
    added = _add_batches(batches, database)

    assert _differences(database) == []
    totals = added[-1]["totals"]
    assert totals["document_rows"] == one_shot["document_rows"]
    assert totals["duplicate_pairs"] == one_shot["duplicate_pair_rows"]
    assert totals["kept_documents"] == one_shot["cluster_count"] + totals["bridges"]
    # every removed document names a kept one, of its own cluster, in its batch or an earlier one
    assert _query(
        database,
        """
        select c.doc_id from incremental.clusters c
        left join incremental.clusters r on r.doc_id = c.representative_doc_id
        left join incremental.members cm on cm.doc_id = c.doc_id
        left join incremental.members rm on rm.doc_id = r.doc_id
        where c.decision = 'removed_duplicate'
          and (r.decision = 'kept_representative' and rm.cluster_id = cm.cluster_id
               and r.batch_key = c.representative_batch and r.batch_key <= c.batch_key) is not true
        """,
    ) == []
    # the split puts copies in later batches than their first copy, under smaller doc_ids (a
    # pair's left doc_id is the smaller)
    assert _query(
        database,
        """
        select count(*) > 0 from incremental.pairs p
        join incremental.fingerprints l on l.doc_id = p.left_doc_id
        join incremental.fingerprints r on r.doc_id = p.right_doc_id
        where p.is_exact and l.batch_key > r.batch_key
        """,
    ) == [(True,)]


def test_a_one_shot_run_over_the_batch_folder_matches_when_file_names_sort_otherwise_than_keys(tmp_path):
    # key "a" sorts before "a-1", but the file a-1.csv before a.csv ("-" < "."): a one-shot run
    # that reads the folder by file name takes y, not x, as the copies' first copy
    text = " ".join(_words("w", 60))
    folder = tmp_path / "batches"
    folder.mkdir()
    write_csv(folder / "a.csv", [document("x", text)])
    write_csv(folder / "a-1.csv", [document("y", text.upper()), document("z", text + "!")])
    batches = find_batches(folder)
    assert batches.keys() == ["a", "a-1"]
    database = tmp_path / "index.duckdb"
    _add_batches(batches, database)
    run_library(str(folder), str(database), None)

    assert _differences(database) == []


# --- adding again, order, settings -----------------------------------------------------------------


@pytest.mark.parametrize("make_batches", [_fixture_in_three_batches, _bridge_batches], ids=["fixture", "bridges"])
def test_adding_the_latest_batch_again_changes_no_release_file_and_no_index_row(tmp_path, make_batches):
    batches, settings = make_batches(tmp_path / "batches")
    database, output = tmp_path / "index.duckdb", tmp_path / "out"
    added = _add_batches(batches, database, output, settings)
    # the latest batch joined earlier clusters, which adding it again must not do a second time
    assert added[-1]["counts"]["duplicate_pairs_with_earlier"] > 0
    releases, index = _releases(output), _index(database)

    run_batch(batches, batches.keys()[-1], str(database), str(output), settings)

    assert _releases(output) == releases
    assert _index(database) == index


def test_a_batch_after_a_missing_one_is_refused_naming_the_batch_to_add_first(tmp_path):
    batches, _ = _fixture_in_three_batches(tmp_path / "batches")
    database = tmp_path / "index.duckdb"
    with pytest.raises(BatchOrderError, match=f"2 earlier batches missing: {FIRST}, {SECOND}") as refused:
        run_batch(batches, THIRD, str(database), None)
    assert str(refused.value).endswith(f"--partition {FIRST}")

    run_batch(batches, FIRST, str(database), None)
    with pytest.raises(BatchOrderError, match=f"cannot be added before batch {SECOND}") as refused:
        run_batch(batches, THIRD, str(database), None)
    assert str(refused.value).endswith(f"--partition {SECOND}")
    assert _indexed_keys(database) == [FIRST]


def test_an_earlier_batch_added_again_is_refused_naming_the_later_ones_and_how_to_forget_them(tmp_path):
    batches, _ = _fixture_in_three_batches(tmp_path / "batches")
    database = tmp_path / "index.duckdb"
    _add_batches(batches, database)
    index = _index(database)

    later = re.escape(f"in the index already ({SECOND}, {THIRD})")
    with pytest.raises(BatchOrderError, match=later) as refused:
        run_batch(batches, FIRST, str(database), None)
    assert f"`dedup forget-batches {FIRST}`" in str(refused.value)
    with pytest.raises(BatchOrderError, match=re.escape(f"in the index already ({THIRD})")) as refused:
        run_batch(batches, SECOND, str(database), None)
    assert f"`dedup forget-batches {SECOND}`" in str(refused.value)
    assert _index(database) == index


def test_forgotten_batches_leave_the_index_as_before_them_and_can_be_added_again(tmp_path):
    batches, _ = _fixture_in_three_batches(tmp_path / "batches")
    database, output = tmp_path / "index.duckdb", tmp_path / "out"
    run_batch(batches, FIRST, str(database), str(output))
    after_first = _index(database)
    for key in (SECOND, THIRD):
        run_batch(batches, key, str(database), str(output))
    releases, index = _releases(output), _index(database)

    with duckdb.connect(str(database)) as connection:
        assert forget_batches(connection, INDEX, SECOND) == [SECOND, THIRD]
    assert _index(database) == after_first

    for key in (SECOND, THIRD):
        run_batch(batches, key, str(database), str(output))
    assert _releases(output) == releases
    assert _index(database) == index


@pytest.mark.parametrize("name, value", [("num_perm", 128), ("jaccard_threshold", 0.8), ("shingle_unit", "char")])
def test_a_batch_with_other_algorithm_settings_is_refused_naming_both_values(tmp_path, name, value):
    batches, _ = _fixture_in_three_batches(tmp_path / "batches")
    database = tmp_path / "index.duckdb"
    run_batch(batches, FIRST, str(database), None)
    index = _index(database)

    built = getattr(Settings(), name)
    changed = f"the index has {name}={built!r}, this run {name}={value!r}"
    with pytest.raises(BatchOrderError, match=re.escape(changed)):
        run_batch(batches, SECOND, str(database), None, Settings(**{name: value}))
    assert _index(database) == index


# --- decisions -------------------------------------------------------------------------------------


def test_a_batch_that_joins_two_kept_documents_records_a_bridge_and_keeps_both(tmp_path):
    a, b, c = (pa.array([page["body"]]) for page in _bridge_pages())
    assert exact_jaccard(a, b)[0] >= 0.7 and exact_jaccard(b, c)[0] >= 0.7 and exact_jaccard(a, c)[0] < 0.7
    batches, settings = _bridge_batches(tmp_path / "batches")
    database, output = tmp_path / "index.duckdb", tmp_path / "out"
    _add_batches(batches, database, output, settings)

    first = _csv_rows(output / "batches" / FIRST / "clusters.csv")
    assert {row["doc_id"]: row["decision"] for row in first} == {
        "page-a": "kept_representative", "page-c": "kept_representative"
    }
    [page_b] = _csv_rows(output / "batches" / SECOND / "clusters.csv")
    assert (page_b["doc_id"], page_b["decision"], page_b["cluster_id"], page_b["cluster_size"]) == (
        "page-b", "removed_duplicate", "cluster-page-a", "3"
    )
    assert (page_b["representative_doc_id"], page_b["representative_batch"]) == ("page-c", FIRST)
    assert _csv_rows(output / "batches" / SECOND / "bridges.csv") == [
        {
            "cluster_id": "cluster-page-a",
            "kept_doc_id": "page-c",
            "kept_batch": FIRST,
            "other_kept_doc_id": "page-a",
            "other_kept_batch": FIRST,
            "via_doc_ids": "page-b",
        }
    ]
    # the earlier decisions stand, and the earlier documents are in B's cluster now
    assert _query(database, "select doc_id, decision from incremental.clusters order by doc_id") == [
        ("page-a", "kept_representative"), ("page-b", "removed_duplicate"), ("page-c", "kept_representative")
    ]
    assert _query(database, "select distinct cluster_id from incremental.members") == [("cluster-page-a",)]
    run_library(str(batches.folder), str(database), None, settings)
    assert _differences(database) == []


def test_a_document_kept_in_an_earlier_batch_stays_kept_against_a_newer_near_duplicate(tmp_path):
    text = " ".join(_words("w", 100))
    # newer and longer: the one-shot rule keeps it
    newer = document("new", text + " updated today", crawled_at="2026-06-01")
    batches = _batch_files(tmp_path / "batches", [[document("old", text, crawled_at="2026-01-01")], [newer]])
    database, output = tmp_path / "index.duckdb", tmp_path / "out"
    _add_batches(batches, database, output)

    [new] = _csv_rows(output / "batches" / SECOND / "clusters.csv")
    assert (new["doc_id"], new["decision"], new["representative_doc_id"], new["representative_batch"]) == (
        "new", "removed_duplicate", "old", FIRST
    )
    assert _query(database, "select decision from incremental.clusters where doc_id = 'old'") == [
        ("kept_representative",)
    ]
    run_library(str(batches.folder), str(database), None)
    one_shot = _query(database, "select doc_id, decision from dedup.clusters order by doc_id")
    assert one_shot == [("new", "kept_representative"), ("old", "removed_duplicate")]


def test_undated_copies_are_ranked_after_a_dated_one_as_one_run_ranks_them(tmp_path):
    """A null crawled_at goes after every date in a batch's decisions, as in the one-shot keep
    rule, although the undated copy has the smaller doc_id."""
    text = " ".join(_words("w", 100))
    batches = _batch_files(
        tmp_path / "batches",
        [[document("a-undated", text, crawled_at=""), document("z-dated", text)], [document("b-undated", text, crawled_at="")]],
    )
    database = tmp_path / "index.duckdb"
    _add_batches(batches, database)
    run_library(str(batches.folder), str(database), None)
    assert _differences(database) == []
    ranks = "select doc_id, representative_doc_id, representative_rank from {} order by doc_id"
    one_shot = [("a-undated", "z-dated", 2), ("b-undated", "z-dated", 3), ("z-dated", "z-dated", 1)]
    assert _query(database, ranks.format("dedup.clusters")) == one_shot
    # a later batch's documents rank after the kept ones of earlier batches
    assert _query(database, ranks.format("incremental.clusters")) == [*one_shot[:1], ("b-undated", "z-dated", 2), one_shot[2]]


def test_a_doc_id_of_an_earlier_batch_is_rejected_naming_that_batch(tmp_path):
    batches = _batch_files(
        tmp_path / "batches",
        [
            [document("shared-id", "the first page with this id")],
            [document("shared-id", "another page under the same id"), document("fresh", "a page of its own")],
        ],
    )
    database, output = tmp_path / "index.duckdb", tmp_path / "out"
    added = _add_batches(batches, database, output)

    assert _csv_rows(output / "batches" / SECOND / "rejected_documents.csv") == [
        {
            "source_file": str(batches.batch(SECOND).path),
            "input_row": "1",
            "doc_id": "shared-id",
            "reason": "duplicate_doc_id",
            "detail": f"doc_id first seen in batch {FIRST} ({batches.batch(FIRST).path} row 1)",
        }
    ]
    assert [row["doc_id"] for row in _csv_rows(output / "batches" / SECOND / "clusters.csv")] == ["fresh"]
    assert (added[1]["counts"]["document_rows"], added[1]["counts"]["rejected_document_rows"]) == (1, 1)
    # the index keeps the first document with the id: its body is in batch 1's payload file
    (payload,) = Path(f"{database}.payloads").glob(f"{FIRST}.*.arrow")
    kept = pa.ipc.open_file(pa.memory_map(str(payload))).read_all().to_pylist()
    assert [row["body"] for row in kept if row["doc_id"] == "shared-id"] == ["the first page with this id"]
    assert _query(database, "select count(*) from incremental.documents where doc_id = 'shared-id'") == [(1,)]


def test_with_fail_on_reject_a_doc_id_of_an_earlier_batch_fails_the_batch_as_one_run_would(tmp_path):
    strict = Settings(fail_on_reject=True)
    first, again = document("shared-id", "the first page"), document("shared-id", "another page")
    batches = _batch_files(tmp_path / "batches", [[first], [again]])
    with pytest.raises(InputError, match="repeats 'shared-id'"):
        run_library(str(batches.folder), str(tmp_path / "one_shot.duckdb"), None, strict)
    database = tmp_path / "index.duckdb"
    run_batch(batches, FIRST, str(database), None, strict)
    index = _index(database)

    with pytest.raises(InputError, match="shared-id"):
        run_batch(batches, SECOND, str(database), None, strict)
    assert _index(database) == index


# --- unreadable batches --------------------------------------------------------------------------

WITHOUT_BODY = b"doc_id,source,domain,crawled_at,title\nlate,crawl,late.example,2026-11-02,Late\n"


@pytest.mark.parametrize(
    "name, content, replaced",
    [
        (f"{SECOND}.csv", WITHOUT_BODY, False),
        (f"{SECOND}.parquet", b"not a parquet file \x00\xff" * 20, False),
        # the batch is in the index already: adding it again would replace it
        (f"{SECOND}.csv", WITHOUT_BODY, True),
    ],
    ids=["csv-without-body", "garbage-parquet", "latest-batch-replaced"],
)
def test_an_unreadable_batch_fails_naming_its_file_and_changes_no_index_row_or_release(
    tmp_path, name, content, replaced
):
    rows = _csv_rows(FIXTURE)
    batches = _batch_files(tmp_path / "batches", [rows[:12], rows[12:]] if replaced else [rows[:12]])
    database, output = tmp_path / "index.duckdb", tmp_path / "out"
    _add_batches(batches, database, output)
    releases, index = _releases(output), _index(database)
    (batches.folder / name).write_bytes(content)

    with pytest.raises(InputError, match=re.escape(str(batches.folder / name))):
        run_batch(find_batches(batches.folder), SECOND, str(database), str(output))
    assert _index(database) == index
    assert _releases(output) == releases


# --- batch keys and the release folder -----------------------------------------------------------


def test_batch_keys_drop_format_extensions_and_sort_by_key_not_by_file_name(tmp_path):
    for name in (
        "2026-11-29.warc.gz", "x.jsonl.gz", "y.json.gz", "b.parquet", "b-1.csv", "Upper.CSV",
        "a.csv", "a.jsonl", ".hidden.csv", "notes.txt",
    ):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "sub.d").mkdir()
    (tmp_path / "sub.d" / "part.csv").write_bytes(b"")

    batches = find_batches(tmp_path)
    # the file b-1.csv sorts before b.parquet, the key b before b-1
    assert batches.keys() == ["2026-11-29", "Upper", "b", "b-1", "sub.d", "x", "y"]
    assert batches.batch("x").path == tmp_path / "x.jsonl.gz"
    assert batches.batch("sub.d").path == tmp_path / "sub.d"
    assert batches.ignored == (".hidden.csv", "notes.txt")
    assert batches.collisions == {"a": ("a.csv", "a.jsonl")}
    with pytest.raises(BatchError, match="a.csv and a.jsonl"):
        batches.batch("a")
    # a colliding key is still an earlier batch, to be added (once it names one file) first
    assert batches.earlier("b") == ["2026-11-29", "Upper", "a"]


def test_a_one_shot_release_replacing_the_output_folder_keeps_the_batch_releases(tmp_path):
    batches, _ = _fixture_in_three_batches(tmp_path / "batches")
    database, output = tmp_path / "index.duckdb", tmp_path / "out"
    run_batch(batches, FIRST, str(database), str(output))
    releases = _releases(output)

    for _ in range(2):  # the first finds only the batches folder, the second a release around it
        run_library(str(FIXTURE), str(database), str(output))
        assert _releases(output) == releases
        assert verify_release(output) == []
        assert verify_release(output / "batches" / FIRST) == []


def test_a_staged_batch_is_added_only_to_the_index_it_was_staged_against(tmp_path):
    batches, _ = _fixture_in_three_batches(tmp_path / "batches")
    database = tmp_path / "index.duckdb"
    _add_batches(batches, database)
    last = batches.keys()[-1]
    with duckdb.connect(str(database)) as connection:
        # the staging tables still hold the last batch, staged when the earlier two were indexed
        forget_batches(connection, INDEX, batches.keys()[0])
        with pytest.raises(BatchOrderError, match=f"The batches before {last} in the index changed since"):
            add_batch(connection, INDEX, last)
        assert indexed_batches(connection, INDEX) == []


def test_staging_tables_of_two_different_runs_are_never_added_together(tmp_path):
    batches, _ = _fixture_in_three_batches(tmp_path / "batches")
    database = tmp_path / "index.duckdb"
    _add_batches(batches, database)
    last = batches.keys()[-1]
    with duckdb.connect(str(database)) as connection:
        lineage = read_lineage(connection, INDEX.staged_documents)
        # as if batch_documents had been run again on a changed file, and nothing after it
        write_lineage(connection, INDEX.staged_documents, {**lineage, "input_sha256": "0" * 64})
        with pytest.raises(BatchOrderError, match=f"The staging tables of batch {last} come from different runs"):
            add_batch(connection, INDEX, last)


def test_a_batch_added_again_from_a_changed_file_gets_a_payload_file_of_its_own(tmp_path):
    batches, _ = _fixture_in_three_batches(tmp_path / "batches")
    database = tmp_path / "index.duckdb"
    _add_batches(batches, database)
    last = batches.batch(batches.keys()[-1])
    (before,) = payload_folder(str(database)).glob(f"{last.key}.*.arrow")
    rows = _csv_rows(last.path)
    rows[0]["body"] += " and one more sentence at the end"
    write_csv(last.path, rows)
    run_batch(batches, last.key, str(database), None)
    (after,) = payload_folder(str(database)).glob(f"{last.key}.*.arrow")
    # a new name, so the file the index named until the commit was never overwritten
    assert after.name != before.name
    assert _query(database, f"select payload_file from incremental.batches where batch_key = '{last.key}'") == [
        (after.name,)
    ]


def test_an_index_from_before_bands_were_recorded_is_compared_by_the_bands_it_used():
    from dedup_assets.core.incremental.batch_order import index_settings, settings_problems
    from dedup_assets.core.incremental.index_tables import IndexedBatch

    old = {k: v for k, v in index_settings(Settings()).items() if k not in ("bands", "rows_in_use", "auto_bands", "false_negative_weight")}
    indexed = [IndexedBatch("2026-01-01", 1, 0, 10, "sha", "payload", old)]
    assert settings_problems(indexed, index_settings(Settings())) == []
    chosen = index_settings(Settings(auto_bands=True, false_negative_weight=0.9))
    changed = {name: (built, now) for name, built, now in settings_problems(indexed, chosen)}
    assert changed["auto_bands"] == (False, True) and changed["bands"] == (8, chosen["bands"])
