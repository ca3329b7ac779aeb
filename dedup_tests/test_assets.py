"""The asset graph through dagster.materialize on a real DuckDB file under tmp_path."""

from __future__ import annotations

import json

import duckdb
import pandas as pd
import pytest
from dagster import Failure

from dedup_assets.core.audit.contract import load_contract
from dedup_assets.core.lsh.candidates import bucket_pressure
from dedup_assets.core.sketch.minhash import minhash_signature
from dedup_assets.core.read import read_documents
from dedup_assets.core.pipeline.step_params import HASH_SCHEMES
from dedup_assets.core.storage.tables import Tables
from dedup_assets.core.text.normalize import Shingling, document_shingles

from .conftest import FIXTURE, HARD_FIXTURE, document, fixture_with_a_wrong_contract, sha256_of_files, write_csv

ALL_CHECKS = {
    "doc_id_unique",
    "input_records_accounted",
    "candidate_pairs_ordered_and_unique",
    "duplicate_pairs_ordered_and_unique",
    "duplicate_edges_meet_threshold",
    "every_document_in_one_cluster",
    "one_representative_per_cluster",
    "largest_cluster_within_max_cluster_size",
    "no_chained_members",
    "removals_meet_threshold",
    "representatives_account_for_input",
    "fixture_contract",
    "same_as_incremental",  # passes saying nothing was compared: the fixture has no batches
    "recall_reaches_min_recall",
    "engine_matches_duckdb",
}


def _check_results(result) -> dict:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def _materialized(result) -> set[str]:
    return {e.asset_key.path[-1] for e in result.get_asset_materialization_events()}


@pytest.mark.parametrize("scheme", HASH_SCHEMES)
@pytest.mark.parametrize("fixture", [FIXTURE, HARD_FIXTURE], ids=["default", "hard"])
def test_fixture_contract_holds_under_every_scheme(runner, fixture, scheme):
    result = runner.run(fixture, hash_scheme=scheme)
    assert result.success
    evaluations = _check_results(result)
    assert set(evaluations) == ALL_CHECKS
    # the audit finds every true pair, so the published 8 x 8 bands are not warned about; the hard
    # fixture's transitive chain removes a document below the threshold with the kept one
    warned = {"no_chained_members"} if fixture == HARD_FIXTURE else set()
    assert {name for name, e in evaluations.items() if not e.passed} == warned, {
        name: e.description for name, e in evaluations.items() if not e.passed
    }
    assert all(evaluations[name].severity.value == "WARN" for name in warned)
    assert evaluations["fixture_contract"].metadata["contract"].value.endswith(".expected.json")
    contract = load_contract(fixture)
    manifest = runner.manifest()
    for name, expected in contract["counts"].items():
        assert manifest["counts"][name] == pytest.approx(expected, abs=5e-5), name
    assert runner.table("manifest").set_index("metric")["value"]["document_rows"] == contract["counts"]["document_rows"]
    clusters = pd.read_csv(runner.output_dir / "clusters.csv")
    assert list(clusters.columns[:3]) == ["doc_id", "source_file", "input_row"]
    assert set(clusters["source_file"]) == {str(fixture)}


def test_default_fixture_metadata_shows_the_reduction(runner):
    result = runner.run(FIXTURE)
    metadata = {
        e.asset_key.path[-1]: e.materialization.metadata
        for e in result.get_asset_materialization_events()
    }
    candidates = metadata["candidate_pairs"]
    assert candidates["pair_reduction"].value == "276 → 18, 93.48% fewer"
    assert candidates["lsh_probability_at_threshold"].value == 0.3781
    # band-level slots as the published use case's join makes them: every two documents that
    # share a bucket, counted here from the band rows; fewer once exact copies are grouped
    with duckdb.connect(str(runner.database), read_only=True) as connection:
        (every_two,) = connection.execute(
            "select sum(n * (n - 1) // 2) from (select count(*) as n from dedup.band_memberships group by band_index, lsh_band)"
        ).fetchone()
    assert candidates["candidate_pair_slots"].value == every_two == 106
    assert 18 <= candidates["grouped_pair_slots"].value < every_two
    assert metadata["deduped_documents"]["dagster/row_count"].value == 12
    assert metadata["clusters"]["duplicate_clusters"].value == 6
    assert "| cluster-billing-canonical" in metadata["clusters"]["preview"].value


