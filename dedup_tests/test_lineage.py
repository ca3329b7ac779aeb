import shlex
from pathlib import Path

import pytest

from dedup_assets.core.sketch.scheme import sketch_scheme
from dedup_assets.core.storage.tables import TABLE_LAYOUT
from dedup_assets.launch.entry_point import how_to_fix
from dedup_assets.launch.environment import INPUT
from dedup_assets.stored_tables.lineage import StaleUpstream, combined_lineage

LAYOUT = {"table_layout": TABLE_LAYOUT}  # what every table built by this version records
CURRENT = {
    **LAYOUT, "input_path": "/in.csv", "hash_scheme": "fss", "shingle_size": 5, "shingle_unit": "word",
    "num_perm": 64, "minhash_seed": 42, "rows_per_band": 8, "auto_bands": False, "false_negative_weight": 0.5, "bands": 8, "rows_in_use": 8,
    "jaccard_threshold": 0.7, "signature_overlap_threshold": 0.7, "audit_sample_size": 1000, "ignored_passages": [],
    "ignore_shared_above": None,
}
CURRENT["sketch_scheme"] = sketch_scheme(CURRENT)


def test_lineage_accumulates_stage_settings():
    documents = {**LAYOUT, "input_path": "/in.csv", "input_sha256": "abc"}
    fingerprinted = combined_lineage("fingerprinted", CURRENT, {"documents": documents})
    assert fingerprinted == {
        **documents,
        "hash_scheme": "fss",
        "shingle_size": 5,
        "shingle_unit": "word",
        "num_perm": 64,
        "minhash_seed": 42,
        "rows_per_band": 8,
        "auto_bands": False,
        "false_negative_weight": 0.5,
        "bands": 8,
        "rows_in_use": 8,
        "sketch_scheme": CURRENT["sketch_scheme"],
        "audit_sample_size": 1000,  # the audit's sample is drawn while fingerprinting
        "ignored_passages": [],
        "ignore_shared_above": None,
    }


def _rebuild(error: StaleUpstream) -> str:
    """The command a refusal under `dagster asset materialize --select clusters` gives."""
    argv = ["dagster", "asset", "materialize", "-m", "dedup_assets.definitions", "--select", "clusters"]
    return how_to_fix(error.fix, error.select, entry="dagster", argv=argv)


def test_changed_threshold_names_the_asset_to_rebuild_from():
    clusters = {**LAYOUT, "input_path": "/in.csv", "jaccard_threshold": 0.7}
    with pytest.raises(StaleUpstream) as raised:
        combined_lineage("deduped_documents", {**CURRENT, "jaccard_threshold": 0.8}, {"clusters": clusters})
    message = str(raised.value)
    assert "clusters was built with jaccard_threshold=0.7, this run uses jaccard_threshold=0.8" in message
    assert message.endswith("Re-materialize scored_pairs and everything downstream of it.")
    # the command rebuilds with this run's input and settings, not the fixture and defaults
    assert _rebuild(raised.value) == (
        "Run: dagster asset materialize -m dedup_assets.definitions --select 'scored_pairs*' --config-json "
        """'{"resources": {"dedup": {"config": {"input_path": "/in.csv", "jaccard_threshold": 0.8}}}}'"""
    )


def test_the_commands_config_is_quoted_for_the_shell():
    with pytest.raises(StaleUpstream) as raised:
        combined_lineage(
            "fingerprinted",
            {**CURRENT, "fields": {"title": "author's title"}},
            {"documents": {**LAYOUT, "input_path": "/in.csv", "fields": {}}},
        )
    assert shlex.split(_rebuild(raised.value))[-1] == (
        '{"resources": {"dedup": {"config": {"input_path": "/in.csv", "fields": {"title": "author\'s title"}}}}}'
    )


def test_a_run_at_the_defaults_gets_a_command_without_config():
    at_defaults = {**CURRENT, "input_path": str(Path(INPUT.default).resolve())}
    with pytest.raises(StaleUpstream) as raised:
        combined_lineage("fingerprinted", at_defaults, {"documents": {**LAYOUT, "input_path": "/elsewhere.csv"}})
    assert raised.value.select == "group:deduplication" and raised.value.fix == {}
    assert _rebuild(raised.value).endswith("--select group:deduplication")
    # the parameter sweep's own refusal: documents again, and what follows it, the sweep among them
    with pytest.raises(StaleUpstream) as raised:
        combined_lineage("parameter_sweep", at_defaults, {"documents": {**LAYOUT, "input_path": "/elsewhere.csv"}})
    assert raised.value.select == "documents*"


def test_upstreams_from_different_inputs_are_not_mixed():
    with pytest.raises(StaleUpstream, match="has input_sha256='new' but documents has input_sha256='old'.*Re-materialize documents "):
        combined_lineage(
            "clusters",
            CURRENT,
            {"documents": {**LAYOUT, "input_sha256": "old"}, "duplicate_pairs": {**LAYOUT, "input_sha256": "new"}},
        )


def test_earliest_changed_stage_wins():
    with pytest.raises(StaleUpstream, match="Re-materialize fingerprinted "):
        combined_lineage(
            "clusters",
            {**CURRENT, "num_perm": 128, "jaccard_threshold": 0.9},
            {"duplicate_pairs": {**LAYOUT, "num_perm": 64, "jaccard_threshold": 0.7}},
        )


def test_a_table_an_older_version_built_is_rebuilt_not_misread():
    """Tables from before the layout was recorded (layout 1) lack columns later steps read."""
    old = {"input_path": "/in.csv", "jaccard_threshold": 0.7}
    with pytest.raises(StaleUpstream) as raised:
        combined_lineage("scored_pairs", CURRENT, {"candidate_pairs": old})
    assert str(raised.value) == (
        "Cannot build scored_pairs from tables made with other settings: candidate_pairs was built by "
        f"another version of dedup-assets (table layout 1; this version writes layout {TABLE_LAYOUT}). "
        "Re-materialize documents and everything downstream of it."
    )
    assert (raised.value.select, raised.value.fix) == ("group:deduplication", {"input_path": "/in.csv"})
