"""The ``dedup`` resource: every algorithm setting of a run, typed and checked at launch, and
where the input and the release files are.

Its defaults come from :class:`core.settings.Settings`, the one place they are written; every
field is set in the launchpad or with ``--config-json '{"resources": {"dedup": {"config":
{...}}}}'``, or in the settings file (``settings_file.py``), which the run config wins over.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import asdict, fields
from enum import Enum
from pathlib import Path

from dagster import Config, ConfigurableResource, InitResourceContext
from pydantic import Field, PrivateAttr, ValidationError, model_validator

from .cli import dedup_program
from .core.presets import PRESETS
from .core.input_settings import SOURCE_FORMATS
from .core.settings import (
    CLUSTER_MODES, ENGINES, HASH_SCHEMES, HOT_BUCKETS, PARQUET_BODIES, SIGNATURES_RELEASED_UP_TO, Settings,
    changed_settings, value_sources,
)
from .core.sweep_settings import SweepCombination, SweepSettings
from .core.tables import TABLE_LAYOUT
from .core.text import SHINGLE_UNITS
from .environment import CACHE, INPUT, LABELS, OUTPUT_DIR
from .settings_file import SettingsFile, read_settings_file

DEFAULTS = Settings()
SWEEP_DEFAULTS = SweepSettings()
RESOURCE_KEY = "dedup"  # the resource's key in the definitions and in the run config
# fields whose variable, when set (as `dedup run --input` sets DEDUP_INPUT), wins over the settings file
FIELD_VARIABLES = {"input_path": INPUT, "output_dir": OUTPUT_DIR, "labels_path": LABELS, "fetch_cache": CACHE}


# Dagster config takes enums, not Literal: these are the library's choices as enums.
HashScheme = Enum("HashScheme", {name: name for name in HASH_SCHEMES}, type=str)
SourceFormat = Enum("SourceFormat", {name: name for name in SOURCE_FORMATS}, type=str)
ClusterMode = Enum("ClusterMode", {name: name for name in CLUSTER_MODES}, type=str)
Engine = Enum("Engine", {name: name for name in ENGINES}, type=str)
ParquetBodies = Enum("ParquetBodies", {name: name for name in PARQUET_BODIES}, type=str)
HotBuckets = Enum("HotBuckets", {name: name for name in HOT_BUCKETS}, type=str)
ShingleUnit = Enum("ShingleUnit", {name: name for name in SHINGLE_UNITS}, type=str)
Preset = Enum("Preset", {name: name for name in PRESETS}, type=str)


def dedup_config_json(config: dict) -> str:
    """``config`` as the value of ``--config-json``: the dedup resource's config, quoted for a shell."""
    return shlex.quote(json.dumps({"resources": {RESOURCE_KEY: {"config": config}}}))


class SweepCombinationConfig(Config):
    """One combination of the parameter sweep; a field left out takes the library's default."""

    num_perm: int = Field(default=SweepCombination.num_perm, description="MinHash values per signature.")
    rows_per_band: int = Field(
        default=SweepCombination.rows_per_band, description="Signature values per LSH band (unused with auto_bands)."
    )
    auto_bands: bool = Field(
        default=SweepCombination.auto_bands, description="Bands and rows chosen for jaccard_threshold."
    )
    false_negative_weight: float = Field(
        default=SweepCombination.false_negative_weight, description="With auto_bands: the weight of missed duplicates."
    )
    jaccard_threshold: float = Field(
        default=SweepCombination.jaccard_threshold, description="Exact shingle Jaccard of a duplicate."
    )
    shingle_size: int = Field(default=SweepCombination.shingle_size, description="Tokens per shingle.")


