"""The ray engine's ``clusters``: connected components (on the driver
while the edges are few), each split into clusters (one, or the stars of ``cluster_mode: star``)
with every member ranked by the keep rule and measured against its representative."""

from __future__ import annotations

import shutil
import zlib
from collections.abc import Callable

import daft
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray
import ray.data

from ..verify.jaccard import shingle_sets
from ..keep.columns import prepared
from ..pipeline.step_params import ClusterParams
from ..storage.store import TableBuild
from .components import ROOTS, ROOTS_TABLE, connected_components
from .daft_tables import frame
from .memory_plan import available_memory, body_bytes_per_shingle, components_here, ensure_ranking_fits, ranking_memory, smallest_node
from .datasets import (
    POSITION,
    read_table,
)
from .ray_tables import (
    CLUSTER_SCHEMA,
    AtPositions,
    RayTables,
    arrow_map,
    column_or_nulls,
    kept,
    renamed,
    use_task_cpus,
)


def _rank_clusters(params: ClusterParams) -> Callable[[pa.Table], pa.Table]:
    """Whole duplicate components' rows (any number of components, each complete): each member's
    representative and exact Jaccard with it by the DuckDB engine's rounds
    (``cluster/components.py``'s ``choose_representatives``: the component's best-ranked member, or in ``star`` mode
    the stars) and its rank in its cluster by the keep rule (``keep/rule.py``), for all
    components at once. Jaccard is measured over 64-bit shingle hashes (as verification's under
    ``fss``); each distinct text is shingled once, and copies of one text score 1."""

    def rank(members: pa.Table) -> pa.Table:
        from ..cluster.components import TextScores, choose_representatives, ranks_in_clusters

        use_task_cpus()
        members = prepared(params.keep, members)
        members = members.take(params.keep.order(members, within="root_doc_id"))
        roots = members["root_doc_id"].combine_chunks()
        component = np.cumsum(np.concatenate([[False], pc.not_equal(roots[1:], roots[:-1]).to_numpy(zero_copy_only=False)]))
        # texts numbered in doc_id order (copies share their first copy's text_doc_id); each
        # text's row is its first copy's, the one with the body
        texts = members["text_doc_id"].combine_chunks().to_numpy(zero_copy_only=False)
        unique, text = np.unique(texts, return_inverse=True)
        bodied = np.flatnonzero(pc.is_valid(members["body"]).to_numpy(zero_copy_only=False))
        text_rows = np.full(len(unique), -1, dtype=np.int64)
        text_rows[text[bodied]] = bodied
        if (text_rows < 0).any():  # a copy's first copy is in its component by its content_hash edge
            missing = unique[np.flatnonzero(text_rows < 0)[0]]
            raise RuntimeError(f"clusters: the first copy {missing} is not in its copies' component; report this")
        counts = members["shingle_count"].to_numpy().astype(np.int64)[text_rows]
        scores = TextScores(None, len(text_rows))

        def shingle(wanted: np.ndarray) -> None:
            wanted = np.unique(wanted)
            if len(wanted):
                bodies = members["body"].take(pa.array(text_rows[wanted]))
                scores.shingle(wanted, *shingle_sets(bodies, params.shingling, counts[wanted]))

        representative, jaccard = choose_representatives(component, text.astype(np.int64), counts, params, scores, shingle)
        # a cluster is named by its smallest doc_id (sql/clusters.sql)
        doc_ids = members["doc_id"].combine_chunks()
        names, order = np.unique(doc_ids.to_numpy(zero_copy_only=False), return_inverse=True)
        smallest = np.full(len(representative), len(names), dtype=np.int64)
        np.minimum.at(smallest, representative, order)
        return _cluster_rows(
            members,
            cluster_id=pc.binary_join_element_wise("cluster-", pa.array(names[smallest[representative]], pa.string()), ""),
            size=np.bincount(representative, minlength=len(representative))[representative].astype(np.int64),
            ranks=ranks_in_clusters(representative),
            representatives=doc_ids.take(pa.array(representative)),
            jaccard=pa.array(jaccard),
            reasons=params.keep.reasons(members, representative),
            threshold=params.threshold,
        )

    return rank


def _one_body_per_text(tables: RayTables, members: ray.data.Dataset) -> ray.data.Dataset:
    """``members`` with the body of each distinct text on its first copy's row, and none on a
    copy's: a copy is measured by its first copy's text, so a component of 200,000 copies of one
    page holds one body, not 200,000."""

    def text_body(batch: pa.Table) -> pa.Table:  # one type in both parts, for the grouping
        body = batch["body"] if "body" in batch.column_names else pa.nulls(batch.num_rows, pa.large_string())
        return batch.drop_columns([name for name in ["body"] if name in batch.column_names]).append_column(
            "body", pc.cast(body, pa.large_string())
        )

    def first(batch: pa.Table) -> pa.Array:
        return pc.equal(batch["doc_id"], batch["text_doc_id"])

    texts = arrow_map(AtPositions(kept(members, first)).take(tables, "documents", ["body"]), text_body)
    copies = kept(members, lambda batch: pc.invert(first(batch))).materialize()
    # a union with a part of no rows fails in Ray Data (such a part has no schema)
    return texts.union(arrow_map(copies, text_body)) if copies.count() else texts


def _component_bucket(buckets: int) -> Callable[[pa.ChunkedArray], pa.Array]:
    """Each root's bucket: the same for every member of a component (crc32 of the root, the same
    in every process), so a grouping by bucket hands each call whole components."""

    def bucket(roots: pa.ChunkedArray) -> pa.Array:
        names = roots.to_pylist()
        hashes = np.fromiter((zlib.crc32(root.encode()) for root in names), dtype=np.int64, count=len(names))
        return pa.array(hashes % buckets)

    return bucket


