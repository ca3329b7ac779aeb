"""A healthy run with a user's own data says only true things: files of an input folder that no
reader reads are named once (in the log and the manifest), no WARC figures for input that has no
WARC files, and a comparison check with nothing to compare passes saying so, with no line about
a contract the user never wrote and no Dagster remark on a result not recorded."""

from __future__ import annotations

import shutil

from dagster import DagsterInstance

from .conftest import FIXTURE, GraphRunner


def test_a_folder_with_a_readme_and_no_contract_says_only_true_lines(tmp_path):
    folder = tmp_path / "pages"
    folder.mkdir()
    shutil.copy(FIXTURE, folder / "pages.csv")  # its contract stays behind: the user's data has none
    for name in ("readme.txt", "notes.txt", "about.md", "LICENSE"):
        (folder / name).write_text("not pages\n", encoding="utf-8")
    runner = GraphRunner(tmp_path)
    with DagsterInstance.ephemeral() as instance:
        result = runner.run(folder, instance=instance)
        assert result.success
        # the steps' own lines and Dagster's remarks, not its events
        logged = [entry.user_message for entry in instance.all_logs(result.run_id) if entry.dagster_event is None]
    manifest = runner.manifest()

    skipped = [line for line in logged if "skipped" in line]
    assert skipped == [
        "documents: skipped 4 files that are not CSV, Parquet, JSONL or WARC: 2 .txt, 1 (no extension), 1 .md "
        "(LICENSE, about.md, notes.txt, …)"
    ]
    assert manifest["input"]["skipped_files"] == ["LICENSE", "about.md", "notes.txt", "readme.txt"]

    assert manifest["counts"]["duplicate_pair_rows"] > 0
    assert not {"within_warc_duplicate_pair_rows", "cross_warc_duplicate_pair_rows"} & set(manifest["counts"])

    checks = {evaluation.check_name: evaluation for evaluation in result.get_asset_check_evaluations()}
    contract = checks["fixture_contract"]
    assert contract.passed and contract.metadata["compared"].value is False
    assert contract.description == f"not compared: no contract for this input ({folder}.expected.json does not exist)"
    same = checks["same_as_incremental"]
    assert same.passed and same.description == "not compared: the incremental index holds no batch"
    assert not [line for line in logged if "fixture_contract" in line or "same_as_incremental" in line]
    assert not [line for line in logged if "did not yield" in line]


def test_a_folder_of_input_files_only_skips_nothing(tmp_path):
    folder = tmp_path / "pages"
    folder.mkdir()
    shutil.copy(FIXTURE, folder / "pages.csv")
    runner = GraphRunner(tmp_path)
    assert runner.run(folder, selection=["documents", "rejected_documents"]).success
    assert "input_skipped_files" not in runner.lineage("documents")
