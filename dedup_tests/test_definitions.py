import os
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from dagster import Definitions
from dagster_duckdb import DuckDBResource
from pydantic import ValidationError

from dedup_assets.core.settings.model import STEPS, Settings
from dedup_assets.definitions import PIPELINE_JOBS, defs
from dedup_assets.launch.run_arguments import JOB_DESCRIPTIONS
from dedup_assets.settings_resource import DedupSettings
from dedup_assets.stored_tables.warehouse import DuckDBWarehouse

from .conftest import FIXTURE

ASSETS = {
    "documents",
    "rejected_documents",
    "fingerprinted",
    "boilerplate",
    "band_memberships",
    "candidate_pairs",
    "scored_pairs",
    "duplicate_pairs",
    "reference_matches",
    "clusters",
    "template_clusters",
    "deduped_documents",
    "manifest",
    "recall_audit",
    "evaluation",
}


BATCH_ASSETS = {
    "batch_documents",
    "batch_rejected_documents",
    "batch_fingerprints",
    "batch_pairs",
    "batch_clusters",
    "batch_release",
}
TUNING_ASSETS = {"parameter_sweep"}


def test_the_assets_a_failed_engine_step_selects_are_the_graphs():
    """A ray step that fails selects its asset and those after it to run again: the one-shot
    graph's under its own name or ``ONE_SHOT_STEP_ASSETS``', a batch's under ``BATCH_STEP_ASSETS``'."""
    from dedup_assets.core.pipeline.engines import Engine
    from dedup_assets.core.pipeline.step_assets import BATCH_STEP_ASSETS, ONE_SHOT_STEP_ASSETS

    steps = {name for name in vars(Engine) if not name.startswith("_")}
    assert set(BATCH_STEP_ASSETS) <= steps and set(BATCH_STEP_ASSETS.values()) <= BATCH_ASSETS
    assert {ONE_SHOT_STEP_ASSETS.get(step, step) for step in steps} <= ASSETS


def test_a_rerun_from_an_asset_selects_it_and_what_follows_it_but_the_sweep():
    """What a failed step or a changed input asks to run again: the asset and every asset after
    it in its own graph, never the parameter sweep (which runs the pipeline once per setting it
    tries); from documents, rejected_documents too (the same read of the input)."""
    from dagster import AssetKey, AssetSelection

    from dedup_assets.core.pipeline.step_assets import rerun_from

    graph = defs.resolve_asset_graph()

    def names(selection: str) -> set[str]:
        return {key.path[-1] for key in AssetSelection.from_coercible([selection]).resolve(graph)}

    for asset in ASSETS | BATCH_ASSETS:
        after = {key.path[-1] for key in graph.get(AssetKey(asset)).child_keys}
        selected = names(rerun_from(asset))
        assert asset in selected and not selected & TUNING_ASSETS, (asset, selected)
        assert after - TUNING_ASSETS <= selected, (asset, after - selected)
        assert selected <= (BATCH_ASSETS if asset in BATCH_ASSETS else ASSETS), asset
    assert names(rerun_from("documents")) == ASSETS
    # the sweep's own refusal (its documents are stale) runs documents and the sweep again
    from dedup_assets.core.pipeline.step_assets import SWEEP_ASSET

    assert {SWEEP_ASSET} == TUNING_ASSETS and {"documents", SWEEP_ASSET} <= names(rerun_from("documents", SWEEP_ASSET))
    assert names(rerun_from("scored_pairs")) == names("scored_pairs*")


def test_definitions_load_with_the_documented_assets():
    Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    specs = {key.path[-1]: node for key, node in ((n.key, n) for n in graph.asset_nodes)}
    assert set(specs) == ASSETS | BATCH_ASSETS | TUNING_ASSETS
    for name, node in specs.items():
        batch = name in BATCH_ASSETS
        group = "incremental" if batch else "tuning" if name in TUNING_ASSETS else "deduplication"
        assert node.group_name == group, name
        # the one-shot graph runs whole; each batch asset runs one batch (partition) at a time
        assert (node.partitions_def is not None) == batch, name
        assert node.description and len(node.description) > 40, name
        assert node.kinds, name
    assert {sensor.name for sensor in defs.sensors} == {"dead_runs", "new_batches"}


