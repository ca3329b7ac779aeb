"""Where the ray engine runs, and how its joins and groupings shuffle, chosen from the corpus and
the cluster. Nothing here imports Ray: the settings and the Dagster layer read it without it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

PARTITION_BYTES = 128 * 2**20  # of the documents table's Parquet files, per shuffle partition
Shuffle = Literal["auto", "object_store", "disk"]
SHUFFLES: tuple[str, ...] = get_args(Shuffle)


@dataclass(frozen=True)
class ClusterOptions:
    """Where an engine that runs on a cluster runs and keeps its tables (the Dagster layer's
    ``engine`` resource says what each means); the duckdb engine reads none of it."""

    address: str | None = None  # unset: env DEDUP_RAY_ADDRESS, else a Ray started for the run
    dataset_root: str | None = None  # unset: env DEDUP_DATASETS, else <database>.datasets
    shuffle_partitions: int = 0  # 0: from the cluster's CPUs and the documents' size
    shuffle: Shuffle = "auto"
    components_on_driver_up_to_edges: int = 5_000_000
    stall_timeout_s: float = 300.0  # a Daft query with no progress this long fails; 0: never


@dataclass(frozen=True)
class ShufflePlan:
    disk: bool  # Daft's flight shuffle (files on each node's disk) instead of the object store
    partitions: int


def shuffle_plan(shuffle: str, partitions: int, documents_bytes: int, cpus: int, object_store_bytes: int) -> ShufflePlan:
    """``shuffle`` (auto, object_store or disk) and ``partitions`` (0: automatic) as configured,
    for a documents table of ``documents_bytes`` on a cluster of ``cpus`` and
    ``object_store_bytes``. auto shuffles through disk (Daft's flight shuffle) when the documents
    outgrow the object store, which would spill to disk anyway;
    automatic partitions keep each partition's share of the documents near PARTITION_BYTES, and
    give every CPU two."""
    if shuffle not in SHUFFLES:
        raise ValueError(f"shuffle must be one of {', '.join(SHUFFLES)}, not {shuffle!r}")
    disk = shuffle == "disk" or (shuffle == "auto" and documents_bytes > object_store_bytes)
    return ShufflePlan(disk, partitions or max(2 * cpus, -(-documents_bytes // PARTITION_BYTES)))
