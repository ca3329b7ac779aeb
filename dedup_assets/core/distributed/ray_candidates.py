"""The ray engine's ``candidate_pairs`` and ``first_copies`` on Daft (its Ray runner, on the run's
Ray session): copy groups, band buckets sized, refused or left out as hot as
``lsh/candidates.py`` does, and the pairs of each shared bucket's texts, in Daft's joins and
groupings."""

from __future__ import annotations

from pathlib import Path

import daft
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from daft import DataType, col, lit
from daft.functions import when

from ..lsh.bucket_kernels import bucket_pair_slots
from ..lsh.candidates import HOT_BUCKET_SCHEMA, BucketPressure, bucket_key, ensure_within_limits
from ..pipeline.step_params import PairLimits
from ..storage.store import TableBuild
from .daft_tables import frame, hash_joined, join_partitions, pair_ends, rows_among, scratch_folder, staged, write_frames
from .datasets import POSITION, read_table, table_rows
from .ray_tables import FIRST_COPIES_SCHEMA, PAIR_SCHEMA, RayTables, ordered_pairs

COPY_KEY = ["content_hash", "first_band_key"]
BAND = pa.struct([("band_index", pa.int16()), ("lsh_band", pa.uint64())])
BUCKET = ["band_index", "lsh_band"]
ID_PAIR = pa.struct([("left_doc_id", pa.large_string()), ("right_doc_id", pa.large_string())])


def _texts(tables: RayTables) -> daft.DataFrame:
    """Every document's position, content hash, first band key and band keys."""
    texts = frame(tables.root, "fingerprinted", ["doc_id", POSITION, "content_hash", "lsh_bands"])
    return texts.with_column("first_band_key", col("lsh_bands").get(0))


def _copies(texts: daft.DataFrame, scratch: Path, partitions: int) -> tuple[daft.DataFrame, daft.DataFrame]:
    """(groups: content_hash, first_band_key, copies of every copy group; copies: every copy
    that is not its group's first copy, with its first copy and band count), as
    ``sql/copy_groups.sql`` and the candidate query's ``copies``; both staged in ``scratch``,
    small beside the documents (a row per group, a row per further copy), and each read more
    than once; each join in ``partitions``."""
    groups = texts.groupby(*COPY_KEY).agg(col("doc_id").count().alias("copies"), col(POSITION).min().alias("first_position"))
    groups = staged(scratch, "copy_groups", groups.where(col("copies") > 1))
    # whether a member is its group's first copy, as a column: Daft 0.7.26 skips whole Parquet
    # files wrongly for a filter comparing two of their columns (docs/scale-out.md, "A Daft
    # filter that skips files")
    members = hash_joined(texts, groups, COPY_KEY, partitions).with_column("first", col(POSITION) == col("first_position"))
    members = staged(scratch, "copy_members", members)
    first = members.where(col("first")).select(*COPY_KEY, col("doc_id").alias("first_copy_doc_id"))
    copies = (
        hash_joined(members.where(~col("first")), first, COPY_KEY, partitions)
        .select("doc_id", "first_copy_doc_id", col("lsh_bands").length().cast(DataType.int32()).alias("bands"))
    )
    return groups.select(*COPY_KEY, "copies"), staged(scratch, "copies", copies)


@daft.func.batch(return_dtype=DataType.from_arrow_type(pa.list_(BAND)))
def _indexed(bands: daft.Series) -> pa.Array:
    """Each list of band keys as a list of (band_index, lsh_band). Not ``explode``'s
    index_column: Daft 0.7.26 pushes filters on it (a join's) below the explode, where it is
    not yet a column, and fails to plan."""
    lists = bands.to_arrow()
    lists = lists.combine_chunks() if isinstance(lists, pa.ChunkedArray) else lists
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    ends = np.cumsum(lengths)
    index = pa.array((np.arange(ends[-1] if len(ends) else 0) - np.repeat(ends - lengths, lengths)).astype(np.int16))
    # offsets of our own: the lists may come as fixed-size lists, or sliced
    offsets = pa.array(np.concatenate([[0], ends]).astype(np.int32))
    return pa.ListArray.from_arrays(offsets, pa.StructArray.from_arrays([index, pc.list_flatten(lists)], fields=list(BAND)))


def _band_rows(texts: daft.DataFrame, groups: daft.DataFrame, copies: daft.DataFrame, partitions: int) -> daft.DataFrame:
    """One row per (distinct text, band): doc_id, band_index, lsh_band and the text's copies.
    The distinct texts are those that are no group's further copy (``sql/bucket_keys.sql``);
    each join in ``partitions``."""
    distinct = hash_joined(texts, copies.select("doc_id"), "doc_id", partitions, how="anti")
    distinct = hash_joined(distinct, groups, COPY_KEY, partitions, how="left")
    bands = distinct.select("doc_id", col("copies").fill_null(1).cast(DataType.int64()).alias("copies"), _indexed(col("lsh_bands")).alias("band"))
    return bands.explode("band").select("doc_id", col("band").unnest(), "copies")


