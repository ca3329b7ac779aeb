"""The pipeline's steps on Ray Data: the same tables as the DuckDB engine, row for row.

Each step reads its inputs' folders (``datasets.py``) as Ray datasets, computes with the same
compiled kernels inside Arrow batch functions, shuffles with Ray Data's hash joins and
aggregations (and takes the wide columns of the per-document tables in place, by position:
``_AtPositions``), writes its own folder, and returns the DuckDB view that checks, metadata and the
release read. The driver collects the bucket pressure's totals, and, while the accepted edges
are few enough, finds their connected components itself; reading the input (``documents``), the
recall audit and the release stay on the Dagster node (docs/scale-out.md).

The rules are the DuckDB engine's (``lsh.py``, ``verify.py``, ``cluster.py`` and their SQL):
copy groups and first copies in input order, the same pair slots and limits, exact Jaccard from
the bodies, connected components named by their smallest doc_id, the same keep rule. Only
``cluster_mode: components`` is offered here.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import ray
import ray.data
from ray.data import SaveMode
from ray.data.aggregate import Count, Min, Sum

from .. import kernels
from ..bucket_kernels import bucket_pair_slots
from ..lsh import BucketPressure, ensure_within_limits
from ..keep_rule import keep_order
from ..settings import ClusterParams, PairLimits, SketchParams, Thresholds
from ..sketch import fingerprint_batch, fingerprint_schema, kernel_blocks, list_matrix
from ..store import TableBuild
from ..jaccard import pair_jaccard, shingle_sets
from .components import connected_components
from .datasets import (
    POSITION,
    folder_rows,
    read_table,
    replace_table,
    table_folder,
    view_build,
    write_batches,
    write_positioned,
)

PAIR_SCHEMA = pa.schema(
    [
        ("left_doc_id", pa.string()),
        ("right_doc_id", pa.string()),
        ("left_domain", pa.string()),
        ("right_domain", pa.string()),
        ("shared_bands", pa.int32()),
        ("found_by", pa.string()),
    ]
)
SCORED_SCHEMA = PAIR_SCHEMA.append(pa.field("jaccard", pa.float64())).append(
    pa.field("signature_overlap", pa.float64())
).append(pa.field("is_exact", pa.bool_())).append(pa.field("is_duplicate", pa.bool_())).append(
    pa.field("reason", pa.string())
)
# the tables ordered by pair, and by input position
PAIR_TABLES = ("candidate_pairs", "scored_pairs", "duplicate_pairs")
POSITION_TABLES = ("documents", "fingerprinted", "clusters", "deduped_documents")
FIRST_COPIES_SCHEMA = pa.schema([("doc_id", pa.string()), ("first_copy_doc_id", pa.string())])
CLUSTER_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("source_file", pa.string()),
        ("input_row", pa.int64()),
        ("cluster_id", pa.string()),
        ("cluster_size", pa.int64()),
        ("crawled_at", pa.timestamp("us")),
        ("token_count", pa.int32()),
        ("representative_rank", pa.int64()),
        ("representative_doc_id", pa.string()),
        ("decision", pa.string()),
        ("jaccard_to_representative", pa.float64()),
        ("chained", pa.bool_()),
        (POSITION, pa.int64()),
    ]
)


@dataclass(frozen=True)
class RayTables:
    """The folder of every table the ray engine writes, and how many partitions a shuffle
    uses."""

    root: Path
    partitions: int

    def read(self, table: str, columns: list[str] | None = None, *, block_per_file: bool = False) -> ray.data.Dataset:
        """``table`` as a dataset. ``block_per_file`` reads each file as one block: Ray Data
        otherwise splits a read of fewer files than its target parallelism into more blocks,
        and a split read is never fused with the map after it, so on nodes of one CPU the
        read tasks can hold every CPU while the map that would drain them waits for one."""
        folder = table_folder(self.root, table)
        blocks = {"override_num_blocks": len(list(folder.glob("*.parquet")))} if block_per_file else {}
        return ray.data.read_parquet(str(folder), columns=columns, **blocks)

    def write(self, table: str, dataset: ray.data.Dataset, schema: pa.Schema) -> None:
        """Write ``dataset`` as ``table`` with exactly ``schema`` (joins widen strings to large
        strings; every file gets the same types). A per-document table is written one block per
        file, sorted and named by position (``write_positioned``): where its blocks are runs of
        positions, as when mapped from ``documents``' blocks, its view reads it without sorting."""

        def typed(batch: pa.Table) -> pa.Table:
            return batch.select(schema.names).cast(schema)

        def write(folder: Path) -> None:
            if POSITION in schema.names:

                def one_file(block: pa.Table) -> pa.Table:
                    return pa.table({"rows": [write_positioned(folder, typed(block))]})

                written = _arrow(dataset, one_file, batch_size=None).sum("rows") or 0
                # a file written over by another block, or left by an attempt that split its
                # blocks otherwise, would change the table's rows without an error
                if written != folder_rows(folder):
                    raise RuntimeError(
                        f"{table}: {written:,} rows were written but {folder} holds {folder_rows(folder):,}: "
                        "another run may be writing the same tables; run the step again with no other run on them"
                    )
            else:
                _arrow(dataset, typed).write_parquet(str(folder), mode=SaveMode.OVERWRITE)

        replace_table(self.root, table, write, schema)

    def view(self, table: str, **casts: str) -> TableBuild:
        """The table's DuckDB view, in the DuckDB engine's row order."""
        order = ("left_doc_id", "right_doc_id") if table in PAIR_TABLES else (POSITION,) if table in POSITION_TABLES else ()
        return view_build(self.root, table, order, casts)