def test_release_reports_the_bucket_figures_the_join_was_admitted_with(runner):
    def summary() -> dict:
        frame = pd.read_csv(runner.output_dir / "candidate_summary.csv")
        return frame[["grouped_candidate_pair_slots", "largest_bucket_size"]].iloc[0].to_dict()

    result = runner.run(FIXTURE, rows_per_band=2)  # 2-row bands: many more shared buckets
    admitted = {
        e.asset_key.path[-1]: e.materialization.metadata for e in result.get_asset_materialization_events()
    }["candidate_pairs"]
    with duckdb.connect(str(runner.database)) as connection:
        direct = bucket_pressure(connection, Tables.in_schema("dedup"))
    assert direct.pair_slots > 18 and direct.largest_bucket_size == 2  # mirrors fold into their page
    expected = {"grouped_candidate_pair_slots": direct.pair_slots, "largest_bucket_size": direct.largest_bucket_size}
    assert admitted["grouped_pair_slots"].value == direct.pair_slots
    assert runner.lineage("candidate_pairs")["lsh_pair_slots"] == direct.pair_slots
    assert summary() == expected

    def rewrite_lineage(change) -> None:
        with duckdb.connect(str(runner.database)) as connection:
            for table, lineage in connection.execute("select * from dedup.asset_lineage").fetchall():
                connection.execute(
                    "update dedup.asset_lineage set lineage = ? where table_name = ?",
                    [json.dumps(change(json.loads(lineage)), sort_keys=True), table],
                )

    # the manifest reports the recorded figures: a marked one comes through
    rewrite_lineage(lambda lineage: {**lineage, "lsh_pair_slots": 424242} if "lsh_pair_slots" in lineage else lineage)
    assert runner.run(FIXTURE, selection="manifest", rows_per_band=2).success
    assert summary() == {**expected, "grouped_candidate_pair_slots": 424242}

    # tables whose lineage predates the figures: the manifest sizes the buckets itself
    rewrite_lineage(lambda lineage: {key: value for key, value in lineage.items() if not key.startswith("lsh_")})
    assert runner.run(FIXTURE, selection="manifest", rows_per_band=2).success
    assert summary() == expected


def test_contract_mismatch_fails_the_check(runner, tmp_path):
    result = runner.run(fixture_with_a_wrong_contract(tmp_path), raise_on_error=False)
    check = _check_results(result)["fixture_contract"]
    assert not check.passed and "cluster_count: expected 13, got 12" in check.description


def test_blake2b_signatures_are_stored_exactly_as_uint64(runner):
    runner.run(FIXTURE, hash_scheme="blake2b")
    with duckdb.connect(str(runner.database), read_only=True) as connection:
        column_type = connection.execute(
            "select data_type from information_schema.columns "
            "where table_name = 'fingerprinted' and column_name = 'signature'"
        ).fetchall()[0][0]
        stored = dict(connection.execute("select doc_id, signature from dedup.fingerprinted").fetchall())
    assert column_type == "UBIGINT[64]"
    bodies = dict(zip(*read_documents(FIXTURE).select(["doc_id", "body"]).to_pydict().values()))
    for doc_id in ("billing-canonical", "note-parking"):
        expected = minhash_signature(document_shingles(bodies[doc_id], Shingling(5)), 64, 42)
        assert list(stored[doc_id]) == [int(v) for v in expected]
    # values above 2**53 would not survive a float round trip
    assert max(v for signature in stored.values() for v in signature) > 2**53


def test_threshold_change_rematerializes_downstream_without_fingerprinting(runner):
    runner.run(FIXTURE)
    fingerprints_before = runner.table("fingerprinted")
    result = runner.run(FIXTURE, selection="scored_pairs*", jaccard_threshold=0.95)
    assert result.success
    assert _materialized(result) == {
        "scored_pairs", "duplicate_pairs", "reference_matches", "clusters", "boilerplate", "template_clusters",
        "deduped_documents", "manifest",
        "recall_audit",
        "evaluation",
    }
    assert runner.table("fingerprinted").equals(fingerprints_before)
    assert runner.table("asset_lineage").set_index("table_name").loc["clusters", "lineage"].count("0.95") == 1
    counts = runner.manifest()["counts"]
    assert counts["duplicate_pair_rows"] == 6  # only the byte-identical mirrors reach 0.95
    assert runner.manifest()["settings"]["jaccard_threshold"] == 0.95
    # compared with nothing (the contract is for 0.7): it passes, saying so
    contract = _check_results(result)["fixture_contract"]
    assert contract.description.startswith("not compared: contract ") and "jaccard_threshold=0.95" in contract.description
    assert contract.metadata["compared"].value is False


