import pytest
from dagster import Definitions, EnvVar
from pydantic import ValidationError

from dedup_assets.core.settings import Settings
from dedup_assets.definitions import defs
from dedup_assets.settings import DedupSettings
from dedup_assets.warehouse import DuckDBWarehouse

ASSETS = {
    "documents",
    "rejected_documents",
    "fingerprinted",
    "band_memberships",
    "candidate_pairs",
    "scored_pairs",
    "duplicate_pairs",
    "clusters",
    "deduped_documents",
    "manifest",
}


def test_definitions_load_with_the_documented_assets():
    Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    specs = {key.path[-1]: node for key, node in ((n.key, n) for n in graph.asset_nodes)}
    assert set(specs) == ASSETS
    for name, node in specs.items():
        assert node.group_name == "deduplication", name
        assert node.description and len(node.description) > 40, name
        assert node.kinds, name


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
    assert (defaults.jaccard_threshold, defaults.max_pair_slots) == (0.7, 1_000_000)


def test_the_resources_defaults_are_the_librarys():
    assert DedupSettings().settings() == Settings()
    assert DedupSettings(hash_scheme="blake2b", source_format="jsonl").settings() == Settings(
        hash_scheme="blake2b", source_format="jsonl"
    )


@pytest.mark.parametrize(
    "field, value", [("hash_scheme", "md5"), ("source_format", "xml"), ("jaccard_threshold", 1.5), ("batch_size", 0)]
)
def test_a_bad_setting_is_refused_when_the_resource_is_made(field, value):
    with pytest.raises(ValidationError, match=field):
        DedupSettings(**{field: value})


def test_the_warehouse_is_fed_by_environment_variables_resolved_at_launch():
    warehouse = defs.resources["warehouse"]
    assert isinstance(warehouse, DuckDBWarehouse)
    assert (warehouse.database, warehouse.memory_limit) == (
        EnvVar("DEDUP_DATABASE"),
        EnvVar("DEDUP_DUCKDB_MEMORY"),
    )
    assert isinstance(warehouse.database, EnvVar) and isinstance(warehouse.memory_limit, EnvVar)