def _arrow(dataset: ray.data.Dataset, fn: Callable[[pa.Table], pa.Table], **options) -> ray.data.Dataset:
    return dataset.map_batches(fn, batch_format="pyarrow", zero_copy_batch=True, **options)


def _use_task_cpus() -> None:
    """Kernel threads to the CPUs Ray gave this task, not every core of the node."""
    import numba

    cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 1)
    numba.set_num_threads(max(1, min(int(cpus), numba.config.NUMBA_NUM_THREADS)))


def _column(batch: pa.Table, name: str, kind: pa.DataType) -> pa.ChunkedArray | pa.Array:
    """A column an outer join brought, or nulls: Ray Data drops the columns of an empty side
    (an aggregation of no rows has no schema)."""
    return batch[name] if name in batch.column_names else pa.nulls(batch.num_rows, kind)


def _renamed(dataset: ray.data.Dataset, names: dict[str, str]) -> ray.data.Dataset:
    return dataset.rename_columns(names)


@ray.remote
def _position_span(block: pa.Table) -> tuple[int, int] | None:
    """The smallest and largest position of a block; None when it is empty."""
    if not block.num_rows:
        return None
    bounds = pc.min_max(block[POSITION])
    return bounds["min"].as_py(), bounds["max"].as_py()


class _AtPositions:
    """Rows keyed by document position (``POSITION`` and any other columns), to be given columns
    of the per-document tables in place: an inner join on position in which only these narrow
    rows are shuffled (sorted once), never the table's wide rows (bodies, signatures). Each block
    of the table fetches the sorted key blocks its positions span: every key it can match, since
    a key matches only inside that span. Blocks written in input order (documents, and mostly
    the tables mapped from it) span a run of positions, so each fetches about its own share."""

    def __init__(self, keys: ray.data.Dataset):
        ordered = keys.sort(POSITION).materialize()
        refs = ordered.to_arrow_refs()
        spans = ray.get([_position_span.remote(ref) for ref in refs])
        # the refs live as long as this object and the closures that take() hands to Ray Data
        self._spans = [(ref, *span) for ref, span in zip(refs, spans) if span is not None]
        self._schema = ordered.schema().base_schema

    def take(self, tables: RayTables, table: str, columns: list[str]) -> ray.data.Dataset:
        """Each key row with ``columns`` of ``table``'s row at its position (keys with no such
        row are left out)."""
        spans, schema = self._spans, self._schema

        def join(batch: pa.Table) -> pa.Table:
            bounds = pc.min_max(batch[POSITION])
            low, high = bounds["min"].as_py(), bounds["max"].as_py()
            wanted = [ref for ref, first, last in spans if batch.num_rows and first <= high and last >= low]
            # sorted blocks may differ in string widths
            keys = pa.concat_tables(ray.get(wanted), promote_options="permissive") if wanted else schema.empty_table()
            rows = pc.index_in(keys[POSITION], value_set=batch[POSITION])
            found = pc.is_valid(rows)
            keys, rows = keys.filter(found), rows.filter(found)
            picked = batch.select(columns).take(rows)
            for name in columns:
                keys = keys.append_column(name, picked[name])
            return keys

        # whole blocks: one fetch of the keys per block, not per batch of rows
        return _arrow(tables.read(table, [*columns, POSITION], block_per_file=True), join, batch_size=None)


