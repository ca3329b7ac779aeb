"""Asset checks are plain SQL functions: each must pass on good tables and fail on broken ones."""

import json
import shlex

import duckdb
import pyarrow as pa
import pytest

from dedup_assets.checks import cluster_rules, rules
from dedup_assets.launch.entry_point import how_to_fix
from dedup_assets.settings_resource import DedupSettings


@pytest.fixture
def connection():
    with duckdb.connect() as connection:
        yield connection


def _load(connection, name: str, rows: list[dict], columns: list[str]) -> str:
    data = pa.Table.from_pylist(rows) if rows else pa.table({c: pa.array([], pa.string()) for c in columns})
    connection.execute(f"create or replace table {name} as select * from data")
    return name


def _pairs(connection, rows, name="pairs"):
    return _load(
        connection,
        name,
        [{"left_doc_id": l, "right_doc_id": r, "jaccard": j} for l, r, j in rows],
        ["left_doc_id", "right_doc_id", "jaccard"],
    )


def test_doc_id_unique(connection):
    assert rules.doc_id_unique(connection, _load(connection, "d", [{"doc_id": "a"}, {"doc_id": "b"}], [])).passed
    failed = rules.doc_id_unique(connection, _load(connection, "d", [{"doc_id": "a"}, {"doc_id": "a"}], []))
    assert not failed.passed and "'a' appears 2 times" in failed.description


def test_pairs_ordered_and_unique(connection):
    assert rules.pairs_ordered_and_unique(connection, _pairs(connection, [("a", "b", 1.0), ("a", "c", 1.0)])).passed
    reversed_pair = rules.pairs_ordered_and_unique(connection, _pairs(connection, [("b", "a", 1.0)]))
    repeated = rules.pairs_ordered_and_unique(connection, _pairs(connection, [("a", "b", 1.0), ("a", "b", 0.9)]))
    assert not reversed_pair.passed and "not left < right" in reversed_pair.description
    assert not repeated.passed and "more than once" in repeated.description


def test_duplicate_edges_meet_threshold(connection):
    assert rules.duplicate_edges_meet_threshold(connection, _pairs(connection, [("a", "b", 0.7)]), 0.7).passed
    weak = rules.duplicate_edges_meet_threshold(connection, _pairs(connection, [("a", "b", 0.69)]), 0.7)
    assert not weak.passed and "0.6900 < 0.7" in weak.description


def _clusters(connection, rows):
    return _load(
        connection,
        "clusters",
        [{"doc_id": d, "cluster_id": c, "decision": k} for d, c, k in rows],
        ["doc_id", "cluster_id", "decision"],
    )


KEPT, REMOVED = "kept_representative", "removed_duplicate"


def test_every_document_in_one_cluster(connection):
    documents = _load(connection, "documents", [{"doc_id": "a"}, {"doc_id": "b"}], [])
    good = _clusters(connection, [("a", "cluster-a", KEPT), ("b", "cluster-a", REMOVED)])
    assert cluster_rules.every_document_in_one_cluster(connection, documents, good).passed
    lost = cluster_rules.every_document_in_one_cluster(connection, documents, _clusters(connection, [("a", "cluster-a", KEPT)]))
    assert not lost.passed and "b is in no cluster" in lost.description
    twice = _clusters(connection, [("a", "cluster-a", KEPT), ("b", "cluster-a", REMOVED), ("b", "cluster-b", KEPT)])
    result = cluster_rules.every_document_in_one_cluster(connection, documents, twice)
    assert not result.passed and "b is in 2 clusters" in result.description


def test_one_representative_per_cluster(connection):
    assert cluster_rules.one_representative_per_cluster(connection, _clusters(connection, [("a", "c1", KEPT), ("b", "c1", REMOVED)])).passed
    none_kept = cluster_rules.one_representative_per_cluster(connection, _clusters(connection, [("a", "c1", REMOVED)]))
    assert not none_kept.passed and "c1 has 0 representatives" in none_kept.description
    two_kept = cluster_rules.one_representative_per_cluster(connection, _clusters(connection, [("a", "c1", KEPT), ("b", "c1", KEPT)]))
    assert not two_kept.passed and "c1 has 2 representatives" in two_kept.description


