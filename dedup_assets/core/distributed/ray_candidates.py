"""The ray engine's ``candidate_pairs`` and ``first_copies``: copy groups, band buckets sized,
refused or left out as hot as ``lsh/candidates.py`` does, and the band self-join, in Ray Data shuffles."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray
import ray.data
from ray.data.aggregate import Count, Min, Sum

from ..lsh.bucket_kernels import bucket_pair_slots
from ..lsh.candidates import HOT_BUCKET_SCHEMA, BucketPressure, ensure_within_limits
from ..pipeline.step_params import PairLimits
from ..sketch.fingerprints import list_matrix
from ..storage.store import TableBuild
from .datasets import (
    POSITION,
    read_table,
)
from .ray_tables import (
    FIRST_COPIES_SCHEMA,
    PAIR_SCHEMA,
    RayTables,
    arrow_map,
    kept,
    ordered_pairs,
    renamed,
)


def _texts(tables: RayTables) -> ray.data.Dataset:
    """Every document's position, content hash, first band key and band keys."""

    def keyed(batch: pa.Table) -> pa.Table:
        return pa.table(
            {
                "doc_id": batch["doc_id"],
                POSITION: batch[POSITION],
                "content_hash": batch["content_hash"],
                "first_band_key": pc.list_element(batch["lsh_bands"], 0),
                "lsh_bands": batch["lsh_bands"],
            }
        )

    return arrow_map(tables.read("fingerprinted", ["doc_id", POSITION, "content_hash", "lsh_bands"]), keyed)


def _copies(texts: ray.data.Dataset, partitions: int) -> tuple[ray.data.Dataset | None, ray.data.Dataset | None]:
    """(groups: content_hash, first_band_key, copies of every copy group; copies: every copy
    that is not its group's first copy, with its first copy and band count), as
    ``sql/copy_groups.sql`` and the candidate query's ``copies``; (None, None) when no text has
    two copies."""
    key = ("content_hash", "first_band_key")
    counted = texts.groupby(list(key), num_partitions=partitions).aggregate(
        Count(alias_name="copies"), Min(POSITION, alias_name="first_position")
    )
    groups = kept(counted, lambda b: pc.greater(b["copies"], 1)).materialize()
    if not groups.count():
        return None, None
    members = texts.select_columns(["doc_id", POSITION, *key, "lsh_bands"]).join(
        groups, "inner", partitions, on=key
    )
    first = arrow_map(
        kept(members, lambda b: pc.equal(b[POSITION], b["first_position"])),
        lambda batch: pa.table({"content_hash": batch["content_hash"], "first_band_key": batch["first_band_key"], "first_copy_doc_id": batch["doc_id"]}),
    )
    copies = arrow_map(
        kept(members, lambda b: pc.not_equal(b[POSITION], b["first_position"])).join(first, "inner", partitions, on=key),
        lambda batch: pa.table(
            {
                "doc_id": batch["doc_id"],
                "first_copy_doc_id": batch["first_copy_doc_id"],
                "bands": pc.cast(pc.list_value_length(batch["lsh_bands"]), pa.int32()),
            }
        ),
    ).materialize()
    return groups, copies


def _band_rows(distinct: ray.data.Dataset) -> ray.data.Dataset:
    """One row per (distinct text, band): doc_id, band_index, lsh_band and the text's copies."""

    def explode(batch: pa.Table) -> pa.Table:
        keys = list_matrix(batch["lsh_bands"])
        rows, bands = keys.shape
        return pa.table(
            {
                "doc_id": pc.take(batch["doc_id"], pa.array(np.repeat(np.arange(rows), bands))),
                "band_index": pa.array(np.tile(np.arange(bands, dtype=np.int16), rows)),
                "lsh_band": pa.array(keys.ravel()),
                "copies": pa.array(np.repeat(batch["copies"].to_numpy(), bands)),
            }
        )

    return arrow_map(distinct, explode)


