"""LSH banding: band memberships, bucket pressure and the pair-slot budget, and the candidate
pairs of documents that share a band.

A bucket is one band key of one band; a pair of documents in the same bucket is a candidate.
Documents with shingles and one normalized text form a copy group (``sql/copy_groups.sql``).
Only its first copy (the first in input order) enters the self-join; every other copy is paired with
the first directly (``found_by`` ``content_hash``) and with each of its LSH partners
(``lsh_via_copy``). So a page copied a million times costs a million rows and no pair slots, not
5e11 join rows. The pairs within a copy group of n documents are a star (n - 1 of the n(n-1)/2),
and between two copy groups of a and b documents that are near duplicates, each document is
paired with the other group's first copy (a + b - 1 of the a*b; all of them when either group is
one document): a spanning set, which gives the same clusters as every pair would.

Before the self-join, the buckets are sized: a bucket of k distinct texts yields k(k-1)/2 join
rows, so shared boilerplate can make the join explode. The budget and the bucket-size limit
refuse that with the worst bucket's name instead of exhausting memory.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import duckdb
import numpy as np
import pyarrow as pa

from . import kernels
from .settings import PAIR_SLOT_BYTES, PairLimits
from .sketch import list_matrix
from .store import TableBuild
from .tables import Tables, sql


# how a candidate pair was found (the module docstring says what each means)
FOUND_BY = ("lsh", "content_hash", "lsh_via_copy")


class PairBudgetExceeded(RuntimeError):
    """The band buckets would create more pair rows, or hold more distinct texts, than the
    configured limits allow."""


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


def copy_groups(connection: duckdb.DuckDBPyConnection, tables: Tables) -> pa.Table:
    """One row per group of two or more exact copies (``sql/copy_groups.sql``)."""
    return connection.sql(sql("copy_groups", tables)).to_arrow_table()


def band_buckets(
    connection: duckdb.DuckDBPyConnection, tables: Tables, groups: pa.Table
) -> tuple[BucketPressure, pa.Table]:
    """The bucket pressure and the shared buckets (``band_index``, ``lsh_band`` of every bucket
    with two distinct texts or more), from the band keys of each distinct text that
    band_memberships holds (documents with shingles), given its ``copy_groups``."""
    connection.register("copy_groups", groups)
    try:
        keys = connection.sql(sql("bucket_keys", tables)).to_arrow_table()
    finally:
        connection.unregister("copy_groups")
    slots, largest, largest_keys, buckets, shared, shared_counts = kernels.bucket_pressure_kernel(
        list_matrix(keys.column("lsh_bands")), keys.column("copies").to_numpy()
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
    return band_buckets(connection, tables, copy_groups(connection, tables))[0]


def ensure_within_limits(pressure: BucketPressure, limits: PairLimits) -> None:
    """Refuse buckets the candidate step should not join, saying what to change. Exact copies
    are folded before buckets are sized, so what remains are near duplicates."""
    advice = (
        "Strip boilerplate (navigation, cookie notices, footers) before deduplicating, or raise "
        "rows_per_band (with auto_bands: lower false_negative_weight) so that sharing a bucket takes "
        "more equal signature values"
    )
    if pressure.largest_bucket_size > limits.max_bucket_size:
        raise PairBudgetExceeded(
            f"LSH bucket {pressure.largest_bucket_key} holds {pressure.largest_bucket_size:,} "
            f"different texts, above max_bucket_size={limits.max_bucket_size:,}: every two of them "
            "would be paired and scored. So many different pages in one bucket are near "
            f"duplicates, usually through shared boilerplate or a template. {advice}; raise "
            "max_bucket_size if they are near duplicates you want clustered."
        )
    if pressure.pair_slots > limits.max_pair_slots:
        budget = f"max_pair_slots={limits.max_pair_slots:,}"
        if limits.memory_budget_mb is not None:
            budget += (
                f" (what memory_budget_mb={limits.memory_budget_mb:,} holds at {PAIR_SLOT_BYTES} "
                "bytes a slot)"
            )
        raise PairBudgetExceeded(
            f"LSH buckets would create {pressure.pair_slots:,} band-level pair slots, above {budget}. "
            f"The largest bucket is {pressure.largest_bucket_key} with {pressure.largest_bucket_size:,} "
            "different texts (exact copies are folded into one text and add slots only where that "
            f"text shares a bucket). {advice}; or raise memory_budget_mb, or set max_pair_slots, "
            "if the machine has the memory."
        )


def build_candidate_pairs(
    connection: duckdb.DuckDBPyConnection, tables: Tables, limits: PairLimits
) -> tuple[TableBuild, BucketPressure]:
    """Refuses, before joining, a corpus whose buckets exceed ``limits``; the join then reads
    only the band rows of first copies in shared buckets, usually a small share of all band
    rows."""
    groups = copy_groups(connection, tables)
    pressure, shared_buckets = band_buckets(connection, tables, groups)
    ensure_within_limits(pressure, limits)
    build = TableBuild(
        sql=sql("candidate_pairs", tables),
        arrow_inputs={"shared_buckets": shared_buckets, "copy_groups": groups},
    )
    return build, pressure
