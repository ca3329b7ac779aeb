"""Issue 52: every fingerprint table and index records the sketch scheme that built it (the
versions of its hash and its text rule among it), and a batch or table of another scheme is
refused, in one line naming both, with the command that re-fingerprints the index."""

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from dedup_assets.core.sketch import scheme as scheme_module
from dedup_assets.core.incremental.batch_order import BatchOrderError, index_settings
from dedup_assets.core.pipeline.library import run_batch
from dedup_assets.core.settings.model import Settings
from dedup_assets.core.sketch.scheme import project_version, sketch_scheme
from dedup_assets.stored_tables.lineage import StaleUpstream, combined_lineage

from .test_incremental import FIRST, SECOND, THIRD, _fixture_in_three_batches, _index, _indexed_keys
from .test_lineage import CURRENT, LAYOUT

DEDUP = Path(sys.executable).parent / "dedup"  # the console script `dedup`, as a user runs it


def test_the_scheme_names_the_sketch_the_versioned_hash_and_text_rule_and_the_settings():
    assert Settings().derived()["sketch_scheme"] == {
        "sketch": "fss", "shingle_hash": "seq64-mix64-v1", "normalization": "text-v1",
        "shingle_unit": "word", "shingle_size": 5, "permutations": 64, "seed": 42, "bands": 8, "rows": 8,
        "dedup_version": project_version(),
    }
    published = Settings(hash_scheme="blake2b", num_perm=128, rows_per_band=4).derived()["sketch_scheme"]
    assert (published["sketch"], published["shingle_hash"]) == ("minhash", "blake2b-v1")
    assert (published["permutations"], published["bands"], published["rows"]) == (128, 32, 4)


def _recorded_schemes(database: Path) -> list[dict]:
    with duckdb.connect(str(database), read_only=True) as connection:
        rows = connection.execute("select settings from incremental.batches order by batch_key").fetchall()
    return [json.loads(settings)["sketch_scheme"] for (settings,) in rows]


def test_a_batch_of_another_scheme_is_refused_in_one_line_and_the_command_it_gives_rebuilds_the_index(tmp_path, monkeypatch):
    batches, _ = _fixture_in_three_batches(tmp_path / "batches")
    database = tmp_path / "index.duckdb"
    for key in (FIRST, SECOND):
        run_batch(batches, key, str(database), None)
    assert _recorded_schemes(database) == [index_settings(Settings())["sketch_scheme"]] * 2
    index = _index(database)

    # another version of dedup-assets: the same settings, another text rule
    monkeypatch.setattr(scheme_module, "NORMALIZATION", "text-v2")
    with pytest.raises(BatchOrderError) as refused:
        run_batch(batches, THIRD, str(database), None)
    command = f"dedup forget-batches {FIRST}"
    assert str(refused.value) == (
        f"Cannot add batch {THIRD}: the index was fingerprinted with another sketch scheme "
        "(normalization text-v1 (index) vs text-v2 (this version)), whose fingerprints cannot be "
        "compared with this version's. Re-fingerprint the index: "
        f"`{command}` takes every batch out, then add them again in key order, starting with: "
        "dagster asset materialize -m dedup_assets.definitions --select 'group:incremental' "
        f"--partition {FIRST}"
    )
    assert "\n" not in str(refused.value)
    assert _index(database) == index  # refused before anything was staged or added

    # the command, run as the message shows it (DEDUP_DATABASE names the index, as in the run)
    forgotten = subprocess.run(
        [str(DEDUP), *command.split()[1:]], env={**os.environ, "DEDUP_DATABASE": str(database)},
        capture_output=True, text=True, check=True,
    )
    assert f"took 2 batch(es) out of the incremental index: {FIRST}, {SECOND}" in forgotten.stdout
    assert _indexed_keys(database) == []
    # then the batches again in key order, the steps the partition's materialization runs, and the
    # refused batch is accepted
    for key in (FIRST, SECOND, THIRD):
        run_batch(batches, key, str(database), None)
    assert _indexed_keys(database) == [FIRST, SECOND, THIRD]
    assert {scheme["normalization"] for scheme in _recorded_schemes(database)} == {"text-v2"}