def _pressure(buckets: ray.data.Dataset) -> BucketPressure:
    """The totals of ``lsh/candidates.py``'s ``band_buckets`` from the bucket rows (band_index, lsh_band, size in
    distinct texts, documents): the same slots, and the same largest bucket (the first band,
    then the smallest key, among equals)."""
    bucket_count = buckets.count()
    if bucket_count == 0:
        return BucketPressure(0, 0, None, 0, 0)

    def bucket_slots(batch: pa.Table) -> pa.Table:
        joined, every_two = bucket_pair_slots(
            batch["size"].to_numpy().astype(np.int64), batch["documents"].to_numpy().astype(np.int64)
        )
        return pa.table({"slots": joined, "published": every_two})

    slots = arrow_map(buckets, bucket_slots)
    slots, published = slots.sum("slots"), slots.sum("published")
    largest = buckets.max("size")
    worst = buckets.filter(expr=f"size == {int(largest)}")
    band = worst.min("band_index")
    # Ray's global min turns uint64 values above 2**63 into Python objects it cannot compare:
    # each block's smallest key comes back, and the smallest of those is taken here
    keys = arrow_map(
        worst.filter(expr=f"band_index == {int(band)}").select_columns(["lsh_band"]),
        lambda batch: pa.table({"lsh_band": pa.array([pc.min(batch["lsh_band"]).as_py()], pa.uint64())}),
    ).take_all()
    key = min(row["lsh_band"] for row in keys)
    return BucketPressure(
        int(slots), int(largest), f"{int(band):03d}:{int(key):016x}", int(bucket_count), int(published)
    )


def _hot(buckets: ray.data.Dataset) -> pa.Table:
    """The hot buckets (``buckets`` over max_bucket_size) as ``lsh/candidates.py``'s ``band_buckets`` lists them
    (``HOT_BUCKET_SCHEMA``, band by band, key by key), gathered here: a band of n texts has at
    most n / (max_bucket_size + 1) of them."""
    buckets = buckets.materialize()
    if not buckets.count():
        return HOT_BUCKET_SCHEMA.empty_table()
    # by blocks, not rows: Ray turns uint64 keys above 2**63 into Python objects
    hot = pa.concat_tables(
        block.select(["band_index", "lsh_band", "size", "documents"]).rename_columns(HOT_BUCKET_SCHEMA.names).cast(HOT_BUCKET_SCHEMA)
        for block in ray.get(buckets.to_arrow_refs())
        if block.num_rows
    )
    return hot.sort_by([("band_index", "ascending"), ("lsh_band", "ascending")])


