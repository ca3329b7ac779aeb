"""The ray engine's ``clusters``, on Daft (its Ray runner, on the run's Ray session): connected
components (on the driver while the edges are few), each split into clusters (one, or the stars
of ``cluster_mode: star``) with every member ranked by the keep rule and measured against its
representative, by the DuckDB engine's rules (``cluster/components.py``) per bucket of whole
components."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from functools import reduce

import daft
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from daft import DataType, col, lit
from daft.functions import coalesce, when

from ..sketch import kernels
from ..verify.jaccard import shingle_sets
from ..cluster.components import (
    MATCHED_REFERENCE, TextScores, choose_representatives, decided_members, edge_components, ranks_in_clusters,
)
from ..keep.columns import prepared
from ..pipeline.step_params import ClusterParams
from ..storage.store import TableBuild
from .components import ROOTS_TABLE, connected_components
from .daft_tables import (
    CALL_CPUS, frame, hash_joined, join_partitions, mapped_batches, mapped_groups, rows_among, scratch_folder, staged,
    write_positioned_frame,
)
from .memory_plan import available_memory, body_bytes_per_shingle, components_here, ensure_ranking_fits, ranking_memory, smallest_node
from .datasets import POSITION, read_table, table_folder, table_rows
from .ray_tables import CLUSTER_SCHEMA, RayTables


def _rank_clusters(params: ClusterParams) -> Callable[[pa.Table], pa.Table]:
    """Whole duplicate components' rows (any number of components, each complete): each member's
    representative and exact Jaccard with it by the DuckDB engine's rounds
    (``cluster/components.py``'s ``choose_representatives``: the component's best-ranked member, or in ``star`` mode
    the stars) and its rank in its cluster by the keep rule (``keep/rule.py``), for all
    components at once. Jaccard is measured over 64-bit shingle hashes (as verification's under
    ``fss``); each distinct text is shingled once, and copies of one text score 1."""

    def rank(members: pa.Table) -> pa.Table:
        kernels.use_threads(CALL_CPUS)
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


def _one_body_per_text(tables: RayTables, members: daft.DataFrame, count: int, partitions: int) -> daft.DataFrame:
    """``members`` (``count`` of them) with the body of each distinct text on its first copy's
    row, and none on a copy's: a copy is measured by its first copy's text, so a component of
    200,000 copies of one page holds one body, not 200,000. The bodies are those of the members'
    texts only (``rows_among``: 1M documents' bodies hashed with 140,000 members took most of
    the step). One left join, in ``partitions``, on a key that is null on a copy's row (a null
    key matches nothing), not the texts and the copies filtered apart: Daft 0.7.26 skips whole
    Parquet files wrongly for a filter comparing two of their columns, and read 0 of a members
    file's 3,362 copies with ``doc_id != text_doc_id`` (docs/scale-out.md, "A Daft filter that skips files")."""
    key = when(col("doc_id") == col("text_doc_id"), col("doc_id")).otherwise(lit(None).cast(DataType.string()))
    members = members.with_column("text_key", key)
    bodies = frame(tables.root, "documents", ["doc_id", "body"]).select(col("doc_id").alias("text_key"), col("body"))
    bodies = rows_among(bodies, members.select("text_key"), "text_key", count)
    return hash_joined(members, bodies, "text_key", partitions, how="left").exclude("text_key")


def _component_bucket(roots: daft.Expression, buckets: int) -> daft.Expression:
    """Each root's bucket of ``buckets``: the same for every member of a component (crc32 of the
    root, the same in every process), so a grouping by bucket hands each call whole components."""

    @daft.func.batch(return_dtype=DataType.int64())
    def bucket(names: daft.Series) -> pa.Array:
        names = names.to_pylist()
        hashes = np.fromiter((zlib.crc32(root.encode()) for root in names), dtype=np.int64, count=len(names))
        return pa.array(hashes % buckets)

    return bucket(roots)


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
    # the rule the DuckDB engine decides by, in one place
    return decided_members(members, threshold).cast(CLUSTER_SCHEMA)


