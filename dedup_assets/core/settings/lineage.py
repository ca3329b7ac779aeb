"""Settings in lineage: which settings each table's content depends on, where a run's value of
each came from (``manifest.json``'s ``settings_sources``), and which differ from their defaults
(what a printed command carries)."""

from __future__ import annotations

from collections.abc import Collection

from .model import Settings

# Settings whose change alters an asset's content, keyed by the first asset they affect (the
# lineage of every table records them; ``table_layout`` and ``input_path`` are the run's).
STAGE_SETTINGS: dict[str, tuple[str, ...]] = {
    # the engine decides where every table lives (DuckDB, or Parquet folders it views)
    "documents": (
        "table_layout", "engine", "input_path", "source_format", "max_body_bytes", "fields", "jsonl_fields", "warc_base_url",
    ),
    # bands and rows_in_use: what rows_per_band, or auto_bands with the threshold, came to
    # audit_sample_size: the recall audit's probe rides on the fingerprinting pass
    # sketch_scheme: the versions of the hash and the text rule besides those settings, which a
    # new release may change under the same names (``sketch/scheme.py``)
    "fingerprinted": (
        "hash_scheme", "shingle_size", "shingle_unit", "num_perm", "minhash_seed", "rows_per_band", "auto_bands",
        "false_negative_weight", "bands", "rows_in_use", "sketch_scheme", "audit_sample_size", "ignored_passages",
        "ignore_shared_above",
    ),
    # hot_bucket_limit: max_bucket_size where hot_buckets: skip makes it decide the rows (refused,
    # it decides none, and a change of it rebuilds nothing)
    "candidate_pairs": ("hot_buckets", "hot_bucket_limit"),
    "scored_pairs": ("jaccard_threshold", "signature_overlap_threshold"),
    "reference_matches": ("reference",),
    "clusters": ("cluster_mode", "keep", "prefer_domains"),
    # template_clusters reads boilerplate's passages and the clusters: nothing of its own
    "evaluation": ("labels_path",),  # a file location, like input_path: the resource's, not Settings'
    # the tuning group's leaf: besides its combinations, the run's settings that its rows depend on
    "parameter_sweep": (
        "hash_scheme", "minhash_seed", "max_pair_slots", "max_bucket_size", "memory_budget_mb",
        "sweep_combinations", "sweep_sample_size", "ignored_passages", "ignore_shared_above",
    ),
}


# where a run's value came from, as manifest.json's settings_sources says (a settings file's
# values say its path): for every setting, and for the paths a release is made from
SOURCE_RUN_CONFIG, SOURCE_CODE, SOURCE_DEFAULT = "run config", "code", "default"
RUN_PATHS = ("input_path", "output_dir", "labels_path")


def value_sources(
    values: dict, defaults: dict, in_run_config: Collection[str] = (), file: str | None = None, in_file: Collection[str] = ()
) -> dict[str, str]:
    """Where each of ``values`` came from, the first that holds: the run config (``in_run_config``,
    the keys it sets, at any value), code (a value other than its default, given where the settings
    were made in Python), the settings file ``file`` (``in_file``: its keys), else the default. A
    value set in code to its default cannot be told from one left unset, so the file fills it."""
    sources = {}
    for name, value in values.items():
        if name in in_run_config:
            sources[name] = SOURCE_RUN_CONFIG
        elif value != defaults[name]:
            sources[name] = SOURCE_CODE
        elif file is not None and name in in_file:
            sources[name] = file
        else:
            sources[name] = SOURCE_DEFAULT
    return sources


def changed_settings(values: dict) -> dict:
    """The settings among ``values`` that differ from their defaults: what a command carries to
    run again with them."""
    defaults = Settings().as_dict()
    return {name: values[name] for name in defaults if name in values and values[name] != defaults[name]}