def test_dedup_run_offers_every_named_job_with_its_description():
    # dedup run parses --job before the definitions load, from JOB_DESCRIPTIONS: the jobs must be
    # the same (the descriptions are JOB_DESCRIPTIONS' by construction)
    assert {job.name: job.description for job in PIPELINE_JOBS} == JOB_DESCRIPTIONS


def test_checks_are_registered_and_the_key_ones_block():
    graph = defs.resolve_asset_graph()
    checks = {key.name: graph.get_check_spec(key) for key in graph.asset_check_keys}
    assert {"doc_id_unique", "every_document_in_one_cluster", "fixture_contract"} <= set(checks)
    assert checks["duplicate_edges_meet_threshold"].blocking


def test_dedup_resource_exposes_the_documented_setting_names():
    fields = set(DedupSettings.model_fields)
    assert {
        "shingle_size",
        "num_perm",
        "rows_per_band",
        "minhash_seed",
        "jaccard_threshold",
        "signature_overlap_threshold",
        "max_pair_slots",
    } <= fields
    defaults = DedupSettings()
    assert (defaults.shingle_size, defaults.num_perm, defaults.rows_per_band, defaults.minhash_seed) == (5, 64, 8, 42)
    assert (defaults.jaccard_threshold, defaults.max_pair_slots) == (0.7, None)  # None: from memory_budget_mb


def test_the_resource_is_made_from_the_library_settings():
    made = fields(Settings)
    for setting in made:
        field = DedupSettings.model_fields[setting.name]
        assert field.description == setting.metadata["doc"] and setting.metadata["step"] in STEPS, setting.name
    # besides them, only the sweep's fields and the paths
    resource_only = set(DedupSettings.model_fields) - {setting.name for setting in made}
    assert resource_only == {"sweep_combinations", "sweep_sample_size", "input_path", "labels_path", "output_dir"}
    assert DedupSettings.model_fields["hot_buckets"].annotation.__name__ == "HotBuckets"


def test_the_readme_settings_table_names_the_step_the_library_gives_each_setting():
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| ([a-z, ]+) \| `(\w+)` \|", readme, re.MULTILINE)
    steps = {setting.name: setting.metadata["step"] for setting in fields(Settings)}
    assert len(rows) >= 15
    for listed, name in rows:
        assert steps[name] in listed.split(", "), f"README.md lists {name} under {listed}, the library under {steps[name]}"


def test_the_resources_defaults_are_the_librarys():
    assert DedupSettings().settings() == Settings()
    assert DedupSettings(hash_scheme="blake2b", source_format="jsonl").settings() == Settings(
        hash_scheme="blake2b", source_format="jsonl"
    )


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"hash_scheme": "md5"}, "hash_scheme"),
        ({"source_format": "xml"}, "source_format"),
        ({"jaccard_threshold": 1.5}, r"jaccard_threshold must be in \(0, 1\], got 1.5"),
        ({"jaccard_threshold": 0}, r"jaccard_threshold must be in \(0, 1\], got 0"),
        ({"signature_overlap_threshold": -0.1}, r"signature_overlap_threshold must be in \(0, 1\]"),
        ({"num_perm": 0}, r"num_perm \(0\) must be a positive multiple of rows_per_band \(8\)"),
        ({"num_perm": 60}, r"num_perm \(60\) must be a positive multiple of rows_per_band \(8\)"),
        ({"rows_per_band": 0}, r"must be a positive multiple of rows_per_band \(0\)"),
        ({"num_perm": 1024, "rows_per_band": 8}, "the fss scheme supports num_perm up to 512"),
        ({"shingle_size": 0}, "shingle_size must be between 1 and 64 words, got 0"),
        ({"shingle_size": 100_000}, "shingle_size must be between 1 and 64 words, got 100000"),
        ({"batch_size": 0}, "batch_size must be at least 1, got 0"),
        ({"batch_size": 2_000_000}, "batch_size must be at most 1,000,000, got 2,000,000"),
        ({"max_bucket_size": 1}, "max_bucket_size must be at least 2, got 1"),
        ({"max_body_bytes": 0}, "max_body_bytes must be at least 1, got 0"),
        ({"memory_budget_mb": 0}, "memory_budget_mb must be at least 1, got 0"),
        ({"max_pair_slots": -1}, "max_pair_slots must be at least 0, got -1"),
    ],
)
def test_a_bad_setting_is_refused_when_the_resource_is_made(settings, message):
    with pytest.raises(ValidationError, match=message):
        DedupSettings(**settings)


