"""LSH banding: band memberships, bucket pressure and the pair-slot budget, and the candidate
pairs of documents that share a band.

A bucket is one band key of one band; a pair of documents in the same bucket is a candidate.
Before the self-join, the buckets are sized: a bucket of n documents yields n(n-1)/2 join rows,
so shared boilerplate or near-empty pages can make the join explode. The budget refuses that
with the worst bucket's name instead of exhausting memory.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import duckdb
import numpy as np
import pyarrow as pa

from . import kernels
from .sketch import list_matrix
from .store import TableBuild
from .tables import Tables, sql


class PairBudgetExceeded(RuntimeError):
    """The band buckets would create more self-join rows than the configured budget allows."""


def lsh_probability(similarity: float, bands: int, rows_per_band: int) -> float:
    """Chance that a pair with Jaccard ``similarity`` shares at least one band: 1-(1-s^r)^b."""
    return 1.0 - (1.0 - similarity**rows_per_band) ** bands


@dataclass(frozen=True)
class BucketPressure:
    pair_slots: int
    largest_bucket_size: int
    largest_bucket_key: str | None
    bucket_count: int

    # Carried in candidate_pairs' lineage, so that the release reports the figures the join was
    # admitted with instead of sizing every bucket a second time.
    LINEAGE_PREFIX = "lsh_"

    def as_lineage(self) -> dict:
        return {f"{self.LINEAGE_PREFIX}{name}": value for name, value in asdict(self).items()}

    @classmethod
    def from_lineage(cls, lineage: dict) -> BucketPressure | None:
        """The figures recorded by :meth:`as_lineage`; None for tables built before they were."""
        names = [f"{cls.LINEAGE_PREFIX}{field.name}" for field in fields(cls)]
        if not all(name in lineage for name in names):
            return None
        return cls(*(lineage[name] for name in names))


def build_band_memberships(tables: Tables) -> TableBuild:
    """A view: unnesting the band keys where they are read costs less than storing them again."""
    return TableBuild(sql=sql("band_memberships", tables), view=True)


def band_buckets(connection: duckdb.DuckDBPyConnection, tables: Tables) -> tuple[BucketPressure, pa.Table]:
    """The bucket pressure and the shared buckets (``band_index``, ``lsh_band`` of every bucket
    with two documents or more), from the band keys of the documents band_memberships holds
    (those with shingles)."""
    keys = connection.sql(
        f"select lsh_bands from {tables.fingerprinted} where shingle_count > 0"
    ).to_arrow_table()
    slots, largest, largest_keys, buckets, shared, shared_counts = kernels.bucket_pressure_kernel(
        list_matrix(keys.column(0))
    )
    shared_buckets = pa.table(
        {
            "band_index": np.repeat(np.arange(len(shared_counts), dtype=np.int16), shared_counts),
            "lsh_band": np.concatenate(
                [shared[band, :count] for band, count in enumerate(shared_counts)] or [np.zeros(0, np.uint64)]
            ),
        }
    )
    if not len(largest) or largest.max() == 0:
        return BucketPressure(0, 0, None, 0), shared_buckets
    worst = int(np.argmax(largest))  # the first band among equals
    pressure = BucketPressure(
        int(slots.sum()), int(largest[worst]), f"{worst:03d}:{int(largest_keys[worst]):016x}", int(buckets.sum())
    )
    return pressure, shared_buckets


def bucket_pressure(connection: duckdb.DuckDBPyConnection, tables: Tables) -> BucketPressure:
    return band_buckets(connection, tables)[0]


def ensure_within_budget(pressure: BucketPressure, max_pair_slots: int) -> None:
    if pressure.pair_slots > max_pair_slots:
        raise PairBudgetExceeded(
            f"LSH buckets would create {pressure.pair_slots:,} band-level pair slots, above "
            f"max_pair_slots={max_pair_slots:,}. The worst bucket is {pressure.largest_bucket_key} "
            f"with {pressure.largest_bucket_size:,} documents (likely shared boilerplate or "
            "near-empty pages). Strip that boilerplate, raise rows_per_band to make buckets "
            "stricter, or raise max_pair_slots if you have the memory."
        )


def build_candidate_pairs(
    connection: duckdb.DuckDBPyConnection, tables: Tables, max_pair_slots: int
) -> tuple[TableBuild, BucketPressure]:
    """Refuses, before joining, a corpus whose buckets exceed ``max_pair_slots``; the join then
    reads only the band rows of shared buckets, usually a small share of all buckets."""
    pressure, shared_buckets = band_buckets(connection, tables)
    ensure_within_budget(pressure, max_pair_slots)
    build = TableBuild(sql=sql("candidate_pairs", tables), arrow_inputs={"shared_buckets": shared_buckets})
    return build, pressure