def _cluster_rows(
    group: pa.Table, *, cluster_id, size, ranks, representatives, jaccard, reasons, threshold: float
) -> pa.Table:
    members = pa.table(
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
            "jaccard_to_representative": jaccard,
            "keep_reason": reasons,
            POSITION: group[POSITION],
        }
    )
    from ..cluster.components import decided_members  # the rule the DuckDB engine decides by, in one place

    return decided_members(members, threshold).cast(CLUSTER_SCHEMA)


# edges that connect nothing more: an lsh_via_copy pair's copy hangs from its first copy by a
# content_hash edge, and the first copy from the other document by the lsh edge it was found by
IMPLIED = "lsh_via_copy"


def _component_roots(tables: RayTables, driver_edges: int, log: Callable[[str], None]) -> ray.data.Dataset:
    """Every document of an accepted edge and its component's smallest doc_id: on this node
    (networkx, as the DuckDB engine) while the edges are at most ``driver_edges`` and take at
    most half the memory free here (the cluster's rounds of shuffles cost more than one pass over
    a small list), else on the cluster (``components.py``, on Daft): the ranking's Ray Data then
    reads the roots from their Parquet files in ``_scratch``."""
    edges = frame(tables.root, "duplicate_pairs", ["left_doc_id", "right_doc_id", "found_by"]).where(daft.col("found_by") != IMPLIED)
    here, where = components_here(edges.count_rows(), driver_edges, available_memory())
    log(where)
    if not here:
        scratch = _scratch(tables)
        connected_components(edges, scratch, log=log)
        # Daft writes large strings; the joins with the documents' ids want their type
        return arrow_map(scratch.read(ROOTS_TABLE), lambda batch: batch.cast(ROOTS))
    from ..cluster.components import edge_components  # networkx: only this node needs it

    pairs = read_table(tables.root, "duplicate_pairs", ["left_doc_id", "right_doc_id", "found_by"])
    pairs = pairs.filter(pc.not_equal(pairs["found_by"], IMPLIED))
    roots = edge_components(zip(pairs["left_doc_id"].to_pylist(), pairs["right_doc_id"].to_pylist()))
    return ray.data.from_arrow(roots, override_num_blocks=tables.partitions)


def _scratch(tables: RayTables) -> RayTables:
    """The folder of the cluster's components' rounds and roots, hidden among the tables and
    removed when ``clusters`` is written."""
    return RayTables(tables.root / ".components", tables.partitions)


def clusters(
    tables: RayTables, params: ClusterParams, driver_edges: int, log: Callable[[str], None]
) -> TableBuild:
    """``clusters``: connected components of the accepted edges (``_component_roots``), each on
    one task with its whole rows (``_rank_clusters``), every member ranked by the params' keep
    policy and measured against its representative; every other document its own cluster. In
    input order. (Joins with a side of no rows are left out: Ray Data loses the columns of an
    empty dataset, and such a join adds nothing or keeps the other side whole.)"""
    partitions = tables.partitions
    read = ["doc_id", "source_file", "input_row", "domain", "crawled_at", POSITION]
    # the keep policy's columns as read; prepared() gives each its rule's field
    read += sorted({rule.column for rule in params.keep.input_columns} - set(read))
    meta = tables.read("documents", read).join(
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
            reasons=pa.nulls(count, pa.string()),
            threshold=params.threshold,
        )

    edges = tables.read("duplicate_pairs", ["left_doc_id", "right_doc_id"])
    try:
        if not edges.count():
            tables.write("clusters", arrow_map(meta, single), CLUSTER_SCHEMA)
            return tables.view("clusters")
        roots = _component_roots(tables, driver_edges, log).materialize()
        # every document once with its root (null: no edge), split into components and singletons
        placed = meta.join(roots, "left_outer", partitions, on=("doc_id",)).materialize()
        # the members' first copies joined while their rows are narrow, then their bodies taken in place
        members = kept(placed, lambda b: pc.is_valid(b["root_doc_id"]))
        copies = tables.read("first_copies")
        if copies.count():
            members = members.join(renamed(copies, {"first_copy_doc_id": "text_doc_id"}), "left_outer", partitions, on=("doc_id",))
        members = arrow_map(
            members,
            lambda batch: batch.drop_columns([name for name in ["text_doc_id"] if name in batch.column_names]).append_column(
                "text_doc_id", pc.coalesce(column_or_nulls(batch, "text_doc_id", pa.string()), batch["doc_id"])
            ),
        )
        members = members.materialize()
        # components grouped by bucket, not one call per component: the ranking is vectorized over
        # a call's components, and per-call overhead times hundreds of thousands of components is
        # what a grouping by root cost
        buckets = 4 * partitions
        bucket = _component_bucket(buckets)
        task = ranking_memory(members, bucket, buckets, partitions, body_bytes_per_shingle(tables))
        log(ensure_ranking_fits(task, smallest_node(), partitions))
        members = _one_body_per_text(tables, members)
        ranked = arrow_map(members, lambda batch: batch.append_column("bucket", bucket(batch["root_doc_id"]))).groupby(
            "bucket", num_partitions=partitions
        ).map_groups(_rank_clusters(params), batch_format="pyarrow")
        singles = arrow_map(placed.filter(expr="is_null(root_doc_id)"), single).materialize()
        every = ranked.union(singles) if singles.count() else ranked  # a union with no rows fails
        tables.write("clusters", every, CLUSTER_SCHEMA)
    finally:
        # the cluster's components' roots: read by now, or never made (a run that fails or has no
        # edges leaves none behind)
        shutil.rmtree(_scratch(tables).root, ignore_errors=True)
    return tables.view("clusters")