def _pressure(buckets: daft.DataFrame) -> BucketPressure:
    """The totals of ``lsh/candidates.py``'s ``band_buckets`` from the bucket rows (band_index,
    lsh_band, size in distinct texts, documents): the same slots, and the same largest bucket
    (the first band, then the smallest key, among equals)."""
    size, documents = col("size").cast(DataType.int64()), col("documents")
    # the kernel's own formula, on Daft's columns
    slots, published = bucket_pair_slots.py_func(size, documents)
    totals = buckets.agg(
        slots.sum().alias("slots"), published.sum().alias("published"), col("size").count().alias("buckets"), col("size").max().alias("largest")
    ).to_pylist()[0]
    if not totals["buckets"]:
        return BucketPressure(0, 0, None, 0, 0)
    largest = int(totals["largest"])
    worst = buckets.where(col("size") == largest).sort(BUCKET).limit(1).to_pylist()[0]
    key = bucket_key(int(worst["band_index"]), int(worst["lsh_band"]))
    return BucketPressure(int(totals["slots"]), largest, key, int(totals["buckets"]), int(totals["published"]))


def _hot(buckets: daft.DataFrame) -> pa.Table:
    """The hot buckets (``buckets`` over max_bucket_size) as ``lsh/candidates.py``'s
    ``band_buckets`` lists them (``HOT_BUCKET_SCHEMA``, band by band, key by key), gathered here: a
    band of n texts has at most n / (max_bucket_size + 1) of them."""
    hot = buckets.select(*BUCKET, "size", "documents").to_arrow()
    hot = hot.rename_columns(HOT_BUCKET_SCHEMA.names).cast(HOT_BUCKET_SCHEMA)
    return hot.sort_by([("band_index", "ascending"), ("lsh_band", "ascending")])


def _pairs(left: str, right: str, shared_bands: str, found_by: str) -> list[daft.Expression]:
    """A pair's columns, its ids in order."""
    swap = col(left) > col(right)
    return [
        when(swap, col(right)).otherwise(col(left)).alias("left_doc_id"),
        when(swap, col(left)).otherwise(col(right)).alias("right_doc_id"),
        col(shared_bands).cast(DataType.int32()).alias("shared_bands"),
        lit(found_by).alias("found_by"),
    ]


def bucket_pairs(lists: pa.Array | pa.ChunkedArray) -> pa.LargeListArray:
    """Every pair of each bucket's texts (a list of doc_ids per bucket), the smaller id first,
    as a list per bucket: the buckets of one size at a time, whose pairs are the same offsets
    from each bucket's start."""
    lists = lists.combine_chunks() if isinstance(lists, pa.ChunkedArray) else lists
    sizes = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    starts = np.cumsum(sizes) - sizes
    counts = sizes * (sizes - 1) // 2
    ends = np.cumsum(counts)
    total = int(ends[-1]) if len(ends) else 0
    left, right = np.empty(total, np.int64), np.empty(total, np.int64)
    for size in np.unique(sizes[sizes > 1]):
        buckets = np.flatnonzero(sizes == size)
        first, second = np.triu_indices(size, 1)
        # each bucket's pairs go after the pairs of the buckets before it
        at = (ends[buckets] - counts[buckets])[:, None] + np.arange(len(first))
        left[at] = starts[buckets][:, None] + first
        right[at] = starts[buckets][:, None] + second
    # the ids as the lists hold them, from the lists' first offset (a slice's lists start there)
    flat = pc.list_flatten(lists)
    ordered = ordered_pairs(flat.take(pa.array(left)), flat.take(pa.array(right)))
    offsets = pa.array(np.concatenate([[0], ends]).astype(np.int64))
    pairs = pa.StructArray.from_arrays([side.cast(pa.large_string()) for side in ordered], fields=list(ID_PAIR))
    return pa.LargeListArray.from_arrays(offsets, pairs)


@daft.func.batch(return_dtype=DataType.from_arrow_type(pa.large_list(ID_PAIR)))
def _bucket_pairs(ids: daft.Series) -> pa.Array:
    return bucket_pairs(ids.to_arrow())


def _shared_pairs(buckets: daft.DataFrame, limit: int) -> daft.DataFrame:
    """left_doc_id, right_doc_id and shared_bands of every pair of texts that share a bucket
    (of two texts or more, none hot): each bucket's pairs, counted over the buckets."""
    shared = buckets.where((col("size") > 1) & (col("size") <= limit))
    pairs = shared.select(_bucket_pairs(col("doc_ids")).alias("pair")).explode("pair").select(col("pair").unnest())
    return pairs.groupby("left_doc_id", "right_doc_id").agg(col("left_doc_id").count().alias("shared_bands"))