def candidate_pairs(tables: RayTables, limits: PairLimits) -> tuple[TableBuild, BucketPressure, pa.Table]:
    """``candidate_pairs`` (and ``first_copies``, which verification and the audit read),
    refusing buckets over ``limits`` before the join, or leaving them out (hot_buckets: skip),
    as ``lsh/candidates.py``'s ``build_candidate_pairs``; and the hot buckets (``HOT_BUCKET_SCHEMA``), which count in
    neither the pressure nor the join.

    Joins with a side that has no rows are left out: Ray Data loses the columns of an empty
    dataset, and such a join adds nothing (or keeps the other side whole)."""
    partitions = tables.partitions
    texts = _texts(tables).materialize()
    groups, copies = _copies(texts, partitions)
    if copies is None:
        distinct = arrow_map(texts, lambda batch: batch.select(["doc_id", "lsh_bands"]).append_column("copies", pa.array(np.ones(batch.num_rows, np.int64))))
        tables.write("first_copies", ray.data.from_arrow(FIRST_COPIES_SCHEMA.empty_table()), FIRST_COPIES_SCHEMA)
    else:
        tables.write("first_copies", copies.select_columns(["doc_id", "first_copy_doc_id"]), FIRST_COPIES_SCHEMA)
        distinct = texts.join(copies.select_columns(["doc_id"]), "left_anti", partitions, on=("doc_id",)).join(
            groups.select_columns(["content_hash", "first_band_key", "copies"]), "left_outer", partitions,
            on=("content_hash", "first_band_key"),
        )
        distinct = arrow_map(
            distinct,
            lambda batch: pa.table({"doc_id": batch["doc_id"], "lsh_bands": batch["lsh_bands"], "copies": pc.fill_null(batch["copies"], 1)}),
        )
    rows = _band_rows(distinct).materialize()
    buckets = (
        rows.groupby(["band_index", "lsh_band"], num_partitions=partitions)
        .aggregate(Count(alias_name="size"), Sum("copies", alias_name="documents"))
        .materialize()
    )
    limit = limits.max_bucket_size
    hot = _hot(buckets.filter(expr=f"size > {limit}"))
    buckets = buckets.filter(expr=f"size <= {limit}").materialize()
    pressure = _pressure(buckets)
    ensure_within_limits(pressure, limits, hot)

    def pairs(left, right, shared_bands, found_by: str) -> pa.Table:
        low, high = ordered_pairs(left, right)
        return pa.table(
            {
                "left_doc_id": low,
                "right_doc_id": high,
                "shared_bands": pc.cast(shared_bands, pa.int32()),
                "found_by": pa.array([found_by] * len(low), pa.string()),
            }
        )

    found = []

    def add(part: ray.data.Dataset) -> None:
        # a union with a part of no rows fails in Ray Data (such a part has no schema)
        part = part.materialize()
        if part.count():
            found.append(part)

    shared_buckets = kept(buckets, lambda batch: pc.greater(batch["size"], 1)).select_columns(["band_index", "lsh_band"]).materialize()
    if shared_buckets.count():
        shared = rows.select_columns(["doc_id", "band_index", "lsh_band"]).join(
            shared_buckets, "left_semi", partitions, on=("band_index", "lsh_band")
        ).materialize()
        joined = (
            shared.join(renamed(shared, {"doc_id": "right_doc_id"}), "inner", partitions, on=("band_index", "lsh_band"))
            .filter(expr="doc_id < right_doc_id")
            .groupby(["doc_id", "right_doc_id"], num_partitions=partitions)
            .aggregate(Count(alias_name="shared_bands"))
        )
        joined = renamed(joined, {"doc_id": "left_doc_id"}).materialize()
        add(arrow_map(joined, lambda b: pairs(b["left_doc_id"], b["right_doc_id"], b["shared_bands"], "lsh")))
        if copies is not None:
            for side in ("left", "right"):
                other = "right" if side == "left" else "left"
                via_copy = joined.join(
                    renamed(copies, {"first_copy_doc_id": f"{side}_doc_id", "doc_id": "copy_doc_id"}),
                    "inner", partitions, on=(f"{side}_doc_id",),
                )
                add(arrow_map(via_copy, lambda b, other=other: pairs(b["copy_doc_id"], b[f"{other}_doc_id"], b["shared_bands"], "lsh_via_copy")))
    if copies is not None:
        add(arrow_map(copies, lambda b: pairs(b["first_copy_doc_id"], b["doc_id"], b["bands"], "content_hash")))
    if found:
        domains = tables.read("documents", ["doc_id", "domain"])
        candidates = (
            (found[0].union(*found[1:]) if len(found) > 1 else found[0])
            .join(renamed(domains, {"doc_id": "left_doc_id", "domain": "left_domain"}), "inner", partitions, on=("left_doc_id",))
            .join(renamed(domains, {"doc_id": "right_doc_id", "domain": "right_domain"}), "inner", partitions, on=("right_doc_id",))
            .select_columns(PAIR_SCHEMA.names)
        )
    else:
        candidates = ray.data.from_arrow(PAIR_SCHEMA.empty_table())
    tables.write("candidate_pairs", candidates, PAIR_SCHEMA)
    return tables.view("candidate_pairs"), pressure, hot


def first_copies(tables: RayTables) -> pa.Table:
    """Each exact copy and its first copy, as ``verify/pairs.py``'s ``first_copies`` gives them."""
    return read_table(tables.root, "first_copies")