def test_the_warehouse_needs_no_environment_variable_and_takes_them_when_set(monkeypatch):
    """Defaults in code; the environment of the run wins over them, and run config over both."""
    warehouse = DuckDBWarehouse()
    assert isinstance(warehouse, DuckDBResource)
    monkeypatch.delenv("DEDUP_DATABASE", raising=False)
    monkeypatch.delenv("DEDUP_DUCKDB_MEMORY", raising=False)
    assert (warehouse.path, warehouse.memory) == ("var/dedup_assets.duckdb", "2GB")
    monkeypatch.setenv("DEDUP_DATABASE", "elsewhere/index.duckdb")
    monkeypatch.setenv("DEDUP_DUCKDB_MEMORY", "1GB")
    assert (warehouse.path, warehouse.memory) == ("elsewhere/index.duckdb", "1GB")
    configured = DuckDBWarehouse(database="configured.duckdb", memory_limit="3GB")
    assert (configured.path, configured.memory) == ("configured.duckdb", "3GB")


def test_jsonl_fields_is_kept_as_the_former_name_of_fields():
    old = DedupSettings(jsonl_fields={"doc_id": "key", "body": "content"}).settings().input_policy()
    assert old.fields == {"doc_id": "key", "body": "content"}
    both = DedupSettings(jsonl_fields={"doc_id": "key"}, fields={"doc_id": "id"}).settings().input_policy()
    assert both.fields == {"doc_id": "id"}


# Loads the definitions with sys.argv that fails when read, and lists what was opened, listed,
# made or removed under the watched folders (Python's audit events).
LOAD_WATCHED = r"""
import os, sys

class Untouchable(list):
    def refuse(self, *args):
        raise AssertionError("loading the definitions read sys.argv")
    __len__ = __getitem__ = __iter__ = __contains__ = __eq__ = refuse

WATCHED = tuple(sys.argv[1:])
EVENTS = {"open", "os.listdir", "os.scandir", "os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.chmod"}
touched = []

def audit(event, args):
    if event in EVENTS and args and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.path.abspath(os.fsdecode(args[0]))
        # what is written shows in the files; the import system's pseudo-paths exist nowhere
        if path.startswith(WATCHED) and os.path.lexists(path):
            touched.append(f"{event} {path}")

sys.addaudithook(audit)
from dagster import Definitions  # Dagster itself reads argv at import (dagster_pipes)
sys.argv = Untouchable(["dagster", "asset", "materialize", "--select", "*"])
from dedup_assets.definitions import defs
Definitions.validate_loadable(defs)
defs.resolve_asset_graph()
print("touched:", touched)
"""


def _files(folder) -> set:
    return {path for path in folder.rglob("*")}


def test_loading_the_definitions_reads_no_file_or_argument_and_writes_nothing(tmp_path):
    """From an empty folder whose batches/ holds a batch and with an empty DAGSTER_HOME: the
    batch is not registered (nothing is written), nothing there is read, and argv is not looked at."""
    cwd, home = tmp_path / "cwd", tmp_path / "home"
    (cwd / "batches").mkdir(parents=True)
    (cwd / "batches" / "2026-11-01.csv").write_bytes(FIXTURE.read_bytes())
    (cwd / "dedup.yaml").write_text("jaccard_threshold: 0.9\n")  # read when a run starts, not here
    home.mkdir()
    (tmp_path / "load.py").write_text(LOAD_WATCHED)
    before = _files(tmp_path)
    env = {key: value for key, value in os.environ.items() if not key.startswith("DEDUP_")}
    loaded = subprocess.run(
        [sys.executable, str(tmp_path / "load.py"), str(cwd), str(home)],
        cwd=cwd, env={**env, "DAGSTER_HOME": str(home)}, capture_output=True, text=True, timeout=300,
    )
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert "touched: []" in loaded.stdout, loaded.stdout
    assert _files(tmp_path) == before


def test_the_published_tables_are_loaded_by_the_warehouse_tables_io_manager():
    graph = defs.resolve_asset_graph()
    loaded = {node.key.path[-1] for node in graph.asset_nodes if node.io_manager_key == "warehouse_tables"}
    assert loaded == {"deduped_documents", "clusters", "duplicate_pairs", "rejected_documents"}