def test_a_batch_removes_documents_only_for_documents_kept_in_the_batch_they_name(connection):
    earlier = _load(
        connection, "earlier",
        [{"batch_key": "b1", "doc_id": "a", "decision": KEPT}, {"batch_key": "b1", "doc_id": "b", "decision": REMOVED}],
        [],
    )

    def staged(rows):
        return _load(
            connection, "staged",
            [{"doc_id": d, "decision": k, "representative_doc_id": r, "representative_batch": b} for d, k, r, b in rows],
            [],
        )

    good = staged([("c", REMOVED, "a", "b1"), ("d", KEPT, "d", "b2"), ("e", REMOVED, "d", "b2")])
    passed = cluster_rules.removals_name_kept_representatives(connection, good, "b2", earlier)
    assert passed.passed, passed.description
    assert passed.description == "2 removed documents, each for a document kept in the batch it names (1 in earlier batches)"
    # before the first batch is added there is no index: only the batch's own documents count
    first = cluster_rules.removals_name_kept_representatives(connection, good, "b2", None)
    assert not first.passed and first.description == "c is removed for a of batch b1, which batch b1 does not hold"
    wrong = staged([("c", REMOVED, "b", "b1"), ("d", REMOVED, "a", "b2"), ("e", REMOVED, "e", "b2")])
    failed = cluster_rules.removals_name_kept_representatives(connection, wrong, "b2", earlier)
    assert not failed.passed
    assert failed.description == (
        "c is removed for b of batch b1, which is removed_duplicate there; "
        "d is removed for a of batch b2, which batch b2 does not hold; "
        "e is removed for e of batch b2, which is removed_duplicate there"
    )


def test_representatives_account_for_input(connection):
    documents = _load(connection, "documents", [{"doc_id": d} for d in "abc"], [])
    clusters = _clusters(connection, [("a", "c1", KEPT), ("b", "c1", REMOVED), ("c", "c2", KEPT)])
    deduped = _load(connection, "deduped", [{"doc_id": "a"}, {"doc_id": "c"}], [])
    assert cluster_rules.representatives_account_for_input(connection, documents, clusters, deduped).passed
    short = _load(connection, "deduped", [{"doc_id": "a"}], [])
    lost = cluster_rules.representatives_account_for_input(connection, documents, clusters, short)
    assert not lost.passed and "1 representative + 1 removed != 3 input documents" in lost.description
    swapped = _load(connection, "deduped", [{"doc_id": "a"}, {"doc_id": "b"}], [])
    wrong = cluster_rules.representatives_account_for_input(connection, documents, clusters, swapped)
    assert not wrong.passed and "differ between deduped_documents and the representatives" in wrong.description


def test_input_records_accounted(connection):
    documents = _load(connection, "documents", [{"source_file": "f", "input_row": 1}, {"source_file": "f", "input_row": 3}], [])
    rejected = _load(connection, "rejected", [{"source_file": "f", "input_row": 2}, {"source_file": "g", "input_row": 3}], [])
    assert rules.input_records_accounted(connection, 4, documents, rejected).passed
    lost = rules.input_records_accounted(connection, 5, documents, rejected)
    assert not lost.passed and "5 input rows but 2 documents + 2 rejected" in lost.description
    both = _load(connection, "rejected", [{"source_file": "f", "input_row": 3}], [])
    twice = rules.input_records_accounted(connection, 3, documents, both)
    assert not twice.passed and "1 input row is both a document and rejected" in twice.description


