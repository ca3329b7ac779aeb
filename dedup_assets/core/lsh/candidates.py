"""LSH banding: band memberships, bucket pressure and the pair-slot budget, and the candidate
pairs of documents that share a band.

A bucket is one band key of one band; a pair of documents in the same bucket is a candidate.
Documents of one normalized text form a copy group (``sql/copy_groups.sql``; without a token, of one
trimmed body: ``sketch/fingerprints.py``'s ``tokenless_keys``).
Only its first copy (the first in input order) is paired by LSH; every other copy is paired with
the first directly (``found_by`` ``content_hash``) and with each of its LSH partners
(``lsh_via_copy``). So a page copied a million times costs a million rows and no pair slots, not
5e11 join rows. The pairs within a copy group of n documents are a star (n - 1 of the n(n-1)/2),
and between two copy groups of a and b documents that are near duplicates, each document is
paired with the other group's first copy (a + b - 1 of the a*b; all of them when either group is
one document): a spanning set, which gives the same clusters as every pair would.

Before pairing, the buckets are sized: a bucket of k distinct texts yields k(k-1)/2 join
rows, so shared boilerplate can make the join explode. The budget and the bucket-size limit
refuse that with the worst bucket's name instead of exhausting memory.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .bucket_kernels import bucket_pairs_kernel, bucket_pressure_kernel
from ..util.errors import DedupError
from ..settings.choices import PAIR_SLOT_BYTES
from ..pipeline.step_params import PairLimits
from ..sketch.fingerprints import list_matrix
from ..storage.store import TableBuild
from ..storage.tables import Tables, sql


# how a candidate pair was found (the module docstring says what each means)
FOUND_BY = ("lsh", "content_hash", "lsh_via_copy")


class PairBudgetExceeded(DedupError, RuntimeError):
    """The band buckets would create more pair rows, or hold more distinct texts, than the
    configured limits allow."""


@dataclass(frozen=True)
class BucketPressure:
    pair_slots: int  # what the join costs: exact copies grouped first (``bucket_kernels.bucket_pair_slots``)
    largest_bucket_size: int
    largest_bucket_key: str | None
    bucket_count: int
    document_pair_slots: int  # the published figure: every two documents sharing a bucket, per band

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


# the columns of hot_buckets: buckets the join leaves out under hot_buckets: skip
HOT_BUCKET_SCHEMA = pa.schema(
    [
        ("band_index", pa.int16()),
        ("lsh_band", pa.uint64()),
        ("texts", pa.int64()),
        ("documents", pa.int64()),
    ]
)
HOT_BUCKET_ROWS_SCHEMA = pa.schema(
    [
        *list(HOT_BUCKET_SCHEMA)[:2],
        ("bucket_key", pa.string()),
        *list(HOT_BUCKET_SCHEMA)[2:],
        ("example_doc_ids", pa.list_(pa.string())),
    ]
)


@dataclass(frozen=True)
class SharedBuckets:
    """The distinct texts in the shared buckets of each band (``bucket_kernels``), from which
    their pairs are made once the buckets are admitted."""

    doc_ids: pa.Array  # each text's document: its first copy, or the document itself
    bands: np.ndarray  # each text's band keys, a row per text
    members: tuple  # bucket_pressure_kernel's (members, member_counts, pairs)

    def pairs(self) -> pa.Table:
        """``lsh_pairs`` of ``sql/candidate_pairs.sql``: every two texts that share a bucket, by
        doc_id, and the number of bands in which they do."""
        left, right, shared = bucket_pairs_kernel(self.bands, *self.members)
        return pa.table(
            {
                "left_doc_id": self.doc_ids.take(pa.array(left)),
                "right_doc_id": self.doc_ids.take(pa.array(right)),
                "shared_bands": pa.array(shared, pa.int32()),
            }
        )


def band_buckets(
    connection: duckdb.DuckDBPyConnection, tables: Tables, groups: pa.Table, max_bucket_size: int
) -> tuple[BucketPressure, SharedBuckets, pa.Table]:
    """The bucket pressure, the shared buckets (every bucket with two distinct texts or more)
    and the hot buckets (more than ``max_bucket_size`` distinct texts, ``HOT_BUCKET_SCHEMA``),
    from the band keys of each distinct text that band_memberships holds, given its ``copy_groups``. Hot buckets count in neither the pressure nor the
    shared buckets."""
    connection.register("copy_groups", groups)
    try:
        keys = connection.sql(sql("bucket_keys", tables)).to_arrow_table()
    finally:
        connection.unregister("copy_groups")
    if keys.num_rows > np.iinfo(np.int32).max:  # the kernel numbers the texts in 32 bits
        raise DedupError(f"{keys.num_rows:,} distinct texts are more than one run can band; split the input")
    bands = list_matrix(keys.column("lsh_bands"))
    slots, published, largest, largest_keys, buckets, members, hot = bucket_pressure_kernel(
        bands, keys.column("copies").to_numpy(), max_bucket_size
    )
    shared = SharedBuckets(keys.column("doc_id").combine_chunks(), bands, members)
    hot_keys, hot_sizes, hot_documents, hot_counts = hot
    hot_buckets = pa.table(
        [
            _band_indexes(hot_counts),
            _per_band(hot_keys, hot_counts, np.uint64),
            _per_band(hot_sizes, hot_counts, np.int64),
            _per_band(hot_documents, hot_counts, np.int64),
        ],
        schema=HOT_BUCKET_SCHEMA,
    )
    if not len(largest) or largest.max() == 0:
        return BucketPressure(0, 0, None, 0, 0), shared, hot_buckets
    worst = int(np.argmax(largest))  # the first band among equals
    pressure = BucketPressure(
        int(slots.sum()), int(largest[worst]), bucket_key(worst, int(largest_keys[worst])), int(buckets.sum()),
        int(published.sum()),
    )
    return pressure, shared, hot_buckets


def _band_indexes(counts: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(len(counts), dtype=np.int16), counts)


def _per_band(values: np.ndarray, counts: np.ndarray, dtype) -> np.ndarray:
    """Band b's first ``counts[b]`` values (row b of ``values``), band after band."""
    return np.concatenate([values[band, :count] for band, count in enumerate(counts)] or [np.zeros(0, dtype)])