def test_stale_upstream_settings_are_refused_with_the_fix(runner):
    runner.run(FIXTURE)
    with pytest.raises(Failure) as raised:
        runner.run(FIXTURE, selection="deduped_documents", jaccard_threshold=0.9)
    message = str(raised.value.description)
    assert "clusters was built with jaccard_threshold=0.7, this run uses jaccard_threshold=0.9" in message
    assert message.endswith("Materialize scored_pairs* with the same run config.")  # written for Python


def test_missing_upstream_table_names_the_command(runner):
    with pytest.raises(Failure) as raised:
        runner.run(FIXTURE, selection="deduped_documents")
    assert "asset 'documents' has not been materialized" in raised.value.description
    assert raised.value.description.endswith("Materialize *deduped_documents with the same run config.")


def test_corpus_without_duplicates_gives_typed_empty_tables(runner, tmp_path):
    path = write_csv(
        tmp_path / "unique.csv",
        [document("a", "alpha beta gamma delta epsilon zeta"), document("b", "one two three four five six"), document("c", "")],
    )
    assert runner.run(path).success
    for name in ("candidate_pairs", "scored_pairs", "duplicate_pairs"):
        table = runner.table(name)
        assert table.empty and {"left_doc_id", "right_doc_id"} <= set(table.columns)
    assert runner.manifest()["counts"]["cluster_count"] == 3


def test_schema_follows_the_frame_when_a_table_changes_shape(runner, tmp_path):
    narrow = write_csv(tmp_path / "narrow.csv", [document("a", "some text here")])
    wide = write_csv(tmp_path / "wide.csv", [document("a", "some text here", warc_record_id="<urn:1>")])
    runner.run(narrow)
    runner.run(wide)
    assert runner.table("deduped_documents").loc[0, "warc_record_id"] == "<urn:1>"


def test_pair_budget_stops_before_the_join(runner, tmp_path):
    # pages that differ in one word after a shared footer (exact copies would be folded into one)
    footer = (
        "the same boilerplate footer text on every page of this site with links to home about "
        "contact careers press privacy terms and a newsletter sign up form"
    )
    words = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")
    rows = [document(f"d{i}", f"{footer} {word}", domain=f"s{i}.com") for i, word in enumerate(words)]
    path = write_csv(tmp_path / "hot.csv", rows)
    with pytest.raises(Failure) as raised:
        runner.run(path, max_pair_slots=10)
    assert "above max_pair_slots=10." in raised.value.description
    assert "with 5 different texts" in raised.value.description


def test_bad_rows_are_rejected_and_accounted_for(runner, tmp_path):
    path = write_csv(
        tmp_path / "mixed.csv",
        [document("a", "alpha beta gamma"), document("a", "repeat"), document("b", "x", crawled_at="soon")],
    )
    result = runner.run(path)
    assert result.success
    assert _check_results(result)["input_records_accounted"].description == "3 input rows = 1 document + 2 rejected"
    rejected = runner.table("rejected_documents")
    assert rejected[["input_row", "doc_id", "reason"]].values.tolist() == [
        [2, "a", "duplicate_doc_id"],
        [3, "b", "invalid_crawled_at"],
    ]
    manifest = runner.manifest()
    assert (manifest["counts"]["input_record_rows"], manifest["counts"]["rejected_document_rows"]) == (3, 2)
    assert manifest["rejected_by_reason"] == {"duplicate_doc_id": 1, "invalid_crawled_at": 1}
    assert (runner.output_dir / "rejected_documents.csv").read_text().count("\n") == 3