def test_a_contract_is_compared_only_when_the_input_ships_one_for_these_settings(tmp_path):
    source = tmp_path / "corpus.csv"
    contract, why = rules.comparable_contract(source, {"num_perm": 64})
    assert contract is None and why == f"no contract for this input ({tmp_path / 'corpus.expected.json'} does not exist)"
    (tmp_path / "corpus.expected.json").write_text('{"settings": {"num_perm": 64}, "counts": {}}')
    contract, where = rules.comparable_contract(source, {"num_perm": 64})
    assert contract == {"settings": {"num_perm": 64}, "counts": {}} and where.endswith("corpus.expected.json")
    contract, why = rules.comparable_contract(source, {"num_perm": 128})
    assert contract is None and why.endswith("is for other settings: num_perm=128 (contract: 64)")


def test_messages_count_one_thing_in_the_singular(connection):
    one = rules.pairs_ordered_and_unique(connection, _pairs(connection, [("a", "b", 1.0)]))
    assert one.description == "1 pair, each ordered left < right and unique"
    edge = rules.duplicate_edges_meet_threshold(connection, _pairs(connection, [("a", "b", 0.8)]), 0.7)
    assert edge.description == "1 edge, none with Jaccard below 0.7"
    connection.execute("create table no_pairs (left_doc_id varchar, right_doc_id varchar, jaccard double)")
    none = rules.duplicate_edges_meet_threshold(connection, "no_pairs", 0.7)
    assert none.description == "0 edges, none with Jaccard below 0.7"


def test_recall_reaches_min_recall_speaks_only_below_it_measured(tmp_path):
    """The measured recall decides: 6 of 6 (the fixture's; its interval reaches down to 0.61)
    passes; 74 of 100 warns with the fix written for the command that was run (dedup run here):
    for one run, with the user's own run config kept, and as the dedup.yaml lines that keep it."""
    dedup = DedupSettings(input_path=str(tmp_path / "pages.csv"), output_dir=str(tmp_path / "out"), fields={"doc_id": "id"})
    argv = ["dedup", "run", "--input", "pages.csv", "--config-json", '{"resources": {"dedup": {"config": {"fields": {"doc_id": "id"}}}}}']

    def fix(changes: dict) -> str:
        return how_to_fix(changes, entry="dedup", argv=argv)

    summary = {"true_pairs": 6, "found_pairs": 6, "recall": 1.0, "ci_low": 0.6097, "ci_high": 1.0}
    passed = rules.recall_reaches_min_recall(summary, dedup.settings(), fix)
    assert passed.passed
    assert passed.description == (
        "recall 1.0 (6 of 6 true pairs; 95% interval 0.6097–1.0) reaches min_recall=0.9, over the near copies "
        "and in every Jaccard band too"
    )
    summary = {"true_pairs": 100, "found_pairs": 74, "recall": 0.74, "ci_low": 0.6474, "ci_high": 0.8159}
    warned = rules.recall_reaches_min_recall(summary, dedup.settings(), fix)
    assert not warned.passed and warned.severity.value == "WARN"
    first, keep, line = warned.description.splitlines()
    assert first.startswith(
        "recall 0.74 (74 of 100 true pairs; 95% interval 0.6474–0.8159) is below min_recall=0.9: LSH's 8 bands "
        'of 8 rows make 38% of the pairs at J = 0.7 candidates. With preset: "web" (20 bands of 6 rows: 92%) it '
        "finds more. For this run only: "
    )
    command = shlex.split(first.split("For this run only: ", 1)[1])
    assert command[1:4] == ["run", "--input", "pages.csv"]
    # the user's own run config kept, the preset added
    config = json.loads(command[command.index("--config-json") + 1])["resources"]["dedup"]["config"]
    assert config == {"fields": {"doc_id": "id"}, "preset": "web"}
    assert (keep, line) == ("To keep it for every run, add to dedup.yaml in the folder you run from:", "  preset: web")
    assert warned.metadata["candidate_chance_at_threshold"].value == 0.3781
    assert warned.metadata["more_recall"].value == {"preset": "web"}


