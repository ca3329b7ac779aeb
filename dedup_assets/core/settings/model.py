"""The settings of one run: :class:`Settings` is the one place each is written, with its type,
default, step and description. The Dagster resource (``settings_resource.py`` one level up) makes
its fields from it, and the library takes a ``Settings``, which checks itself when it is made (and
makes the value objects each step takes, ``pipeline/step_params.py``), so a bad setting fails before any work.
"""

from __future__ import annotations

import threading
from dataclasses import MISSING, asdict, dataclass, field, fields

from ..pipeline.capabilities import CAPABILITIES
from ..util.errors import SettingsError
from .input import FetchSettings, InputPolicy, SourceFormat
from ..keep.rule import DEFAULT_KEEP, KeepPolicy, checked_domains
from ..sketch.kernels import MAX_SKETCH_SIZE
from .presets import PRESETS, more_recall, preset_values
from ..lsh.scurve import choose_bands, lsh_recall
from .choices import (
    CHOICES,
    ClusterMode,
    DEFAULT_BATCH_SIZE,
    DEFAULT_COMPRESSION,
    Engine,
    HotBuckets,
    MAX_AUTO_BANDS_PERM,
    MAX_BATCH_SIZE,
    PAIR_SLOT_BYTES,
    ParquetBodies,
    Preset,
    RELEASES_KEPT,
    ReleaseCompression,
    SIGNATURES_RELEASED_UP_TO,
)
from ..sketch.scheme import SKETCH_SCHEME, sketch_scheme
from ..pipeline.step_params import ClusterParams, HashScheme, PairLimits, SketchParams, Thresholds
from ..text.passages import MIN_SHARE, checked_passages, passage_shingles
from ..text.normalize import Shingling, ShingleUnit
from ..text.tokenizers import TOKENIZERS


STEPS = ("engine", "ingest", "fingerprint", "lsh", "verify", "cluster", "release", "audit")


def _setting(step: str, doc: str, default=MISSING, factory=MISSING):
    """A field of :class:`Settings`: its default, the step it affects (``STEPS``, as the README and
    docs/settings.md group them) and what it does, which the ``dedup`` resource shows in the UI."""
    assert step in STEPS, step
    return field(default=default, default_factory=factory, metadata={"step": step, "doc": doc})