def bucket_pressure(connection: duckdb.DuckDBPyConnection, tables: Tables) -> BucketPressure:
    """The pressure of every bucket, none left out as hot."""
    return band_buckets(connection, tables, copy_groups(connection, tables), _NONE_HOT)[0]


# a bucket size no bucket exceeds: bucket_pressure_kernel's "none is hot"
_NONE_HOT = np.iinfo(np.int64).max


def bucket_key(band_index: int, lsh_band: int) -> str:
    """How a bucket is named in messages and files: its band, then its key in hex."""
    return f"{band_index:03d}:{lsh_band:016x}"


def ensure_within_limits(pressure: BucketPressure, limits: PairLimits, hot: pa.Table | None = None) -> None:
    """Refuse buckets the candidate step should not join, saying what to change. Exact copies
    are folded before buckets are sized, so what remains are near duplicates. ``hot``: the
    buckets over max_bucket_size (``HOT_BUCKET_SCHEMA``), refused unless hot_buckets: skip
    leaves them out."""
    advice = (
        "Strip boilerplate (navigation, cookie notices, footers) before deduplicating, or raise "
        "rows_per_band (with auto_bands: lower false_negative_weight) so that sharing a bucket takes "
        "more equal signature values"
    )
    largest_size, largest_key = pressure.largest_bucket_size, pressure.largest_bucket_key
    hot_count = 0 if hot is None else hot.num_rows
    if hot_count:  # the largest hot bucket: the first band, then the smallest key, among equals
        worst = pc.index(hot["texts"], pc.max(hot["texts"])).as_py()
        largest_size = hot["texts"][worst].as_py()
        largest_key = bucket_key(hot["band_index"][worst].as_py(), hot["lsh_band"][worst].as_py())
    if largest_size > limits.max_bucket_size and not limits.skip_hot_buckets:
        others = f" ({hot_count:,} buckets in all are over it)" if hot_count > 1 else ""
        raise PairBudgetExceeded(
            f"LSH bucket {largest_key} holds {largest_size:,} "
            f"different texts, above max_bucket_size={limits.max_bucket_size:,}{others}: every two of "
            "them would be paired and scored. So many different pages in one bucket are near "
            f"duplicates, usually through shared boilerplate or a template. {advice}; raise "
            "max_bucket_size if they are near duplicates you want clustered; or, in a one-shot run, "
            "set hot_buckets: skip to leave such buckets out of the join (the "
            "release lists each one, and the recall audit measures what leaving them out cost)."
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
) -> tuple[TableBuild, BucketPressure, pa.Table]:
    """Refuses, before pairing, a corpus whose buckets exceed ``limits``; the pairs are then
    made from the texts of the shared buckets the sizing kept, usually a small share of all band
    rows. Also the hot buckets it left out (``hot_bucket_rows``), none unless hot_buckets: skip."""
    groups = copy_groups(connection, tables)
    pressure, shared, hot = band_buckets(connection, tables, groups, limits.max_bucket_size)
    ensure_within_limits(pressure, limits, hot)
    build = TableBuild(
        sql=sql("candidate_pairs", tables),
        arrow_inputs={"lsh_pairs": shared.pairs(), "copy_groups": groups},
    )
    return build, pressure, hot_bucket_rows(connection, tables, hot)


def hot_buckets_build(rows: pa.Table) -> TableBuild:
    """The ``hot_buckets`` table from :func:`hot_bucket_rows`."""
    return TableBuild(sql="select * from hot_bucket_rows", arrow_inputs={"hot_bucket_rows": rows})


def hot_bucket_rows(connection: duckdb.DuckDBPyConnection, tables: Tables, hot: pa.Table) -> pa.Table:
    """The hot buckets as the ``hot_buckets`` table lists them: key, texts, documents and the
    first doc_ids in it (``sql/hot_buckets.sql``); none read when there are none."""
    if not hot.num_rows:
        return HOT_BUCKET_ROWS_SCHEMA.empty_table()
    connection.register("hot", hot)
    try:
        return connection.sql(sql("hot_buckets", tables)).to_arrow_table().cast(HOT_BUCKET_ROWS_SCHEMA)
    finally:
        connection.unregister("hot")