# --- documents and fingerprint ------------------------------------------------------------------------------


# Parquet files of this many documents: enough read tasks to spread a corpus over a cluster,
# few enough that each one's start-up is small next to its work.
DOCUMENTS_PER_FILE = 65_536


def documents(tables: RayTables, batches) -> TableBuild:
    """``documents``: the validated input stream (the readers' batches), written in input order
    with each document's position."""
    write_batches(tables.root, "documents", batches, DOCUMENTS_PER_FILE)
    return tables.view("documents")


def fingerprint(tables: RayTables, params: SketchParams, batch_size: int) -> TableBuild:
    """``fingerprinted``: the compiled sketch over every body, in input order."""

    def sketch(batch: pa.Table) -> pa.Table:
        _use_task_cpus()
        result = fingerprint_batch(batch["doc_id"].combine_chunks(), batch["body"].combine_chunks(), params)
        return pa.Table.from_batches([result]).append_column(POSITION, batch[POSITION])

    documents = tables.read("documents", columns=["doc_id", "body", POSITION])
    schema = fingerprint_schema(params).append(pa.field(POSITION, pa.int64()))
    tables.write("fingerprinted", _arrow(documents, sketch, batch_size=batch_size), schema)
    return tables.view("fingerprinted", signature=f"ubigint[{params.num_perm}]", lsh_bands=f"ubigint[{params.bands}]")


# --- candidates -------------------------------------------------------------------------------


def _texts(tables: RayTables) -> ray.data.Dataset:
    """Documents with shingles: their position, content hash, first band key and band keys."""

    def keyed(batch: pa.Table) -> pa.Table:
        batch = batch.filter(pc.greater(batch["shingle_count"], 0))
        return pa.table(
            {
                "doc_id": batch["doc_id"],
                POSITION: batch[POSITION],
                "content_hash": batch["content_hash"],
                "first_band_key": pc.list_element(batch["lsh_bands"], 0),
                "lsh_bands": batch["lsh_bands"],
            }
        )

    return _arrow(tables.read("fingerprinted", ["doc_id", POSITION, "shingle_count", "content_hash", "lsh_bands"]), keyed)