# edges that connect nothing more: an lsh_via_copy pair's copy hangs from its first copy by a
# content_hash edge, and the first copy from the other document by the lsh edge it was found by
IMPLIED = "lsh_via_copy"


def _without(rows: daft.DataFrame, matched: daft.DataFrame | None) -> daft.DataFrame:
    """``rows`` but those of the documents of ``matched`` (None: all of them)."""
    return rows if matched is None else rows.join(matched.select("doc_id"), on="doc_id", how="anti")


def _accepted_edges(tables: RayTables, matched: daft.DataFrame | None) -> daft.DataFrame:
    """The accepted edges the components are made of: not ``lsh_via_copy``'s, and none with a
    document of ``matched`` (it matches a reference; so does every copy of its text), which is
    removed for its reference and joins nothing."""
    edges = frame(tables.root, "duplicate_pairs", ["left_doc_id", "right_doc_id", "found_by"]).where(col("found_by") != IMPLIED)
    for end in ("left_doc_id", "right_doc_id") if matched is not None else ():
        edges = edges.join(matched.select(col("doc_id").alias(end)), on=end, how="anti")
    return edges


def _component_roots(
    tables: RayTables, scratch: RayTables, edges: daft.DataFrame, count: int, matched: pa.Array, driver_edges: int,
    log: Callable[[str], None],
) -> daft.DataFrame:
    """Every document of an accepted edge (``edges``, ``count`` of them, none with a document of
    ``matched``) and its component's smallest doc_id: on this node (networkx, as the DuckDB
    engine) while the edges are at most ``driver_edges`` and take at most half the memory free
    here (the cluster's rounds of shuffles cost more than one pass over a small list), else on
    the cluster (``components.py``), whose roots are read from their Parquet files in
    ``scratch``."""
    here, where = components_here(count, driver_edges, available_memory())
    log(where)
    if not here:
        connected_components(edges, scratch, log=log)
        return frame(scratch.root, ROOTS_TABLE)
    # read here from the files as they lie: quicker than collecting the query
    pairs = read_table(tables.root, "duplicate_pairs", ["left_doc_id", "right_doc_id", "found_by"])
    pairs = pairs.filter(pc.not_equal(pairs["found_by"], IMPLIED))
    if len(matched):
        pairs = pairs.filter(pc.invert(pc.or_(pc.is_in(pairs["left_doc_id"], matched), pc.is_in(pairs["right_doc_id"], matched))))
    return daft.from_arrow(edge_components(zip(pairs["left_doc_id"].to_pylist(), pairs["right_doc_id"].to_pylist())))


# the members' table in the step's scratch folder: read by the memory plan and the ranking
MEMBERS_TABLE = "members"
# the documents that match a reference, in the same folder
MATCHED_TABLE = "matched"


def _members(tables: RayTables, scratch: RayTables, placed: daft.DataFrame, buckets: int, partitions: int) -> daft.DataFrame:
    """The documents of a component (``placed`` with a root), each with the document whose text
    it has (its first copy, or itself, joined in ``partitions``) and its component's bucket;
    staged in ``scratch``, since the memory plan and the ranking both read them."""
    copies = frame(tables.root, "first_copies").select(col("doc_id"), col("first_copy_doc_id").alias("text_doc_id"))
    members = hash_joined(placed.where(col("root_doc_id").not_null()), copies, "doc_id", partitions, how="left")
    members = members.with_column("text_doc_id", coalesce(col("text_doc_id"), col("doc_id")))
    members = members.with_column("bucket", _component_bucket(col("root_doc_id"), buckets))
    return staged(scratch.root, MEMBERS_TABLE, members)


def _matched_rows(meta: daft.DataFrame, matched: daft.DataFrame, threshold: float) -> daft.DataFrame:
    """The documents that match a reference (``matched``: ``reference_members``' rows), each in
    its reference document's cluster, decided ``matched_reference``."""

    def rows(batch: pa.Table) -> pa.Table:
        decided = _cluster_rows(
            batch,
            cluster_id=batch["reference_cluster_id"],
            size=batch["cluster_size"].to_numpy(),
            ranks=batch["representative_rank"].to_numpy(),
            representatives=batch["representative_doc_id"],
            jaccard=batch["jaccard_to_representative"],
            reasons=batch["keep_reason"],
            threshold=threshold,
        )
        at = decided.schema.get_field_index("decision")
        return decided.set_column(at, "decision", pa.array([MATCHED_REFERENCE] * decided.num_rows, pa.string()))

    return mapped_batches(meta.join(matched, on="doc_id"), rows, CLUSTER_SCHEMA)