def test_recall_lost_to_skipped_hot_buckets_is_blamed_on_them_not_on_the_bands(tmp_path):
    """Issue 49's short pages sharing a footer: recall 0.0001 with hot_buckets: skip, and the
    warning offered more bands, which cannot find pairs whose bucket was left out."""
    skip = DedupSettings(input_path=str(tmp_path / "pages.csv"), hot_buckets="skip")
    summary = {"true_pairs": 1000, "found_pairs": 10, "recall": 0.01, "ci_low": 0.005, "ci_high": 0.02}
    warned = rules.recall_reaches_min_recall({**summary, "missed_sharing_a_bucket": 985}, skip.settings(), how_to_fix)
    assert not warned.passed
    assert warned.description == (
        "recall 0.01 (10 of 1000 true pairs; 95% interval 0.005–0.02) is below min_recall=0.9: 985 of the 990 missed "
        "pairs shared a bucket that hot_buckets: skip left out of the join (a bucket of more than max_bucket_size=1,000 "
        "texts; they are in hot_buckets.csv): pages that shared text such as boilerplate makes near copies by Jaccard. "
        "More bands do not find those; a larger max_bucket_size joins them, at a cost that grows with the square of "
        "a bucket's texts."
    )
    assert warned.metadata["more_recall"].value == {}
    # where the bands alone miss too many, both are said, and the bands' fix offered
    both = rules.recall_reaches_min_recall({**summary, "missed_sharing_a_bucket": 500}, skip.settings(), how_to_fix)
    assert "500 of the 990 missed pairs shared a bucket" in both.description
    assert "LSH's 8 bands of 8 rows make 38% of the pairs" in both.description
    assert both.metadata["more_recall"].value == {"preset": "web"}
    # with hot_buckets: refuse nothing was skipped: the bands alone are named
    refuse = DedupSettings(input_path=str(tmp_path / "pages.csv"))
    bands = rules.recall_reaches_min_recall({**summary, "missed_sharing_a_bucket": 985}, refuse.settings(), how_to_fix)
    assert "hot_buckets" not in bands.description and "LSH's 8 bands" in bands.description


def test_recall_reaches_min_recall_names_a_band_and_the_near_copies_a_healthy_total_hides(tmp_path):
    """Exact copies, always found, lift the total over min_recall; the near copies and the band of
    light edits fall short, and the warning names each with its figure."""
    dedup = DedupSettings(input_path=str(tmp_path / "pages.csv"), output_dir=str(tmp_path / "out"))

    def figures(found: int, true: int) -> dict:
        return {"true_pairs": true, "found_pairs": found, "recall": round(found / true, 4), "ci_low": 0.5, "ci_high": 1.0}

    summary = {
        **figures(95, 98),
        "near_copies": figures(15, 18),
        "by_jaccard_band": {"[0.7, 0.8)": figures(2, 5), "[0.9, 1.0)": figures(13, 13), "1.0": figures(80, 80)},
    }
    warned = rules.recall_reaches_min_recall(summary, dedup.settings(), how_to_fix)
    assert not warned.passed
    assert warned.description.startswith(
        "near-copy recall 0.8333 (15 of 18 true pairs; 95% interval 0.5–1.0); recall in Jaccard band [0.7, 0.8) "
        "0.4 (2 of 5 true pairs; 95% interval 0.5–1.0) are below min_recall=0.9: "
    )
    assert warned.metadata["below_min_recall"].value == {"near-copy recall": 0.8333, "recall in Jaccard band [0.7, 0.8)": 0.4}
    # at a min_recall the band reaches, nothing falls short
    lenient = DedupSettings(input_path=str(tmp_path / "pages.csv"), min_recall=0.4)
    assert rules.recall_reaches_min_recall(summary, lenient.settings(), how_to_fix).passed