def test_a_new_shingle_hash_is_refused_and_another_setting_is_named_as_that_setting(tmp_path, monkeypatch):
    batches, _ = _fixture_in_three_batches(tmp_path / "batches")
    database = tmp_path / "index.duckdb"
    run_batch(batches, FIRST, str(database), None)
    monkeypatch.setattr(scheme_module, "FSS_SHINGLE_HASH", "cheap64-v2")
    with pytest.raises(BatchOrderError, match=r"\(shingle_hash seq64-mix64-v1 \(index\) vs cheap64-v2 \(this version\)\)"):
        run_batch(batches, SECOND, str(database), None)
    # a setting of the scheme is refused as that setting, with the index's value to run with
    with pytest.raises(BatchOrderError, match=r"the index has num_perm=64, this run num_perm=128\)") as refused:
        run_batch(batches, SECOND, str(database), None, Settings(num_perm=128))
    assert refused.value.fix == {"num_perm": 64}


def test_a_release_that_changes_no_fingerprint_goes_on_using_the_index(tmp_path, monkeypatch):
    batches, _ = _fixture_in_three_batches(tmp_path / "batches")
    database = tmp_path / "index.duckdb"
    run_batch(batches, FIRST, str(database), None)
    monkeypatch.setattr(scheme_module, "project_version", lambda: "99.0.0")
    run_batch(batches, SECOND, str(database), None)
    assert _indexed_keys(database) == [FIRST, SECOND]
    # each batch records the release that added it
    assert [scheme["dedup_version"] for scheme in _recorded_schemes(database)] == [project_version(), "99.0.0"]


def test_fingerprints_of_another_scheme_are_rebuilt_not_mixed(monkeypatch):
    documents = {**LAYOUT, "input_path": "/in.csv", "input_sha256": "abc"}
    fingerprinted = combined_lineage("fingerprinted", CURRENT, {"documents": documents})
    assert fingerprinted["sketch_scheme"] == sketch_scheme(CURRENT)

    monkeypatch.setattr(scheme_module, "NORMALIZATION", "text-v2")
    now = {**CURRENT, "sketch_scheme": sketch_scheme(CURRENT)}
    with pytest.raises(StaleUpstream) as raised:
        combined_lineage("candidate_pairs", now, {"fingerprinted": fingerprinted})
    assert str(raised.value) == (
        "Cannot build candidate_pairs from tables made with other settings: fingerprinted was "
        "fingerprinted with another sketch scheme (normalization text-v1 (fingerprinted) vs text-v2 "
        "(this version)). Re-materialize fingerprinted and everything downstream of it."
    )
    assert raised.value.select == "fingerprinted*"

    # the project's version alone differing rebuilds nothing, and the tables keep the one that built them
    later = {**CURRENT, "sketch_scheme": {**fingerprinted["sketch_scheme"], "dedup_version": "99.0.0"}}
    pairs = combined_lineage("scored_pairs", later, {"fingerprinted": fingerprinted})
    assert pairs["sketch_scheme"]["dedup_version"] == project_version()


def test_an_index_from_before_the_scheme_was_recorded_counts_as_built_with_the_first_versions(monkeypatch):
    from dedup_assets.core.incremental.batch_order import settings_problems
    from dedup_assets.core.incremental.index_tables import IndexedBatch

    old = {name: value for name, value in index_settings(Settings()).items() if name != "sketch_scheme"}
    indexed = [IndexedBatch("2026-01-01", 1, 0, 10, "sha", "payload", old)]
    assert settings_problems(indexed, index_settings(Settings())) == []
    monkeypatch.setattr(scheme_module, "NORMALIZATION", "text-v2")
    [(name, built, now)] = settings_problems(indexed, index_settings(Settings()))
    assert (name, built["normalization"], now["normalization"]) == ("sketch_scheme", "text-v1", "text-v2")