@dataclass(frozen=True)
class Settings:
    """Every algorithm setting of a run: its type, default, step and description, written once.
    These are the settings recorded in lineage and in ``manifest.json``, under these names, and the
    ``dedup`` resource's fields are made from them (``settings_resource.py``)."""

    engine: Engine = _setting(
        "engine",
        "duckdb: every step in this process, every table in the DuckDB file. ray: the steps on Ray "
        "Data (a local Ray, or the cluster the engine resource names), the large tables as "
        "Parquet folders that the DuckDB file views; same tables, checks and release. Needs the ray extra.",
        "duckdb",
    )
    hash_scheme: HashScheme = _setting(
        "fingerprint",
        "fss: compiled 64-bit shingle hashes and a Fast Similarity Sketch; blake2b: the published "
        "MinHash definition, bit for bit (slow, for reference).",
        "fss",
    )
    shingle_size: int = _setting(
        "fingerprint", "Tokens (or, with shingle_unit char, characters) per shingle; 1 to 64.", 5
    )
    shingle_unit: ShingleUnit = _setting(
        "fingerprint",
        "; ".join(f"{name}: {tokenizer.description}" for name, tokenizer in TOKENIZERS.items()) + ".",
        "word",
    )
    ignored_passages: list[str] = _setting(
        "fingerprint",
        "Passages whose shingles are left out of every document's sketch and exact Jaccard, so that "
        "pages sharing only them (a footer, a template: the boilerplate table's passages) are not "
        "duplicates, while true copies still are. A document made of them alone keeps them. Empty: none.",
        factory=list,
    )
    ignore_shared_above: float | None = _setting(
        "fingerprint",
        "Leave out, as ignored_passages does, every shingle that at least this share of a seeded "
        "sample of the documents has (0.01 to 1): a footer on half the pages at 0.5. The passages "
        "those shingles make are in fingerprinted's lineage and manifest.json. Unset: none.",
        None,
    )
    num_perm: int = _setting("fingerprint", "MinHash values per signature.", 64)
    rows_per_band: int = _setting(
        "lsh", "Signature values per LSH band; divides num_perm. Unused with auto_bands.", 8
    )
    minhash_seed: int = _setting("fingerprint", "Seed of MinHash coordinate 0.", 42)
    jaccard_threshold: float = _setting(
        "verify", "Exact shingle Jaccard at or above which a pair is a duplicate.", 0.7
    )
    signature_overlap_threshold: float = _setting(
        "verify", "Signature overlap reported as a MinHash match (diagnostic only).", 0.7
    )
    max_pair_slots: int | None = _setting(
        "lsh",
        "Refuse the LSH self-join when its buckets would create more pair rows. Unset: as many as "
        "memory_budget_mb holds.",
        None,
    )
    max_bucket_size: int = _setting(
        "lsh",
        "Refuse the LSH self-join when one bucket holds more distinct texts (hot_buckets: refuse), "
        "or leave such buckets out of it (hot_buckets: skip).",
        1_000,
    )
    hot_buckets: HotBuckets = _setting(
        "lsh",
        "refuse: a bucket over max_bucket_size stops the run, as the published method does; skip: "
        "such buckets are left out of the join and listed in hot_buckets.csv, and the recall audit "
        "measures what that cost (one-shot runs).",
        "refuse",
    )
    memory_budget_mb: int = _setting("lsh", "Refuse a self-join or a verification estimated to need more MB.", 3072)
    batch_size: int = _setting("engine", "Documents per streamed batch (memory follows this).", DEFAULT_BATCH_SIZE)
    max_body_bytes: int = _setting("ingest", "Reject a document whose body has more UTF-8 bytes.", InputPolicy.max_body_bytes)
    fail_on_reject: bool = _setting(
        "ingest",
        "Fail the run on the first input row that would be rejected, instead of recording it in "
        "rejected_documents.",
        InputPolicy.fail_on_reject,
    )
    jsonl_fields: dict[str, str] = _setting("ingest", "Deprecated: the former name of fields (fields wins).", factory=dict)
    source_format: SourceFormat | None = _setting(
        "ingest",
        "csv, parquet, jsonl, warc or warc_ranges (a targets file of WARC byte ranges to fetch) for "
        "every input file; unset: by file extension, and a CSV or Parquet file with a targets "
        "file's columns is warc_ranges.",
        None,
    )
    fields: dict[str, str] = _setting(
        "ingest",
        "Our column -> the input's column (CSV, Parquet) or field (JSONL) that fills it, e.g. "
        '{"doc_id": "id", "body": "text"}. Only doc_id and body are required; where the input has '
        "none, source is the file's name, domain the url's host, title empty and crawled_at null. "
        "JSONL defaults: doc_id<-id, body<-text, url<-url, title<-title, crawled_at<-timestamp, "
        "domain<-domain, source<-source.",
        factory=dict,
    )
    parquet_bodies: ParquetBodies = _setting(
        "ingest",
        "in_place: a Parquet input's bodies are read from its files by every step (engine duckdb), "
        "not copied into the database; the files must then stay as they are, and a changed one is "
        "refused with the command that reads it again. copy: copied, as other formats are.",
        "in_place",
    )
    audit_sample_size: int = _setting(
        "audit",
        "Documents the recall audit samples (seeded by minhash_seed); it finds every pair of them "
        "with Jaccard at or above the threshold exactly, without LSH. 0: every document.",
        1_000,
    )
    min_recall: float = _setting(
        "audit", "The recall audit's check warns when the upper end of its 95% interval is below this.", 0.9
    )
    cluster_mode: ClusterMode = _setting(
        "cluster",
        "components: every document connected by accepted edges is one cluster, so a chain A~B~C "
        "removes C even when J(A, C) is below the threshold. star: the best-ranked document of a "
        "component keeps only the documents at or above the threshold with it; the rest are "
        "clustered again the same way.",
        "components",
    )
    max_cluster_size: int = _setting(
        "cluster",
        "The clusters check warns when a cluster has more documents (a sign of chaining through "
        "shared boilerplate).",
        1_000,
    )
    keep: list[str] = _setting(
        "cluster",
        "Which copy a cluster keeps: rules in order, each deciding where the ones before it tie, the "
        "smallest doc_id last. prefer_domains (the prefer_domains list), newest / oldest (crawled_at), "
        "longest / shortest (tokens), or a documents column and its order, such as an input's quality "
        'score: ["quality desc", "newest"]. Nulls last. Each removed copy\'s keep_reason names the rule '
        "that decided and both values.",
        factory=lambda: list(DEFAULT_KEEP),
    )
    prefer_domains: list[str] = _setting(
        "cluster",
        "Domains whose copy a cluster keeps, first listed first, where keep names prefer_domains (the "
        'default keep puts it first, ahead of the newest crawled_at): e.g. ["original.com", '
        '"docs.example.org"]. An entry matches its subdomains too (example.com: www.example.com, '
        "news.example.com), regardless of case; unlisted domains come after every listed one.",
        factory=list,
    )
    reference: list[str] = _setting(
        "verify",
        "Corpora the input is deduplicated against, never removed or rewritten: inputs in any supported "
        "format (each fingerprinted once into an index beside the database, reused while it is as it "
        "was), or such an index (.duckdb). A document that matches one is removed, naming the "
        "reference document and the score (reference_matches). Empty: none.",
        factory=list,
    )
    auto_bands: bool = _setting(
        "lsh",
        "Choose the LSH bands and rows (bands x rows <= num_perm) that minimize the weighted "
        "false-positive and false-negative areas of the S-curve at jaccard_threshold; rows_per_band "
        "is then unused. The choice is in lineage, manifest.json (derived_settings) and the "
        "candidate_pairs metadata.",
        False,
    )
    false_negative_weight: float = _setting(
        "lsh",
        "With auto_bands: the weight of missed duplicates (the false-positive weight, extra "
        "candidates to verify, is 1 minus it). Higher: more recall, more candidates.",
        0.5,
    )
    warc_base_url: str = _setting(
        "ingest",
        "warc_ranges: the prefix a target's WARC filename is joined to: an http(s) URL, or a local "
        "folder (file:// or a path). The default is Common Crawl's public endpoint.",
        FetchSettings.base_url,
    )
    acknowledge_common_crawl_terms: bool = _setting(
        "ingest",
        "warc_ranges from Common Crawl's own endpoint: you accept its terms of use "
        "(https://commoncrawl.org/terms-of-use); without it such a run fails before fetching.",
        FetchSettings.acknowledge_common_crawl_terms,
    )
    fetch_concurrency: int = _setting("ingest", "warc_ranges: fetches at once.", FetchSettings.concurrency)
    fetch_retries: int = _setting(
        "ingest",
        "warc_ranges: retries of a fetch after a connection error, timeout, 429 or 5xx (exponential "
        "backoff with jitter).",
        FetchSettings.retries,
    )
    fetch_timeout_s: float = _setting(
        "ingest",
        "warc_ranges: seconds a fetch attempt may take in all, however slowly the bytes come (then "
        "it is retried).",
        FetchSettings.timeout_s,
    )
    fetch_cache: str | None = _setting(
        "ingest",
        "warc_ranges: a folder keeping fetched records, so a re-run fetches none again. Unset: env "
        "DEDUP_CACHE, else no cache.",
        FetchSettings.cache,
    )
    release_signatures: bool | None = _setting(
        "release",
        "Whether fingerprinted.parquet in the release carries the MinHash signatures (8 bytes x "
        f"num_perm per document). Unset: up to {SIGNATURES_RELEASED_UP_TO:,} documents. The "
        "database's fingerprinted table always has them.",
        None,
    )
    release_compression: ReleaseCompression = _setting(
        "release",
        "Codec of the release's Parquet files: zstd (level 1), about a third smaller than snappy on "
        "page text and 5-20% slower to write; snappy; none, the fastest to write and the largest.",
        DEFAULT_COMPRESSION,
    )
    releases_kept: int = _setting(
        "release",
        "Releases kept in the folder the output folder links to (.NAME.releases beside it), the "
        "current one among them; each batch's too. Older ones are removed when a release is "
        "published. A reader that resolved the output folder once reads its release whole while "
        "up to releases_kept - 1 newer ones are published.",
        RELEASES_KEPT,
    )
    preset: Preset | None = _setting(
        "lsh",
        "web: recall first, for web pages with light edits: num_perm 128, auto_bands and "
        "false_negative_weight 0.9 (20 bands of 6 rows at jaccard_threshold 0.7). It fills those of "
        "them left at their defaults; manifest.json (derived_settings.preset_settings) says what it set.",
        None,
    )

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
            "releases_kept": 1,
        }
        for name, minimum in minimums.items():
            value = getattr(self, name)
            if value is not None and value < minimum:
                raise SettingsError(f"{name} must be at least {minimum}, got {value}")
        for name, least in (("false_negative_weight", 0.0), ("min_recall", 0.0), ("ignore_shared_above", MIN_SHARE)):
            if getattr(self, name) is not None and not least <= getattr(self, name) <= 1.0:
                raise SettingsError(f"{name} must be between {least:g} and 1, got {getattr(self, name)}")
        try:  # stored as the keep rule compares them, so lineage and the index see one value per rule
            checked_passages(self.ignored_passages, self.shingle_size, self.shingle_unit)
            object.__setattr__(self, "prefer_domains", checked_domains(self.prefer_domains))
            object.__setattr__(self, "keep", [rule.entry for rule in self.keep_policy().rules])
        except ValueError as error:
            raise SettingsError(str(error)) from None
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise SettingsError(f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        if isinstance(self.reference, str) or not all(isinstance(r, str) and r.strip() for r in self.reference):
            raise SettingsError(f'reference must be a list of inputs, e.g. ["corpus.parquet"], got {self.reference!r}')
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
                self.hash_scheme, self.shingle_size, self.num_perm, rows, self.minhash_seed, bands, self.shingle_unit,
                self.shingling().ignored,
            )
        return SketchParams(
            self.hash_scheme, self.shingle_size, self.num_perm, self.rows_per_band, self.minhash_seed,
            shingle_unit=self.shingle_unit, ignored_shingles=self.shingling().ignored,
        )

    def shingling(self) -> Shingling:
        return Shingling(
            self.shingle_size, self.shingle_unit, passage_shingles(self.ignored_passages, self.shingle_size, self.shingle_unit)
        )

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
            self.cluster_mode, self.shingling(), self.jaccard_threshold, self.memory_budget_mb, self.keep_policy()
        )

    def keep_policy(self) -> KeepPolicy:
        return KeepPolicy.parse(self.keep, self.prefer_domains)

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
        return documents <= SIGNATURES_RELEASED_UP_TO if self.release_signatures is None else self.release_signatures

    def derived(self) -> dict:
        """The LSH bands in use: what rows_per_band, or auto_bands with the threshold, came to; and
        the size past which a bucket is left out of the join (None: such a bucket is refused);
        and the sketch scheme (``sketch/scheme.py``), with the versions of its hash and of the
        text rule. Recorded in lineage beside the settings (never in place of one)."""
        params = self.sketch_params()
        limit = self.max_bucket_size if self.hot_buckets == "skip" else None
        bands = {"bands": params.bands, "rows_in_use": params.rows_per_band}
        return {**bands, "hot_bucket_limit": limit, SKETCH_SCHEME: sketch_scheme({**self.as_dict(), **bands})}


_DEFAULTS = {item.name: item.default for item in fields(Settings) if item.default is not MISSING}