def _copies(texts: ray.data.Dataset, partitions: int) -> tuple[ray.data.Dataset | None, ray.data.Dataset | None]:
    """(groups: content_hash, first_band_key, copies of every copy group; copies: every copy
    that is not its group's first copy, with its first copy and band count), as
    ``sql/copy_groups.sql`` and the candidate query's ``copies``; (None, None) when no text has
    two copies."""
    key = ("content_hash", "first_band_key")
    groups = (
        texts.groupby(list(key), num_partitions=partitions)
        .aggregate(Count(alias_name="copies"), Min(POSITION, alias_name="first_position"))
        .filter(expr="copies > 1")
        .materialize()
    )
    if not groups.count():
        return None, None
    members = texts.select_columns(["doc_id", POSITION, *key, "lsh_bands"]).join(
        groups, "inner", partitions, on=key
    )
    first = _arrow(
        members.filter(expr=f"{POSITION} == first_position"),
        lambda batch: pa.table({"content_hash": batch["content_hash"], "first_band_key": batch["first_band_key"], "first_copy_doc_id": batch["doc_id"]}),
    )
    copies = _arrow(
        members.filter(expr=f"{POSITION} != first_position").join(first, "inner", partitions, on=key),
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

    return _arrow(distinct, explode)


def _pressure(buckets: ray.data.Dataset) -> BucketPressure:
    """The totals of ``lsh.band_buckets`` from the bucket rows (band_index, lsh_band, size in
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

    slots = _arrow(buckets, bucket_slots)
    slots, published = slots.sum("slots"), slots.sum("published")
    largest = buckets.max("size")
    worst = buckets.filter(expr=f"size == {int(largest)}")
    band = worst.min("band_index")
    # Ray's global min turns uint64 values above 2**63 into Python objects it cannot compare:
    # each block's smallest key comes back, and the smallest of those is taken here
    keys = _arrow(
        worst.filter(expr=f"band_index == {int(band)}").select_columns(["lsh_band"]),
        lambda batch: pa.table({"lsh_band": pa.array([pc.min(batch["lsh_band"]).as_py()], pa.uint64())}),
    ).take_all()
    key = min(row["lsh_band"] for row in keys)
    return BucketPressure(
        int(slots), int(largest), f"{int(band):03d}:{int(key):016x}", int(bucket_count), int(published)
    )


def _ordered_pairs(left: pa.ChunkedArray, right: pa.ChunkedArray) -> tuple[pa.Array, pa.Array]:
    swap = pc.greater(left, right)
    return pc.if_else(swap, right, left), pc.if_else(swap, left, right)


def candidate_pairs(tables: RayTables, limits: PairLimits) -> tuple[TableBuild, BucketPressure]:
    """``candidate_pairs`` (and ``first_copies``, which verification and the audit read),
    refusing buckets over ``limits`` before the join, as ``lsh.build_candidate_pairs``.

    Joins with a side that has no rows are left out: Ray Data loses the columns of an empty
    dataset, and such a join adds nothing (or keeps the other side whole)."""
    partitions = tables.partitions
    texts = _texts(tables).materialize()
    groups, copies = _copies(texts, partitions)
    if copies is None:
        distinct = _arrow(texts, lambda batch: batch.select(["doc_id", "lsh_bands"]).append_column("copies", pa.array(np.ones(batch.num_rows, np.int64))))
        tables.write("first_copies", ray.data.from_arrow(FIRST_COPIES_SCHEMA.empty_table()), FIRST_COPIES_SCHEMA)
    else:
        tables.write("first_copies", copies.select_columns(["doc_id", "first_copy_doc_id"]), FIRST_COPIES_SCHEMA)
        distinct = texts.join(copies.select_columns(["doc_id"]), "left_anti", partitions, on=("doc_id",)).join(
            groups.select_columns(["content_hash", "first_band_key", "copies"]), "left_outer", partitions,
            on=("content_hash", "first_band_key"),
        )
        distinct = _arrow(
            distinct,
            lambda batch: pa.table({"doc_id": batch["doc_id"], "lsh_bands": batch["lsh_bands"], "copies": pc.fill_null(batch["copies"], 1)}),
        )
    rows = _band_rows(distinct).materialize()
    buckets = (
        rows.groupby(["band_index", "lsh_band"], num_partitions=partitions)
        .aggregate(Count(alias_name="size"), Sum("copies", alias_name="documents"))
        .materialize()
    )
    pressure = _pressure(buckets)
    ensure_within_limits(pressure, limits)

    def pairs(left, right, shared_bands, found_by: str) -> pa.Table:
        low, high = _ordered_pairs(left, right)
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

    shared_buckets = buckets.filter(expr="size > 1").select_columns(["band_index", "lsh_band"]).materialize()
    if shared_buckets.count():
        shared = rows.select_columns(["doc_id", "band_index", "lsh_band"]).join(
            shared_buckets, "left_semi", partitions, on=("band_index", "lsh_band")
        ).materialize()
        joined = (
            shared.join(_renamed(shared, {"doc_id": "right_doc_id"}), "inner", partitions, on=("band_index", "lsh_band"))
            .filter(expr="doc_id < right_doc_id")
            .groupby(["doc_id", "right_doc_id"], num_partitions=partitions)
            .aggregate(Count(alias_name="shared_bands"))
        )
        joined = _renamed(joined, {"doc_id": "left_doc_id"}).materialize()
        add(_arrow(joined, lambda b: pairs(b["left_doc_id"], b["right_doc_id"], b["shared_bands"], "lsh")))
        if copies is not None:
            for side in ("left", "right"):
                other = "right" if side == "left" else "left"
                via_copy = joined.join(
                    _renamed(copies, {"first_copy_doc_id": f"{side}_doc_id", "doc_id": "copy_doc_id"}),
                    "inner", partitions, on=(f"{side}_doc_id",),
                )
                add(_arrow(via_copy, lambda b, other=other: pairs(b["copy_doc_id"], b[f"{other}_doc_id"], b["shared_bands"], "lsh_via_copy")))
    if copies is not None:
        add(_arrow(copies, lambda b: pairs(b["first_copy_doc_id"], b["doc_id"], b["bands"], "content_hash")))
    if found:
        domains = tables.read("documents", ["doc_id", "domain"])
        candidates = (
            (found[0].union(*found[1:]) if len(found) > 1 else found[0])
            .join(_renamed(domains, {"doc_id": "left_doc_id", "domain": "left_domain"}), "inner", partitions, on=("left_doc_id",))
            .join(_renamed(domains, {"doc_id": "right_doc_id", "domain": "right_domain"}), "inner", partitions, on=("right_doc_id",))
            .select_columns(PAIR_SCHEMA.names)
        )
    else:
        candidates = ray.data.from_arrow(PAIR_SCHEMA.empty_table())
    tables.write("candidate_pairs", candidates, PAIR_SCHEMA)
    return tables.view("candidate_pairs"), pressure


def first_copies(tables: RayTables) -> pa.Table:
    """Each exact copy and its first copy, as ``verify.first_copies`` gives them."""
    return read_table(tables.root, "first_copies")


# --- verify -----------------------------------------------------------------------------------


def _pair_scores(tables: RayTables, params: SketchParams) -> ray.data.Dataset:
    """Exact Jaccard, signature overlap and content equality of every pair LSH found. Each
    side's columns are taken in place by its position (``_AtPositions``): first both
    signatures, which give the overlap and are dropped, then both bodies, which give the
    Jaccard. Only the pairs move, carrying at most one side's signature or body; the documents
    never do."""
    partitions = tables.partitions
    positions = tables.read("fingerprinted", ["doc_id", POSITION])

    def side_positions(side: str) -> ray.data.Dataset:
        return _renamed(positions, {"doc_id": f"{side}_doc_id", POSITION: f"{side}_position"})

    pairs = (
        tables.read("candidate_pairs", ["left_doc_id", "right_doc_id", "found_by"])
        .filter(expr="found_by == 'lsh'")
        .select_columns(["left_doc_id", "right_doc_id"])
        .join(side_positions("left"), "inner", partitions, on=("left_doc_id",))
        .join(side_positions("right"), "inner", partitions, on=("right_doc_id",))
    )

    def take(dataset: ray.data.Dataset, side: str, table: str, columns: list[str]) -> ray.data.Dataset:
        keyed = _arrow(dataset, lambda batch: batch.append_column(POSITION, batch[f"{side}_position"]))
        taken = _AtPositions(keyed).take(tables, table, columns).drop_columns([POSITION])
        return _renamed(taken, {name: f"{side}_{name}" for name in columns})

    sketch = ["shingle_count", "signature", "content_hash"]

    def overlap(batch: pa.Table) -> pa.Table:
        count = batch.num_rows
        rows = np.arange(count, dtype=np.int64)
        signatures = np.concatenate([list_matrix(batch["left_signature"]), list_matrix(batch["right_signature"])])
        return batch.drop_columns([f"{side}_{name}" for side in ("left", "right") for name in ("signature", "content_hash")]).append_column(
            "signature_overlap", pa.array(kernels.pair_overlap_kernel(signatures, rows, rows + count))
        ).append_column("is_exact", pc.equal(batch["left_content_hash"], batch["right_content_hash"]))

    signed = _arrow(take(take(pairs, "left", "fingerprinted", sketch), "right", "fingerprinted", sketch), overlap)
    bodies = take(take(signed, "left", "documents", ["body"]), "right", "documents", ["body"])

    def score(batch: pa.Table) -> pa.Table:
        _use_task_cpus()
        count = batch.num_rows
        rows = np.arange(count, dtype=np.int64)
        texts = pa.concat_arrays([batch[f"{side}_body"].combine_chunks().cast(pa.large_string()) for side in ("left", "right")])
        counts = np.concatenate([batch["left_shingle_count"].to_numpy(), batch["right_shingle_count"].to_numpy()])
        return pa.table(
            {
                "left_doc_id": batch["left_doc_id"],
                "right_doc_id": batch["right_doc_id"],
                "jaccard": pair_jaccard(texts, rows, rows + count, params.shingling, params.hash_scheme, counts),
                "signature_overlap": batch["signature_overlap"],
                "is_exact": batch["is_exact"],
            }
        )

    return _arrow(bodies, score)


def scored_pairs(tables: RayTables, params: SketchParams, thresholds: Thresholds) -> TableBuild:
    """``scored_pairs``, by the rules of ``sql/scored_pairs.sql``."""
    partitions = tables.partitions
    candidates = tables.read("candidate_pairs")
    copies = tables.read("first_copies")

    def first_of(dataset: ray.data.Dataset, side: str) -> ray.data.Dataset:
        return dataset.join(
            _renamed(copies, {"doc_id": f"{side}_doc_id", "first_copy_doc_id": f"{side}_first"}),
            "left_outer",
            partitions,
            on=(f"{side}_doc_id",),
        )

    def score_keys(batch: pa.Table) -> pa.Table:
        via_copy = pc.equal(batch["found_by"], "lsh_via_copy")
        firsts = [_column(batch, f"{side}_first", pa.string()) for side in ("left", "right")]
        left = pc.if_else(pc.and_(via_copy, pc.is_valid(firsts[0])), firsts[0], batch["left_doc_id"])
        right = pc.if_else(pc.and_(via_copy, pc.is_valid(firsts[1])), firsts[1], batch["right_doc_id"])
        low, high = _ordered_pairs(left, right)
        return batch.select(PAIR_SCHEMA.names).append_column("score_left", low).append_column("score_right", high)

    if not candidates.count():
        tables.write("scored_pairs", ray.data.from_arrow(SCORED_SCHEMA.empty_table()), SCORED_SCHEMA)
        return tables.view("scored_pairs")
    # joins with a side that has no rows are left out (see candidate_pairs)
    keyed = _arrow(first_of(first_of(candidates, "left"), "right") if copies.count() else candidates, score_keys)
    if candidates.filter(expr="found_by == 'lsh'").count():
        scores = _renamed(_pair_scores(tables, params), {"left_doc_id": "score_left", "right_doc_id": "score_right"})
        keyed = keyed.join(scores, "left_outer", partitions, on=("score_left", "score_right"))

    def decide(batch: pa.Table) -> pa.Table:
        by_hash = pc.equal(batch["found_by"], "content_hash")
        jaccard = pc.if_else(by_hash, 1.0, _column(batch, "jaccard", pa.float64()))
        overlap = pc.if_else(by_hash, 1.0, _column(batch, "signature_overlap", pa.float64()))
        duplicate = pc.greater_equal(jaccard, thresholds.jaccard)
        minhash = pc.greater_equal(overlap, thresholds.signature_overlap)
        reason = pc.case_when(
            pc.make_struct(pc.and_(duplicate, minhash), duplicate, minhash),
            "jaccard_and_minhash",
            "jaccard_match",
            "minhash_only_rejected",
        )
        return pa.table(
            {
                **{name: batch[name] for name in PAIR_SCHEMA.names},
                "jaccard": jaccard,
                "signature_overlap": overlap,
                "is_exact": pc.or_kleene(by_hash, _column(batch, "is_exact", pa.bool_())),
                "is_duplicate": duplicate,
                "reason": pc.fill_null(reason, "below_jaccard_threshold"),
            }
        )

    scored = _arrow(keyed, decide)
    tables.write("scored_pairs", scored, SCORED_SCHEMA)
    return tables.view("scored_pairs")


def duplicate_pairs(tables: RayTables) -> TableBuild:
    """The accepted edges, in pair order."""
    tables.write("duplicate_pairs", tables.read("scored_pairs").filter(expr="is_duplicate"), SCORED_SCHEMA)
    return tables.view("duplicate_pairs")


# --- cluster ----------------------------------------------------------------------------------


def _rank_clusters(params: ClusterParams) -> Callable[[pa.Table], pa.Table]:
    """Whole duplicate components' rows (any number of components, each complete): the keep
    rule's ranks within each (``keep_rule.py``, as the DuckDB engine ranks them) and each member's
    exact Jaccard with its representative, over 64-bit shingle hashes (as verification's under
    ``fss``), for all components at once."""

    def rank(members: pa.Table) -> pa.Table:
        _use_task_cpus()
        members = members.take(keep_order(members, params.prefer_domains, within="root_doc_id"))
        count = members.num_rows
        roots = members["root_doc_id"].combine_chunks()
        starts = np.flatnonzero(np.concatenate([[True], pc.not_equal(roots[1:], roots[:-1]).to_numpy(zero_copy_only=False)]))
        sizes = np.diff(np.append(starts, count))
        first = np.repeat(starts, sizes)  # each row's representative: its component's first row
        counts = members["shingle_count"].to_numpy().astype(np.int64)
        values, offsets = shingle_sets(members["body"], params.shingling, counts)
        jaccard = kernels.pair_jaccard_kernel(values, offsets, np.arange(count, dtype=np.int64), first, kernel_blocks())
        texts = members["text_doc_id"].combine_chunks()
        jaccard[pc.equal(texts, texts.take(first)).to_numpy(zero_copy_only=False)] = 1.0
        return _cluster_rows(
            members,
            cluster_id=pc.binary_join_element_wise("cluster-", roots.cast(pa.string()), ""),
            size=np.repeat(sizes, sizes).astype(np.int64),
            ranks=np.arange(count, dtype=np.int64) - first + 1,
            representatives=members["doc_id"].take(pa.array(first)),
            jaccard=pa.array(jaccard),
            threshold=params.threshold,
        )

    return rank


def _component_buckets(members: pa.Table, buckets: int) -> pa.Table:
    """``members`` with a ``bucket`` of its component: the same for every member (crc32 of the
    root, the same in every process), so a grouping by bucket hands each call whole components."""
    roots = members["root_doc_id"].to_pylist()
    hashes = np.fromiter((zlib.crc32(root.encode()) for root in roots), dtype=np.int64, count=len(roots))
    return members.append_column("bucket", pa.array(hashes % buckets))


def _cluster_rows(group: pa.Table, *, cluster_id, size, ranks, representatives, jaccard, threshold: float) -> pa.Table:
    return pa.table(
        {
            "doc_id": group["doc_id"],
            "source_file": group["source_file"],
            "input_row": group["input_row"],
            "cluster_id": cluster_id,
            "cluster_size": pa.array(size, pa.int64()),
            "crawled_at": pc.cast(group["crawled_at"], pa.timestamp("us")),
            "token_count": group["token_count"],
            "representative_rank": pa.array(ranks, pa.int64()),
            "representative_doc_id": representatives,
            "decision": pc.if_else(pc.equal(pa.array(ranks), 1), "kept_representative", "removed_duplicate"),
            "jaccard_to_representative": jaccard,
            "chained": pc.fill_null(pc.less(jaccard, threshold), False),
            POSITION: group[POSITION],
        }
    ).cast(CLUSTER_SCHEMA)


# edges that connect nothing more: an lsh_via_copy pair's copy hangs from its first copy by a
# content_hash edge, and the first copy from the other document by the lsh edge it was found by
IMPLIED = "lsh_via_copy"


def _component_roots(tables: RayTables, driver_edges: int, log: Callable[[str], None]) -> ray.data.Dataset:
    """Every document of an accepted edge and its component's smallest doc_id: on this node
    (networkx, as the DuckDB engine) while the edges are at most ``driver_edges``, else on the
    cluster (``components.py``), whose rounds of shuffles cost more than one pass over a small
    list."""
    edges = tables.read("duplicate_pairs", ["left_doc_id", "right_doc_id", "found_by"]).filter(
        expr=f"found_by != '{IMPLIED}'"
    )
    count = edges.count()
    if count > driver_edges:
        log(f"connected components: {count:,} edges, on the cluster (over {driver_edges:,} for this node)")
        return connected_components(edges, num_partitions=tables.partitions, log=log)
    log(f"connected components: {count:,} edges, on this node (at most {driver_edges:,} here)")
    from ..cluster import edge_components  # networkx: only this node needs it

    pairs = read_table(tables.root, "duplicate_pairs", ["left_doc_id", "right_doc_id", "found_by"])
    pairs = pairs.filter(pc.not_equal(pairs["found_by"], IMPLIED))
    roots = edge_components(zip(pairs["left_doc_id"].to_pylist(), pairs["right_doc_id"].to_pylist()))
    return ray.data.from_arrow(roots, override_num_blocks=tables.partitions)


def clusters(
    tables: RayTables, params: ClusterParams, driver_edges: int, log: Callable[[str], None]
) -> TableBuild:
    """``clusters``: connected components of the accepted edges (``_component_roots``), every member
    ranked by the keep rule (with ``params.prefer_domains``) and measured against its
    representative; every other document its own cluster. In input order. (Joins with a side of
    no rows are left out, as in candidate_pairs.)"""
    partitions = tables.partitions
    meta = tables.read("documents", ["doc_id", "source_file", "input_row", "domain", "crawled_at", POSITION]).join(
        tables.read("fingerprinted", ["doc_id", "token_count", "shingle_count"]), "inner", partitions, on=("doc_id",)
    )

    def single(batch: pa.Table) -> pa.Table:
        count = batch.num_rows
        return _cluster_rows(
            batch,
            cluster_id=pc.binary_join_element_wise("cluster-", batch["doc_id"].cast(pa.string()), ""),
            size=np.ones(count, dtype=np.int64),
            ranks=np.ones(count, dtype=np.int64),
            representatives=batch["doc_id"],
            jaccard=pa.nulls(count, pa.float64()),
            threshold=params.threshold,
        )

    edges = tables.read("duplicate_pairs", ["left_doc_id", "right_doc_id"])
    if not edges.count():
        tables.write("clusters", _arrow(meta, single), CLUSTER_SCHEMA)
        return tables.view("clusters")
    roots = _component_roots(tables, driver_edges, log).materialize()
    # every document once with its root (null: no edge), split into components and singletons
    placed = meta.join(roots, "left_outer", partitions, on=("doc_id",)).materialize()
    # the members' first copies joined while their rows are narrow, then their bodies taken in place
    members = placed.filter(expr="is_valid(root_doc_id)")
    copies = tables.read("first_copies")
    if copies.count():
        members = members.join(_renamed(copies, {"first_copy_doc_id": "text_doc_id"}), "left_outer", partitions, on=("doc_id",))
    members = _arrow(
        members,
        lambda batch: batch.drop_columns([name for name in ["text_doc_id"] if name in batch.column_names]).append_column(
            "text_doc_id", pc.coalesce(_column(batch, "text_doc_id", pa.string()), batch["doc_id"])
        ),
    )
    members = _AtPositions(members).take(tables, "documents", ["body"])
    # components grouped by bucket, not one call per component: the ranking is vectorized over
    # a call's components, and per-call overhead times hundreds of thousands of components is
    # what a grouping by root cost
    buckets = 4 * partitions
    ranked = _arrow(members, lambda batch: _component_buckets(batch, buckets)).groupby("bucket", num_partitions=partitions).map_groups(
        _rank_clusters(params), batch_format="pyarrow"
    )
    singles = _arrow(placed.filter(expr="is_null(root_doc_id)"), single).materialize()
    every = ranked.union(singles) if singles.count() else ranked  # see candidate_pairs' add
    tables.write("clusters", every, CLUSTER_SCHEMA)
    return tables.view("clusters")


def deduped_documents(tables: RayTables) -> TableBuild:
    """The representatives' rows with every input column, in input order."""
    documents = pq.read_schema(min(table_folder(tables.root, "documents").glob("*.parquet")))
    columns = [field for field in documents if field.name != POSITION]
    schema = pa.schema([*columns, ("cluster_id", pa.string()), ("cluster_size", pa.int64()), (POSITION, pa.int64())])
    kept = _AtPositions(
        tables.read("clusters", [POSITION, "cluster_id", "cluster_size", "representative_rank"])
        .filter(expr="representative_rank == 1")
        .select_columns([POSITION, "cluster_id", "cluster_size"])
    )
    tables.write("deduped_documents", kept.take(tables, "documents", [field.name for field in columns]), schema)
    return tables.view("deduped_documents")
