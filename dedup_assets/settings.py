"""The single typed source of truth for algorithm settings and file locations."""

from __future__ import annotations

import os
from pathlib import Path

from dagster import ConfigurableResource
from pydantic import Field

from .core.fingerprint import SketchParams
from .core.settings import DEFAULT_BATCH_SIZE, InputPolicy
from .core.verify import Thresholds

DEFAULT_INPUT = "data/documents.csv"
DEFAULT_DATABASE = "var/dedup_assets.duckdb"
DEFAULT_OUTPUT_DIR = "output"

ALGORITHM_SETTINGS = (
    "hash_scheme",
    "shingle_size",
    "num_perm",
    "rows_per_band",
    "minhash_seed",
    "jaccard_threshold",
    "signature_overlap_threshold",
    "max_pair_slots",
    "memory_budget_mb",
    "batch_size",
    "max_body_bytes",
    "fail_on_reject",
    "jsonl_fields",
    "source_format",
)


def env_path(variable: str, default: str) -> str:
    """An absolute path from an environment variable; relative paths resolve against the cwd."""
    return str(Path(os.environ.get(variable) or default).expanduser().resolve())


class DedupSettings(ConfigurableResource):
    """Algorithm settings and file locations for one run (resource key ``dedup``)."""

    hash_scheme: str = Field(
        default="fss",
        description="fss: compiled 64-bit shingle hashes + Fast Similarity Sketch (fast); "
        "blake2b: the published MinHash definition, bit for bit (slow, for reference).",
    )
    shingle_size: int = Field(default=5, description="Tokens per shingle.")
    num_perm: int = Field(default=64, description="MinHash values per signature.")
    rows_per_band: int = Field(default=8, description="Signature values per LSH band.")
    minhash_seed: int = Field(default=42, description="Seed of MinHash coordinate 0.")
    jaccard_threshold: float = Field(
        default=0.7, description="Exact shingle Jaccard at or above which a pair is a duplicate."
    )
    signature_overlap_threshold: float = Field(
        default=0.7, description="Signature overlap reported as a MinHash match (diagnostic only)."
    )
    max_pair_slots: int = Field(
        default=1_000_000,
        description="Refuse the LSH self-join when its buckets would create more pair rows.",
    )
    memory_budget_mb: int = Field(
        default=3072,
        description="Refuse a verification whose estimated shingle sets exceed this many MB.",
    )
    batch_size: int = Field(
        default=DEFAULT_BATCH_SIZE, description="Documents per streamed batch (memory follows this)."
    )
    max_body_bytes: int = Field(
        default=10_000_000, description="Reject a document whose body has more UTF-8 bytes."
    )
    fail_on_reject: bool = Field(
        default=False,
        description="Fail the run on the first input row that would be rejected, instead of "
        "recording it in rejected_documents.",
    )
    source_format: str | None = Field(
        default=None,
        description="csv, parquet, jsonl or warc for every input file; unset: by file extension.",
    )
    jsonl_fields: dict[str, str] = Field(
        default_factory=dict,
        description="JSONL only: our column -> the JSON field that fills it. Defaults: doc_id<-id, "
        "body<-text, url<-url, title<-title, crawled_at<-timestamp, domain<-domain (else the "
        "url's host), source<-source (else 'jsonl').",
    )
    input_path: str | None = Field(
        default=None,
        description=f"CSV or Parquet input. Unset: env DEDUP_INPUT, else {DEFAULT_INPUT}.",
    )
    output_dir: str | None = Field(
        default=None,
        description=f"Folder for release files. Unset: env DEDUP_OUTPUT_DIR, else {DEFAULT_OUTPUT_DIR}.",
    )

    def sketch_params(self) -> SketchParams:
        return SketchParams(
            hash_scheme=self.hash_scheme,
            shingle_size=self.shingle_size,
            num_perm=self.num_perm,
            rows_per_band=self.rows_per_band,
            minhash_seed=self.minhash_seed,
        )

    def thresholds(self) -> Thresholds:
        return Thresholds(
            jaccard=self.jaccard_threshold, signature_overlap=self.signature_overlap_threshold
        )

    def algorithm_settings(self) -> dict:
        return {name: getattr(self, name) for name in ALGORITHM_SETTINGS}

    def input_policy(self) -> InputPolicy:
        return InputPolicy(
            max_body_bytes=self.max_body_bytes,
            fail_on_reject=self.fail_on_reject,
            jsonl_fields=dict(self.jsonl_fields),
            source_format=self.source_format,
        )

    def input_file(self) -> Path:
        return Path(self.input_path or env_path("DEDUP_INPUT", DEFAULT_INPUT))

    def output_folder(self) -> Path:
        return Path(self.output_dir or env_path("DEDUP_OUTPUT_DIR", DEFAULT_OUTPUT_DIR))

    def current_values(self) -> dict:
        """Every setting that can appear in a table's lineage."""
        return {**self.algorithm_settings(), "input_path": str(self.input_file())}