class DedupSettings(ConfigurableResource):
    """Algorithm settings and file locations for one run (resource key ``dedup``)."""

    engine: Engine = Field(
        default=Engine(DEFAULTS.engine),
        description="duckdb: every step in this process, every table in the DuckDB file. ray: "
        "the steps on Ray Data (a local Ray, or the cluster the ray_engine resource names), the "
        "large tables as Parquet folders that the DuckDB file views; same tables, checks and "
        "release. Needs the ray extra.",
    )
    hash_scheme: HashScheme = Field(
        default=HashScheme(DEFAULTS.hash_scheme),
        description="fss: compiled 64-bit shingle hashes and a Fast Similarity Sketch; "
        "blake2b: the published MinHash definition, bit for bit (slow, for reference).",
    )
    shingle_size: int = Field(
        default=DEFAULTS.shingle_size, description="Tokens (or, with shingle_unit char, characters) per shingle; 1 to 64."
    )
    shingle_unit: ShingleUnit = Field(
        default=ShingleUnit(DEFAULTS.shingle_unit),
        description="word: shingles of shingle_size tokens (every Han, Hiragana and Katakana "
        "character is a token); char: of shingle_size characters of the normalized text, spaces "
        "removed (for Thai, Khmer, Lao or Myanmar text, or by choice; 3 to 5 is usual).",
    )
    num_perm: int = Field(default=DEFAULTS.num_perm, description="MinHash values per signature.")
    rows_per_band: int = Field(
        default=DEFAULTS.rows_per_band,
        description="Signature values per LSH band; divides num_perm. Unused with auto_bands."
    )
    minhash_seed: int = Field(default=DEFAULTS.minhash_seed, description="Seed of MinHash coordinate 0.")
    jaccard_threshold: float = Field(
        default=DEFAULTS.jaccard_threshold,
        description="Exact shingle Jaccard at or above which a pair is a duplicate.",
    )
    signature_overlap_threshold: float = Field(
        default=DEFAULTS.signature_overlap_threshold,
        description="Signature overlap reported as a MinHash match (diagnostic only).",
    )
    max_pair_slots: int | None = Field(
        default=DEFAULTS.max_pair_slots,
        description="Refuse the LSH self-join when its buckets would create more pair rows. "
        "Unset: as many as memory_budget_mb holds.",
    )
    max_bucket_size: int = Field(
        default=DEFAULTS.max_bucket_size,
        description="Refuse the LSH self-join when one bucket holds more distinct texts (hot_buckets: "
        "refuse), or leave such buckets out of it (hot_buckets: skip).",
    )
    hot_buckets: HotBuckets = Field(
        default=HotBuckets(DEFAULTS.hot_buckets),
        description="refuse: a bucket over max_bucket_size stops the run, as the published method does; "
        "skip: such buckets are left out of the join and listed in hot_buckets.csv, and the recall "
        "audit measures what that cost (engine duckdb, one-shot runs).",
    )
    memory_budget_mb: int = Field(
        default=DEFAULTS.memory_budget_mb,
        description="Refuse a self-join or a verification estimated to need more MB.",
    )
    batch_size: int = Field(
        default=DEFAULTS.batch_size, description="Documents per streamed batch (memory follows this)."
    )
    max_body_bytes: int = Field(
        default=DEFAULTS.max_body_bytes, description="Reject a document whose body has more UTF-8 bytes."
    )
    fail_on_reject: bool = Field(
        default=DEFAULTS.fail_on_reject,
        description="Fail the run on the first input row that would be rejected, instead of "
        "recording it in rejected_documents.",
    )
    source_format: SourceFormat | None = Field(
        default=None,
        description="csv, parquet, jsonl, warc or warc_ranges (a targets file of WARC byte ranges to "
        "fetch) for every input file; unset: by file extension, and a CSV or Parquet file with a "
        "targets file's columns is warc_ranges.",
    )
    fields: dict[str, str] = Field(
        default_factory=dict,
        description="Our column -> the input's column (CSV, Parquet) or field (JSONL) that fills "
        'it, e.g. {"doc_id": "id", "body": "text"}. Only doc_id and body are required; where the '
        "input has none, source is the file's name, domain the url's host, title empty and "
        "crawled_at null. JSONL defaults: doc_id<-id, body<-text, url<-url, title<-title, "
        "crawled_at<-timestamp, domain<-domain, source<-source.",
    )
    jsonl_fields: dict[str, str] = Field(
        default_factory=dict, description="Deprecated: the former name of fields (fields wins)."
    )
    parquet_bodies: ParquetBodies = Field(
        default=ParquetBodies(DEFAULTS.parquet_bodies),
        description="in_place: a Parquet input's bodies are read from its files by every step "
        "(engine duckdb), not copied into the database; the files must then stay as they are, and a "
        "changed one is refused with the command that reads it again. copy: copied, as other formats are.",
    )
    audit_sample_size: int = Field(
        default=DEFAULTS.audit_sample_size,
        description="Documents the recall audit samples (seeded by minhash_seed); it finds every "
        "pair of them with Jaccard at or above the threshold exactly, without LSH. 0: every document.",
    )
    min_recall: float = Field(
        default=DEFAULTS.min_recall,
        description="The recall audit's check warns when the upper end of its 95% interval is below this.",
    )
    auto_bands: bool = Field(
        default=DEFAULTS.auto_bands,
        description="Choose the LSH bands and rows (bands x rows <= num_perm) that minimize the weighted "
        "false-positive and false-negative areas of the S-curve at jaccard_threshold; rows_per_band "
        "is then unused. The choice is in lineage, manifest.json (derived_settings) and the "
        "candidate_pairs metadata.",
    )
    false_negative_weight: float = Field(
        default=DEFAULTS.false_negative_weight,
        description="With auto_bands: the weight of missed duplicates (the false-positive weight, "
        "extra candidates to verify, is 1 minus it). Higher: more recall, more candidates.",
    )
    cluster_mode: ClusterMode = Field(
        default=ClusterMode(DEFAULTS.cluster_mode),
        description="components: every document connected by accepted edges is one cluster, so a "
        "chain A~B~C removes C even when J(A, C) is below the threshold. star: the best-ranked "
        "document of a component keeps only the documents at or above the threshold with it; "
        "the rest are clustered again the same way.",
    )
    max_cluster_size: int = Field(
        default=DEFAULTS.max_cluster_size,
        description="The clusters check warns when a cluster has more documents (a sign of chaining "
        "through shared boilerplate).",
    )
    prefer_domains: list[str] = Field(
        default_factory=list,
        description="Domains whose copy a cluster keeps, first listed first, ahead of the newest "
        'crawled_at: e.g. ["original.com", "docs.example.org"]. An entry matches its subdomains too '
        "(example.com: www.example.com, news.example.com), regardless of case; unlisted domains "
        "come after every listed one. Empty: newest crawled_at, then most tokens, then smallest doc_id.",
    )
    sweep_combinations: list[SweepCombinationConfig] = Field(
        default_factory=lambda: [SweepCombinationConfig(**asdict(c)) for c in SWEEP_DEFAULTS.combinations],
        description="parameter_sweep (group tuning): the combinations of num_perm, rows_per_band or "
        "auto_bands (with false_negative_weight), jaccard_threshold and shingle_size it runs on its "
        "sample, each with this run's other settings.",
    )
    sweep_sample_size: int = Field(
        default=SWEEP_DEFAULTS.sample_size,
        description="Documents the parameter sweep samples (seeded by minhash_seed); 0: every document.",
    )
    warc_base_url: str = Field(
        default=DEFAULTS.warc_base_url,
        description="warc_ranges: the prefix a target's WARC filename is joined to: an http(s) URL, "
        "or a local folder (file:// or a path). The default is Common Crawl's public endpoint.",
    )
    acknowledge_common_crawl_terms: bool = Field(
        default=DEFAULTS.acknowledge_common_crawl_terms,
        description="warc_ranges from Common Crawl's own endpoint: you accept its terms of use "
        "(https://commoncrawl.org/terms-of-use); without it such a run fails before fetching.",
    )
    fetch_concurrency: int = Field(default=DEFAULTS.fetch_concurrency, description="warc_ranges: fetches at once.")
    fetch_retries: int = Field(
        default=DEFAULTS.fetch_retries,
        description="warc_ranges: retries of a fetch after a connection error, timeout, 429 or 5xx "
        "(exponential backoff with jitter).",
    )
    fetch_timeout_s: float = Field(
        default=DEFAULTS.fetch_timeout_s,
        description="warc_ranges: seconds a fetch attempt may take in all, however slowly the bytes come "
        "(then it is retried).",
    )
    fetch_cache: str | None = Field(
        default=DEFAULTS.fetch_cache,
        description="warc_ranges: a folder keeping fetched records, so a re-run fetches none again. "
        "Unset: env DEDUP_CACHE, else no cache.",
    )
    release_signatures: bool | None = Field(
        default=DEFAULTS.release_signatures,
        description="Whether fingerprinted.parquet in the release carries the MinHash signatures "
        f"(8 bytes x num_perm per document). Unset: up to {SIGNATURES_RELEASED_UP_TO:,} documents. "
        "The database's fingerprinted table always has them.",
    )
    preset: Preset | None = Field(
        default=None,
        description="web: recall first, for web pages with light edits: num_perm 128, auto_bands and "
        "false_negative_weight 0.9 (20 bands of 6 rows at jaccard_threshold 0.7). It fills those of "
        "them left at their defaults; manifest.json (derived_settings.preset_settings) says what it set.",
    )
    input_path: str | None = Field(
        default=None,
        description="Input file, folder or glob (CSV, Parquet, JSONL or WARC). Unset: env "
        f"{INPUT.name}, else {INPUT.default}.",
    )
    labels_path: str | None = Field(
        default=None,
        description="Labels to evaluate the clusters against: a CSV with the header "
        "left_doc_id,right_doc_id,label (1: duplicates, 0: not) or doc_id,cluster_label, or a folder "
        "of such files. Unset: env DEDUP_LABELS, else no evaluation.",
    )
    output_dir: str | None = Field(
        default=None,
        description=f"Folder for release files. Unset: env {OUTPUT_DIR.name}, else {OUTPUT_DIR.default}.",
    )

    # where each field's value came from (value_sources), once the run has set the resource up
    _sources: dict = PrivateAttr(default_factory=dict)

    def create_resource(self, context: InitResourceContext) -> DedupSettings:
        """The resource a run's assets get: this one, with the settings file's values for the fields
        the run config does not set. The run config is the run's own, as given (the launchpad's, or
        ``--config-json``): Dagster drops a value equal to its default from the fields it sets, and
        always sets enums, so only the given config tells a value set from one left at its default."""
        run = context.dagster_run
        given = (((run.run_config if run else None) or {}).get("resources") or {}).get(RESOURCE_KEY) or {}
        in_environment = {name for name, variable in FIELD_VARIABLES.items() if os.environ.get(variable.name)}
        file = read_settings_file(type(self).model_fields)
        return self.with_settings_file(set(given.get("config") or {}), file, in_environment)

    def with_settings_file(
        self, in_run_config: set[str], file: SettingsFile | None, in_environment: set[str] = frozenset()
    ) -> DedupSettings:
        """This resource with ``file``'s values for the fields neither ``in_run_config``, code (a value
        other than its default) nor a variable set (``in_environment``) sets, checked as a whole; its
        sources recorded (a variable's value is the field's ``default``, as it is without a file)."""
        values = self._values()
        in_file = set(file.values) - in_environment if file else ()
        sources = value_sources(values, self._defaults(), in_run_config, str(file.path) if file else None, in_file)
        from_file = {name: file.values[name] for name, source in sources.items() if file and source == str(file.path)}
        try:
            resolved = type(self)(**{**values, **from_file})
        except ValidationError as error:
            raise file.invalid(error) from None  # only the file's values were not checked yet
        resolved._sources = sources
        return resolved

    def settings_sources(self) -> dict[str, str]:
        """Where each field's value came from: ``run config``, ``code``, the settings file's path or
        ``default`` (recorded in manifest.json)."""
        return dict(self._sources) if self._sources else value_sources(self._values(), self._defaults())

    def _values(self) -> dict:
        return {name: getattr(self, name) for name in type(self).model_fields}

    @classmethod
    def _defaults(cls) -> dict:
        return {name: field.get_default(call_default_factory=True) for name, field in cls.model_fields.items()}

    @model_validator(mode="after")
    def _checked(self) -> DedupSettings:
        # the library checks every value and combination; asking it here refuses a bad setting
        # when the run is launched, before any asset runs
        self.sweep().settings(self.settings())
        return self

    def settings(self) -> Settings:
        """The run's algorithm settings as the library takes them (raises SettingsError)."""
        values = {field.name: getattr(self, field.name) for field in fields(Settings)}
        values["fetch_cache"] = self.fetch_cache or CACHE.value() or None
        return Settings(**{name: getattr(value, "value", value) for name, value in values.items()})

    def sweep(self) -> SweepSettings:
        """The parameter sweep's settings as the library takes them (raises SettingsError)."""
        return SweepSettings(
            tuple(SweepCombination(**combination.model_dump()) for combination in self.sweep_combinations),
            self.sweep_sample_size,
        )

    def input_file(self) -> Path:
        return Path(self.input_path) if self.input_path else INPUT.path()

    def labels(self) -> Path | None:
        if self.labels_path:
            return Path(self.labels_path)
        return LABELS.path() if LABELS.value() else None

    def output_folder(self) -> Path:
        return Path(self.output_dir) if self.output_dir else OUTPUT_DIR.path()

    def run_command(self, changes: dict) -> str:
        """The ``dedup run`` command that runs the graph again on this input with this run's
        settings (those not at their defaults, and the output and labels paths) and ``changes``."""
        config = changed_settings({**self.settings().as_dict(), **changes})
        if self.output_folder().resolve() != Path(OUTPUT_DIR.default).resolve():
            config["output_dir"] = str(self.output_folder())
        if self.labels():
            config["labels_path"] = str(self.labels())
        command = f"{dedup_program()} run --input {shlex.quote(str(self.input_file()))}"
        return command + (f" --config-json {dedup_config_json(config)}" if config else "")

    def current_values(self) -> dict:
        """Every setting that can appear in a table's lineage."""
        return {
            **self.settings().as_dict(),
            **self.settings().derived(),
            **self.sweep().as_dict(),
            "input_path": str(self.input_file()),
            "labels_path": str(self.labels()) if self.labels() else None,
            "table_layout": TABLE_LAYOUT,
        }