def clusters(
    tables: RayTables, params: ClusterParams, driver_edges: int, matched: pa.Table, log: Callable[[str], None]
) -> TableBuild:
    """``clusters``, on Daft: connected components of the accepted edges (``_component_roots``),
    grouped by bucket of their roots, each bucket one call with its whole rows
    (``_rank_clusters``), every member ranked by the params' keep policy and measured against
    its representative; a document that matches a reference (``matched``, as
    ``cluster/components.py``'s ``reference_members`` gives them) in its reference document's
    cluster; every other document its own cluster."""
    read = ["doc_id", "source_file", "input_row", "domain", "crawled_at", POSITION]
    # the keep policy's columns as read; prepared() gives each its rule's field
    read += sorted({rule.column for rule in params.keep.input_columns} - set(read))
    # every join hashed into two partitions a CPU (hash_joined), not one per Parquet file read (42
    # at 1M): the step at 1M on two one-CPU nodes 25.8–30.0 s (30–33 node CPU s) against
    # 98.5–151.5 s (122–144), the members and the documents' rows each read from 4 files, not 42
    partitions = join_partitions()
    sketches = frame(tables.root, "fingerprinted", ["doc_id", "token_count", "shingle_count"])
    meta = hash_joined(frame(tables.root, "documents", read), sketches, "doc_id", partitions)

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

    def write(*parts: daft.DataFrame) -> TableBuild:
        write_positioned_frame(tables.root, "clusters", reduce(daft.DataFrame.concat, parts), CLUSTER_SCHEMA)
        return tables.view("clusters")

    # the components' rounds and roots, the members, and the documents that match a reference
    with scratch_folder(tables.root, "components") as folder:
        scratch = RayTables(folder, tables.partitions)
        matched_ids, matched_rows = matched["doc_id"].combine_chunks(), None
        if len(matched_ids):  # written once and read where needed: a reference may match most of the input
            table_folder(folder, MATCHED_TABLE).mkdir(parents=True)
            pq.write_table(matched, table_folder(folder, MATCHED_TABLE) / "matched.parquet")
            matched_rows = frame(folder, MATCHED_TABLE)
        references = [] if matched_rows is None else [_matched_rows(meta, matched_rows, params.threshold)]
        edges = _accepted_edges(tables, matched_rows)
        count = edges.count_rows() if table_rows(tables.root, "duplicate_pairs") else 0
        if not count:
            return write(mapped_batches(_without(meta, matched_rows), single, CLUSTER_SCHEMA), *references)
        # every document once with its root (null: no edge), split into components and singletons
        roots = _component_roots(tables, scratch, edges, count, matched_ids, driver_edges, log)
        placed = hash_joined(meta, roots, "doc_id", partitions, how="left")
        # components grouped by bucket, not one call per component: the ranking is vectorized over
        # a call's components, and per-call overhead times hundreds of thousands of components is
        # what a grouping by root cost
        buckets = 4 * tables.partitions
        members = _members(tables, scratch, placed, buckets, partitions)
        task = ranking_memory(members, buckets, tables.partitions, body_bytes_per_shingle(tables))
        log(ensure_ranking_fits(task, smallest_node(), tables.partitions))
        # the bodies' join holds a partition's bodies: no more than a ranking task's, as planned
        bodied = _one_body_per_text(tables, members, table_rows(folder, MEMBERS_TABLE), max(partitions, tables.partitions))
        ranked = mapped_groups(bodied, "bucket", _rank_clusters(params), CLUSTER_SCHEMA, tables.partitions)
        singles = mapped_batches(_without(placed.where(col("root_doc_id").is_null()), matched_rows), single, CLUSTER_SCHEMA)
        return write(ranked, singles, *references)

