"""The settings of one run, and the value objects each step takes from them.

:class:`Settings` is the one place a default is written: the Dagster resource (``settings_resource.py``
one level up) takes its field defaults from here, and the library runner takes a ``Settings``.
Every value object checks itself when it is made, so a bad setting fails before any work.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Literal, get_args

from .capabilities import CAPABILITIES
from .errors import SettingsError
from .input_settings import FetchSettings, InputPolicy
from .keep_rule import checked_domains
from .kernels import MAX_SKETCH_SIZE
from .presets import PRESETS, more_recall, preset_values
from .scurve import choose_bands, lsh_recall
from .text import SHINGLE_UNITS, Shingling

HashScheme = Literal["fss", "blake2b"]
ClusterMode = Literal["components", "star"]
Engine = Literal["duckdb", "ray"]  # what each can run: capabilities.py
# in_place: a Parquet input's bodies are read from its files, not copied into the database. Not a
# stage setting: either way documents holds the same rows, so no table is built again for it.
ParquetBodies = Literal["in_place", "copy"]
# refuse: a bucket over max_bucket_size stops the run (the published method); skip: such buckets
# are left out of the self-join and listed, and the recall audit measures what that cost
HotBuckets = Literal["refuse", "skip"]
HASH_SCHEMES: tuple[str, ...] = get_args(HashScheme)
CLUSTER_MODES: tuple[str, ...] = get_args(ClusterMode)
ENGINES: tuple[str, ...] = get_args(Engine)
PARQUET_BODIES: tuple[str, ...] = get_args(ParquetBodies)
HOT_BUCKETS: tuple[str, ...] = get_args(HotBuckets)

# auto_bands weighs every (bands, rows) pair that fits; past this the choice alone takes seconds
MAX_AUTO_BANDS_PERM = 1 << 10
# Beyond this many words (or characters), two pages share a shingle only if they share whole
# paragraphs (or sentences), and every shorter page has none.
MAX_SHINGLE_SIZE = 64
DEFAULT_DUCKDB_MEMORY = "2GB"

# Rows per streamed batch. At web-page sizes a batch's text stays under glibc's largest mmap
# threshold (32 MB), so a freed batch's memory is reused by the next one instead of being mapped
# and faulted in again.
DEFAULT_BATCH_SIZE = 4_096
# A CSV read block holds a batch at up to 2 KiB a row, and Arrow's block size is a 32-bit int.
MAX_BATCH_SIZE = 1_000_000

# Up to this many documents the release's fingerprinted.parquet carries the signatures unless
# release_signatures says otherwise: above it they are most of the file, and most users never
# read them (they stay in the database).
SIGNATURES_RELEASED_UP_TO = 100_000

# Peak memory of the candidate step per pair slot (self-join, grouping per pair, sorted output)
# when DuckDB need not spill, measured with doc_ids of up to 46 characters (WARC record ids); it
# grows with doc_id length. Without max_pair_slots, the budget is what memory_budget_mb holds.
PAIR_SLOT_BYTES = 640


# Settings whose change alters an asset's content, keyed by the first asset they affect (the
# lineage of every table records them; ``table_layout`` and ``input_path`` are the run's).
STAGE_SETTINGS: dict[str, tuple[str, ...]] = {
    # the engine decides where every table lives (DuckDB, or Parquet folders it views)
    "documents": (
        "table_layout", "engine", "input_path", "source_format", "max_body_bytes", "fields", "jsonl_fields", "warc_base_url",
    ),
    # bands and rows_in_use: what rows_per_band, or auto_bands with the threshold, came to
    # audit_sample_size: the recall audit's probe rides on the fingerprinting pass
    "fingerprinted": (
        "hash_scheme", "shingle_size", "shingle_unit", "num_perm", "minhash_seed", "rows_per_band", "auto_bands",
        "false_negative_weight", "bands", "rows_in_use", "audit_sample_size",
    ),
    # hot_bucket_limit: max_bucket_size where hot_buckets: skip makes it decide the rows (refused,
    # it decides none, and a change of it rebuilds nothing)
    "candidate_pairs": ("hot_buckets", "hot_bucket_limit"),
    "scored_pairs": ("jaccard_threshold", "signature_overlap_threshold"),
    "clusters": ("cluster_mode", "prefer_domains"),
    "evaluation": ("labels_path",),  # a file location, like input_path: the resource's, not Settings'
    # the tuning group's leaf: besides its combinations, the run's settings that its rows depend on
    "parameter_sweep": (
        "hash_scheme", "minhash_seed", "max_pair_slots", "max_bucket_size", "memory_budget_mb",
        "sweep_combinations", "sweep_sample_size",
    ),
}


@dataclass(frozen=True)
class SketchParams:
    """How documents are fingerprinted and banded."""

    hash_scheme: str
    shingle_size: int
    num_perm: int
    rows_per_band: int
    minhash_seed: int
    band_count: int | None = None  # bands chosen for a threshold; None: num_perm / rows_per_band
    shingle_unit: str = "word"

    def __post_init__(self) -> None:
        if self.hash_scheme not in HASH_SCHEMES:
            raise SettingsError(
                f"hash_scheme must be one of {', '.join(HASH_SCHEMES)}, got {self.hash_scheme!r}"
            )
        if self.shingle_unit not in SHINGLE_UNITS:
            raise SettingsError(
                f"shingle_unit must be one of {', '.join(SHINGLE_UNITS)}, got {self.shingle_unit!r}"
            )
        if not 1 <= self.shingle_size <= MAX_SHINGLE_SIZE:
            raise SettingsError(
                f"shingle_size must be between 1 and {MAX_SHINGLE_SIZE} {self.shingle_unit}s, got {self.shingle_size}"
            )
        if self.band_count is not None:
            if self.band_count < 1 or self.rows_per_band < 1 or self.band_count * self.rows_per_band > self.num_perm:
                raise SettingsError(
                    f"{self.band_count} bands of {self.rows_per_band} rows need more than num_perm "
                    f"({self.num_perm}) signature values"
                )
        elif self.num_perm < 1 or self.rows_per_band < 1 or self.num_perm % self.rows_per_band:
            raise SettingsError(
                f"num_perm ({self.num_perm}) must be a positive multiple of rows_per_band "
                f"({self.rows_per_band})"
            )
        if self.hash_scheme == "fss" and self.num_perm > MAX_SKETCH_SIZE:
            raise SettingsError(f"the fss scheme supports num_perm up to {MAX_SKETCH_SIZE}")

    @property
    def bands(self) -> int:
        return self.band_count if self.band_count is not None else self.num_perm // self.rows_per_band

    @property
    def shingling(self) -> Shingling:
        return Shingling(self.shingle_size, self.shingle_unit)


@dataclass(frozen=True)
class Thresholds:
    """What verification accepts (Jaccard) and what it reports as a sketch match (overlap)."""

    jaccard: float
    signature_overlap: float

    def __post_init__(self) -> None:
        for name, value in (("jaccard", self.jaccard), ("signature_overlap", self.signature_overlap)):
            if not 0.0 < value <= 1.0:
                raise SettingsError(f"{name}_threshold must be in (0, 1], got {value}")


@dataclass(frozen=True)
class PairLimits:
    """What the candidate step may cost: pair slots in all, and distinct texts in one bucket.
    ``memory_budget_mb`` is set when the slot budget was derived from it."""

    max_pair_slots: int
    max_bucket_size: int
    memory_budget_mb: int | None = None
    skip_hot_buckets: bool = False  # hot_buckets: skip


@dataclass(frozen=True)
class ClusterParams:
    """How the cluster step makes clusters (``mode``; Jaccard with the representative measured
    over ``shingling``, chained below ``threshold``) and which member each keeps: the keep rule
    with ``prefer_domains`` (``keep_rule.py``)."""

    mode: str
    shingling: Shingling
    threshold: float
    memory_budget_mb: int
    prefer_domains: tuple[str, ...] = ()


@dataclass(frozen=True)
class Settings:
    """Every algorithm setting of a run, with its default. These are the settings recorded in
    lineage and in ``manifest.json``, under these names."""

    engine: str = "duckdb"
    hash_scheme: str = "fss"
    shingle_size: int = 5
    shingle_unit: str = "word"  # word: shingles of shingle_size tokens; char: of characters
    num_perm: int = 64
    rows_per_band: int = 8
    minhash_seed: int = 42
    jaccard_threshold: float = 0.7
    signature_overlap_threshold: float = 0.7
    max_pair_slots: int | None = None  # None: derived from memory_budget_mb
    max_bucket_size: int = 1_000
    hot_buckets: str = "refuse"
    memory_budget_mb: int = 3072
    batch_size: int = DEFAULT_BATCH_SIZE
    max_body_bytes: int = InputPolicy.max_body_bytes
    fail_on_reject: bool = InputPolicy.fail_on_reject
    jsonl_fields: dict = field(default_factory=dict)  # the former, JSONL-only name of ``fields``
    source_format: str | None = None
    fields: dict = field(default_factory=dict)
    parquet_bodies: str = "in_place"
    audit_sample_size: int = 1_000  # 0: every document
    min_recall: float = 0.9
    cluster_mode: str = "components"
    max_cluster_size: int = 1_000
    prefer_domains: list[str] = field(default_factory=list)  # the keep rule's domains, first preferred
    auto_bands: bool = False  # True: bands and rows chosen from jaccard_threshold (rows_per_band unused)
    false_negative_weight: float = 0.5
    warc_base_url: str = FetchSettings.base_url
    acknowledge_common_crawl_terms: bool = FetchSettings.acknowledge_common_crawl_terms
    fetch_concurrency: int = FetchSettings.concurrency
    fetch_retries: int = FetchSettings.retries
    fetch_timeout_s: float = FetchSettings.timeout_s
    fetch_cache: str | None = FetchSettings.cache  # the resource fills it from DEDUP_CACHE when unset
    release_signatures: bool | None = None  # None: up to SIGNATURES_RELEASED_UP_TO documents
    preset: str | None = None  # a name of core.presets.PRESETS: fills the settings it names left at their defaults

    def __post_init__(self) -> None:
        if self.preset is not None and self.preset not in PRESETS:
            raise SettingsError(f"preset must be one of {', '.join(PRESETS)} (or unset), got {self.preset!r}")
        for name, value in preset_values(self.preset, self.as_dict(), _DEFAULTS).items():
            object.__setattr__(self, name, value)  # frozen: set once, before anything reads it
        # each value object checks itself; make them all now, so nothing runs on a bad setting
        self.sketch_params(), self.thresholds(), self.input_policy()
        minimums = {
            "max_pair_slots": 0,
            "max_bucket_size": 2,
            "memory_budget_mb": 1,
            "batch_size": 1,
            "max_body_bytes": 1,
            "audit_sample_size": 0,
            "max_cluster_size": 1,
        }
        for name, minimum in minimums.items():
            value = getattr(self, name)
            if value is not None and value < minimum:
                raise SettingsError(f"{name} must be at least {minimum}, got {value}")
        if not 0.0 <= self.false_negative_weight <= 1.0:
            raise SettingsError(f"false_negative_weight must be between 0 and 1, got {self.false_negative_weight}")
        if not 0.0 <= self.min_recall <= 1.0:
            raise SettingsError(f"min_recall must be between 0 and 1, got {self.min_recall}")
        try:  # stored as the keep rule compares them, so lineage and the index see one value per rule
            object.__setattr__(self, "prefer_domains", checked_domains(self.prefer_domains))
        except ValueError as error:
            raise SettingsError(str(error)) from None
        if self.cluster_mode not in CLUSTER_MODES:
            raise SettingsError(
                f"cluster_mode must be one of {', '.join(CLUSTER_MODES)}, got {self.cluster_mode!r}"
            )
        if self.parquet_bodies not in PARQUET_BODIES:
            raise SettingsError(
                f"parquet_bodies must be one of {', '.join(PARQUET_BODIES)}, got {self.parquet_bodies!r}"
            )
        if self.engine not in ENGINES:
            raise SettingsError(f"engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        if not CAPABILITIES[self.engine].star_clusters and self.cluster_mode != "components":
            raise SettingsError(
                "cluster_mode star runs on engine duckdb only: its rounds compare whole components "
                "on one node. Use cluster_mode components with engine ray (the chained members are "
                "still flagged), or engine duckdb."
            )
        if self.hot_buckets not in HOT_BUCKETS:
            raise SettingsError(f"hot_buckets must be one of {', '.join(HOT_BUCKETS)}, got {self.hot_buckets!r}")
        if not CAPABILITIES[self.engine].skip_hot_buckets and self.hot_buckets == "skip":
            raise SettingsError(
                "hot_buckets skip runs on engine duckdb only. Use engine duckdb, or hot_buckets "
                "refuse (the default) with engine ray."
            )
        if self.batch_size > MAX_BATCH_SIZE:
            raise SettingsError(f"batch_size must be at most {MAX_BATCH_SIZE:,}, got {self.batch_size:,}")

    def sketch_params(self) -> SketchParams:
        if self.auto_bands:
            # the choice searches every pair that fits num_perm: check it first
            if not 1 <= self.num_perm <= (MAX_SKETCH_SIZE if self.hash_scheme == "fss" else MAX_AUTO_BANDS_PERM):
                raise SettingsError(
                    f"with auto_bands, num_perm must be between 1 and "
                    f"{MAX_SKETCH_SIZE if self.hash_scheme == 'fss' else MAX_AUTO_BANDS_PERM}, got {self.num_perm}"
                )
            bands, rows = choose_bands(self.jaccard_threshold, self.num_perm, self.false_negative_weight)
            return SketchParams(
                self.hash_scheme, self.shingle_size, self.num_perm, rows, self.minhash_seed, bands, self.shingle_unit
            )
        return SketchParams(
            self.hash_scheme, self.shingle_size, self.num_perm, self.rows_per_band, self.minhash_seed,
            shingle_unit=self.shingle_unit,
        )

    def shingling(self) -> Shingling:
        return Shingling(self.shingle_size, self.shingle_unit)

    def preset_settings(self) -> dict:
        """What the preset set: its settings whose values are in effect (recorded in manifest.json)."""
        named = PRESETS[self.preset] if self.preset else {}
        return {name: value for name, value in named.items() if getattr(self, name) == value}

    def lsh_recall(self) -> float:
        """The share of pairs at or above jaccard_threshold the S-curve makes candidates, with
        their Jaccard spread evenly up to 1."""
        params = self.sketch_params()
        return lsh_recall(self.jaccard_threshold, params.bands, params.rows_per_band)

    def more_recall(self) -> tuple[dict, Settings] | None:
        """Changes that make LSH find more of the pairs at or above the threshold, and the settings
        they make (:func:`.presets.more_recall`); None when there are none."""
        return more_recall(self, MAX_SKETCH_SIZE if self.hash_scheme == "fss" else MAX_AUTO_BANDS_PERM)

    def thresholds(self) -> Thresholds:
        return Thresholds(self.jaccard_threshold, self.signature_overlap_threshold)

    def cluster_params(self) -> ClusterParams:
        return ClusterParams(
            self.cluster_mode, self.shingling(), self.jaccard_threshold, self.memory_budget_mb,
            tuple(self.prefer_domains),
        )

    def pair_limits(self) -> PairLimits:
        """The candidate step's limits: the slot budget, unless set, is what memory_budget_mb
        holds at PAIR_SLOT_BYTES a slot."""
        skip = self.hot_buckets == "skip"
        if self.max_pair_slots is not None:
            return PairLimits(self.max_pair_slots, self.max_bucket_size, skip_hot_buckets=skip)
        slots = self.memory_budget_mb * 2**20 // PAIR_SLOT_BYTES
        return PairLimits(slots, self.max_bucket_size, self.memory_budget_mb, skip)

    def input_policy(self, stop: threading.Event | None = None) -> InputPolicy:
        return InputPolicy(
            self.max_body_bytes,
            self.fail_on_reject,
            {**self.jsonl_fields, **self.fields},
            self.source_format,
            FetchSettings(
                self.warc_base_url,
                self.acknowledge_common_crawl_terms,
                self.fetch_concurrency,
                self.fetch_retries,
                self.fetch_timeout_s,
                self.fetch_cache,
            ),
            stop,
        )

    def as_dict(self) -> dict:
        return asdict(self)

    def bodies_read_in_place(self) -> bool:
        """Whether documents may read a Parquet input's bodies from its files (engine duckdb:
        the ray engine writes documents as Parquet folders of its own)."""
        return CAPABILITIES[self.engine].bodies_in_place and self.parquet_bodies == "in_place"

    def signatures_released(self, documents: int) -> bool:
        """Whether the release's fingerprinted.parquet has the signature column."""
        if self.release_signatures is None:
            return documents <= SIGNATURES_RELEASED_UP_TO
        return self.release_signatures

    def derived(self) -> dict:
        """The LSH bands in use: what rows_per_band, or auto_bands with the threshold, came to; and
        the size past which a bucket is left out of the join (None: such a bucket is refused).
        Recorded in lineage beside the settings (never in place of one)."""
        params = self.sketch_params()
        limit = self.max_bucket_size if self.hot_buckets == "skip" else None
        return {"bands": params.bands, "rows_in_use": params.rows_per_band, "hot_bucket_limit": limit}


_DEFAULTS = {item.name: item.default for item in fields(Settings) if item.default is not MISSING}


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