def test_strict_mode_fails_the_run_with_the_row(runner, tmp_path):
    path = write_csv(tmp_path / "dup.csv", [document("a", "x"), document("a", "y")])
    with pytest.raises(Failure) as raised:
        runner.run(path, fail_on_reject=True)
    assert f"{path}: row 2: column doc_id repeats 'a' (doc_id first seen at row 1). Give each document a unique doc_id." in raised.value.description
    # The run held the database open; a failed run lets it go too, so a connection with another
    # configuration (refused while the file is open in this process) works. Nothing half-written.
    with duckdb.connect(str(runner.database), read_only=True) as connection:
        tables = "select count(*) from information_schema.tables where table_name = 'documents'"
        assert connection.execute(tables).fetchall() == [(0,)]


@pytest.mark.parametrize("cluster_mode", ["components", "star"])
def test_same_input_gives_byte_identical_release_files(tmp_path, cluster_mode):
    from .conftest import GraphRunner

    first, second = GraphRunner(tmp_path / "one"), GraphRunner(tmp_path / "two")
    first.run(HARD_FIXTURE, cluster_mode=cluster_mode)
    second.run(HARD_FIXTURE, cluster_mode=cluster_mode)
    files = sha256_of_files(first.output_dir)
    assert len(files) == 23 and "deduped_documents/part-00000.parquet" in files
    assert files == sha256_of_files(second.output_dir)
    assert {output["file"]: output["sha256"] for output in first.manifest()["outputs"]} == {
        name: sha256 for name, sha256 in files.items() if name != "manifest.json"
    }
    for table in ("documents", "fingerprinted", "scored_pairs", "clusters", "deduped_documents"):
        assert first.table(table).equals(second.table(table)), table


def test_a_folder_of_files_runs_with_every_check_passing(runner, tmp_path):
    folder = tmp_path / "crawl"
    folder.mkdir()
    text = "shared paragraph about incident routing and escalation policies for the on call team"
    write_csv(folder / "b.csv", [document("b1", text, crawled_at="2026-01-02"), document("b2", "only in b")])
    write_csv(folder / "a.csv", [document("a1", "only in a"), document("a2", text, crawled_at="2026-01-03")])
    result = runner.run(folder)
    assert result.success
    assert all(e.passed for e in result.get_asset_check_evaluations())
    kept = runner.table("deduped_documents").set_index("doc_id")
    assert sorted(kept.index) == ["a1", "a2", "b2"] and kept.loc["a2", "cluster_size"] == 2


def test_release_parquet_stores_hashes_raw_and_keeps_no_statistics_of_hashes_or_bodies(runner):
    import pyarrow.parquet as pq

    runner.run(FIXTURE)
    metadata = pq.ParquetFile(runner.output_dir / "fingerprinted.parquet").metadata.row_group(0)
    columns = {
        metadata.column(index).path_in_schema.split(".")[0]: metadata.column(index)
        for index in range(metadata.num_columns)
    }
    hashes = ("content_hash", "signature", "lsh_bands")
    assert columns["doc_id"].compression == "ZSTD" and columns["doc_id"].is_stats_set  # the default codec
    assert columns["token_count"].statistics.min > 0
    assert {columns[name].compression for name in hashes} == {"UNCOMPRESSED"}
    assert not any(columns[name].is_stats_set for name in hashes)
    deduped = pq.ParquetFile(runner.output_dir / "deduped_documents" / "part-00000.parquet").metadata.row_group(0)
    assert {deduped.column(index).compression for index in range(deduped.num_columns)} == {"ZSTD"}
    stats = {
        deduped.column(index).path_in_schema: deduped.column(index).is_stats_set
        for index in range(deduped.num_columns)
    }
    assert not stats.pop("body") and all(stats.values())  # page text has none either


def test_every_column_the_ui_shows_says_what_it_holds(runner, tmp_path):
    labels = tmp_path / "labels.csv"
    labels.write_text("left_doc_id,right_doc_id,label\nbilling-canonical,billing-mirror,1\n")
    result = runner.run(FIXTURE, selection="*", labels_path=str(labels))
    undescribed = [
        f"{event.asset_key.path[-1]}.{column.name}"
        for event in result.get_asset_materialization_events()
        if "dagster/column_schema" in event.materialization.metadata  # the tables, not a release
        for column in event.materialization.metadata["dagster/column_schema"].value.columns
        if not column.description
    ]
    shown = [event.asset_key.path[-1] for event in result.get_asset_materialization_events()]
    assert {"documents", "clusters", "recall_audit", "evaluation", "manifest"} <= set(shown)
    assert undescribed == []