def _domains(candidates: daft.DataFrame, tables: RayTables, count: int, partitions: int) -> daft.DataFrame:
    """The ``count`` candidates with both documents' domains: the domains of their documents
    only (``rows_among``), so the documents stay where they lie; each join in ``partitions``."""
    # the candidates' ends as read, twice the candidates: a semi-join keeps a row once however
    # often its key comes, and making them distinct cost a grouping
    domains = rows_among(frame(tables.root, "documents", ["doc_id", "domain"]), pair_ends(candidates), "doc_id", 2 * count)
    for side in ("left", "right"):
        named = domains.select(col("doc_id").alias(f"{side}_doc_id"), col("domain").alias(f"{side}_domain"))
        candidates = hash_joined(candidates, named, f"{side}_doc_id", partitions)
    return candidates


def candidate_pairs(tables: RayTables, limits: PairLimits) -> tuple[TableBuild, BucketPressure, pa.Table]:
    """``candidate_pairs`` (and ``first_copies``, which verification and the audit read),
    refusing buckets over ``limits`` before any pair is made, or leaving them out (hot_buckets: skip),
    as ``lsh/candidates.py``'s ``build_candidate_pairs``; and the hot buckets
    (``HOT_BUCKET_SCHEMA``), which count in neither the pressure nor the join."""
    with scratch_folder(tables.root, "candidates") as scratch:
        return _candidate_pairs(tables, limits, scratch)


def _candidate_pairs(tables: RayTables, limits: PairLimits, scratch: Path) -> tuple[TableBuild, BucketPressure, pa.Table]:
    texts = _texts(tables)
    # every join hashed into two partitions a CPU (hash_joined), not one per Parquet file read (42
    # at 1M): the step at 1M on two one-CPU nodes 39.7–42.2 s (43–46 node CPU s) against
    # 64.9–94.4 s (93–96), gained mostly by the queries after, which read the tables staged from
    # the joins in 4 files, not 42 or more
    partitions = join_partitions()
    groups, copies = _copies(texts, scratch, partitions)
    rows = _band_rows(texts, groups, copies, partitions)
    # each bucket once, with its texts: its size and its pairs come from one grouping (collected:
    # kept in the cluster's object store, read four times), the texts kept where there are two
    # or more (most buckets hold one)
    buckets = rows.groupby(*BUCKET).agg(
        col("doc_id").count().alias("size"), col("copies").sum().alias("documents"), col("doc_id").list_agg().alias("doc_ids")
    )
    buckets = buckets.with_column("doc_ids", when(col("size") > 1, col("doc_ids")).otherwise(lit(None))).collect()
    limit = limits.max_bucket_size
    hot = _hot(buckets.where(col("size") > limit))
    pressure = _pressure(buckets.where(col("size") <= limit))
    ensure_within_limits(pressure, limits, hot)
    # after the refusal, which leaves the tables as they were
    write_frames(tables.root, "first_copies", [copies], FIRST_COPIES_SCHEMA)

    joined = staged(scratch, "shared_pairs", _shared_pairs(buckets, limit))
    found = [joined.select(*_pairs("left_doc_id", "right_doc_id", "shared_bands", "lsh"))]
    for side, other in (("left", "right"), ("right", "left")):
        # each further copy of a pair's document, paired with the pair's other document
        further = copies.select(col("doc_id").alias("copy_doc_id"), col("first_copy_doc_id").alias(f"{side}_doc_id"))
        via_copy = hash_joined(joined, further, f"{side}_doc_id", partitions)
        found.append(via_copy.select(*_pairs("copy_doc_id", f"{other}_doc_id", "shared_bands", "lsh_via_copy")))
    found.append(copies.select(*_pairs("first_copy_doc_id", "doc_id", "bands", "content_hash")))
    # staged: the domains' lookup reads their ids, then joins them
    candidates = staged(scratch, "candidates", found[0].concat(found[1]).concat(found[2]).concat(found[3]))
    domains = _domains(candidates, tables, table_rows(scratch, "candidates"), partitions)
    write_frames(tables.root, "candidate_pairs", [domains.select(*PAIR_SCHEMA.names)], PAIR_SCHEMA)
    return tables.view("candidate_pairs"), pressure, hot


def first_copies(tables: RayTables) -> pa.Table:
    """Each exact copy and its first copy, as ``verify/pairs.py``'s ``first_copies`` gives them."""
    return read_table(tables.root, "first_copies")
