"""A batch's decisions: the batch's edges join its documents to the clusters of the earlier
documents they meet (as those clusters were before the batch), a document kept earlier stays kept,
the batch's own documents are ranked by the one-shot keep rule, and two kept documents a batch
joins are recorded as a bridge. The result is staging tables (clusters, members, moves, bridges);
this is the one part of the package that decides, in Python over a graph, rather than in SQL."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

from ..cluster.components import connected_components
from ..keep.rule import KeepPolicy
from ..storage.store import TableBuild, table_exists
from .index_tables import BRIDGE_COLUMNS, KEPT, REMOVED, IndexTables


def _members_before(tables: IndexTables) -> str:
    """Each earlier document's cluster before the batch: the current one, with the moves the
    batch made undone when it is in the index already. $1 = batch key, $2 = first position."""
    return f"""
        select m.doc_id, coalesce(mv.previous_cluster_id, m.cluster_id) as cluster_id
        from {tables.members} m
        left join {tables.moves} mv on mv.doc_id = m.doc_id and mv.batch_key = $1
        where m.position < $2
    """


def _cluster_root(cluster_id: str) -> str:
    return cluster_id.removeprefix("cluster-")


@dataclass(frozen=True)
class BatchClusters:
    """What the batch's edges do to the clusters, as staging tables."""

    clusters: TableBuild  # one row per document of the batch, release columns
    members: TableBuild  # the batch's documents and their clusters
    moves: TableBuild  # earlier documents whose cluster is renamed (merged, or a smaller member joined)
    bridges: TableBuild

    def builds(self, tables: IndexTables) -> dict[str, TableBuild]:
        """Staging table -> its build, in the order they are written (members reads clusters)."""
        return {
            tables.staged_clusters: self.clusters,
            tables.staged_members: self.members,
            tables.staged_moves: self.moves,
            tables.staged_bridges: self.bridges,
        }


def build_batch_clusters(
    connection: duckdb.DuckDBPyConnection, tables: IndexTables, key: str, start: int, keep: KeepPolicy
) -> BatchClusters:
    """The batch's decisions, by the one-shot keep policy ``keep`` where they are open: among the
    batch's own documents, and which of the earlier kept documents a removed one names; each
    removed document's reason."""
    edges = connection.execute(
        f"select left_doc_id, right_doc_id from {tables.staged_pairs} where is_duplicate"
    ).fetchall()
    # the batch's documents with an edge; the others are singletons, decided in SQL below
    new = {
        row["doc_id"]: row
        for row in connection.sql(
            f"""
            select f.doc_id, f.token_count, d.domain, d.crawled_at {keep.select_list("d")}
            from {tables.staged_fingerprints} f join {tables.staged_documents} d on d.doc_id = f.doc_id
            semi join (
              select left_doc_id as doc_id from {tables.staged_pairs} where is_duplicate
              union select right_doc_id from {tables.staged_pairs} where is_duplicate
            ) e on e.doc_id = f.doc_id
            """
        ).to_arrow_table().to_pylist()
    }
    old_docs = sorted({doc for edge in edges for doc in edge if doc not in new})
    indexed = table_exists(connection, tables.members)
    old_cluster: dict[str, str] = {}
    if old_docs and indexed:
        connection.register("old_docs", pa.table({"doc_id": pa.array(old_docs, pa.string())}))
        try:
            old_cluster = dict(
                connection.execute(
                    f"select b.doc_id, b.cluster_id from ({_members_before(tables)}) b semi join old_docs o on o.doc_id = b.doc_id",
                    [key, start],
                ).fetchall()
            )
        finally:
            connection.unregister("old_docs")
    # a new document is a node of its own; an earlier one stands for its whole cluster
    components = connected_components(
        tuple(("doc", d) if d in new else ("cluster", old_cluster[d]) for d in (left, right)) for left, right in edges
    )
    affected = sorted({name for component in components for kind, name in component if kind == "cluster"})
    sizes, kept, members_of = _old_clusters(connection, tables, affected, key, start, keep)
    rows, moves, bridges, compared = [], [], [], []
    for component in components:
        docs = keep.ranked([new[name] for kind, name in component if kind == "doc"])
        clusters = [name for kind, name in component if kind == "cluster"]
        cluster_id = "cluster-" + min([row["doc_id"] for row in docs] + [_cluster_root(c) for c in clusters])
        size = len(docs) + sum(sizes[c] for c in clusters)
        earlier_kept = keep.ranked([row for c in clusters for row in kept[c]])
        for rank, row in enumerate(docs, start=len(earlier_kept) + 1):
            representative = earlier_kept[0] if earlier_kept else docs[0]
            rows.append(
                {
                    "doc_id": row["doc_id"],
                    "cluster_id": cluster_id,
                    "cluster_size": size,
                    "representative_rank": rank,
                    "representative_doc_id": representative["doc_id"],
                    "decision": KEPT if row is representative else REMOVED,
                    "representative_batch": representative.get("batch_key", key),
                }
            )
            compared.append((row, representative))
        for old in clusters:
            if old != cluster_id:
                moves.extend({"doc_id": doc, "previous_cluster_id": old, "cluster_id": cluster_id} for doc in members_of[old])
        if len(clusters) > 1:
            best = earlier_kept[0]
            for other in clusters:
                if any(row["doc_id"] == best["doc_id"] for row in kept[other]):
                    continue
                other_best = keep.ranked(kept[other])[0]
                bridges.append(
                    {
                        "cluster_id": cluster_id,
                        "kept_doc_id": best["doc_id"],
                        "kept_batch": best["batch_key"],
                        "other_kept_doc_id": other_best["doc_id"],
                        "other_kept_batch": other_best["batch_key"],
                        "via_doc_ids": ";".join(sorted(row["doc_id"] for row in docs)),
                    }
                )
    decided = pa.Table.from_pylist(
        rows,
        schema=pa.schema(
            [
                ("doc_id", pa.string()), ("cluster_id", pa.string()), ("cluster_size", pa.int64()),
                ("representative_rank", pa.int64()), ("representative_doc_id", pa.string()),
                ("decision", pa.string()), ("representative_batch", pa.string()),
            ]
        ),
    ).append_column("keep_reason", _reasons(compared, keep))
    clusters = TableBuild(
        sql=f"""
        select
          $1 + f.rowid as position,
          f.doc_id,
          d.source_file,
          d.input_row,
          coalesce(c.cluster_id, 'cluster-' || f.doc_id) as cluster_id,
          coalesce(c.cluster_size, 1) as cluster_size,
          d.crawled_at,
          f.token_count,
          coalesce(c.representative_rank, 1) as representative_rank,
          coalesce(c.representative_doc_id, f.doc_id) as representative_doc_id,
          coalesce(c.decision, '{KEPT}') as decision,
          coalesce(c.representative_batch, $2) as representative_batch,
          c.keep_reason
        from {tables.staged_fingerprints} f
        join {tables.staged_documents} d on d.doc_id = f.doc_id
        left join decided c on c.doc_id = f.doc_id
        order by position
        """,
        params=[start, key],
        arrow_inputs={"decided": decided},
    )
    return BatchClusters(
        clusters=clusters,
        members=TableBuild(sql=f"select position, doc_id, cluster_id from {tables.staged_clusters} order by position"),
        moves=TableBuild(
            sql="select * from moves order by doc_id",
            arrow_inputs={
                "moves": pa.Table.from_pylist(
                    moves,
                    schema=pa.schema(
                        [("doc_id", pa.string()), ("previous_cluster_id", pa.string()), ("cluster_id", pa.string())]
                    ),
                )
            },
        ),
        bridges=TableBuild(
            sql="select * from bridges order by cluster_id, other_kept_doc_id",
            arrow_inputs={
                "bridges": pa.Table.from_pylist(
                    bridges, schema=pa.schema([(name, pa.string()) for name in BRIDGE_COLUMNS])
                )
            },
        ),
    )


def _reasons(compared: list[tuple[dict, dict]], keep: KeepPolicy) -> pa.Array:
    """Why each removed document of the batch went: the keep policy's reason against its
    representative, or, where the policy would have kept it, that an earlier batch's kept copy
    stays kept (decisions are final)."""
    if not compared:
        return pa.array([], pa.string())
    rows = [row for row, _ in compared] + [representative for _, representative in compared]
    names = keep.member_columns
    members = pa.Table.from_pylist([{name: row[name] for name in names} for row in rows])
    representatives = np.arange(len(compared), len(rows))  # each row's representative is its copy below
    reasons = keep.reasons(members, np.concatenate([representatives, representatives]))
    return pa.array(
        [
            reason if reason is not None or row is representative
            else f"kept earlier: {representative['doc_id']} of batch {representative.get('batch_key')} stays kept"
            for reason, (row, representative) in zip(reasons.to_pylist()[: len(compared)], compared)
        ],
        pa.string(),
    )


def _old_clusters(
    connection: duckdb.DuckDBPyConnection, tables: IndexTables, affected: list[str], key: str, start: int, keep: KeepPolicy
) -> tuple[dict[str, int], dict[str, list[dict]], dict[str, list[str]]]:
    """For each earlier cluster the batch joins: its size, its kept documents and its members."""
    sizes: dict[str, int] = {c: 0 for c in affected}
    kept: dict[str, list[dict]] = {c: [] for c in affected}
    members: dict[str, list[str]] = {c: [] for c in affected}
    if not affected:
        return sizes, kept, members
    connection.register("affected", pa.table({"cluster_id": pa.array(affected, pa.string())}))
    try:
        for doc_id, cluster_id in connection.execute(
            f"select b.doc_id, b.cluster_id from ({_members_before(tables)}) b semi join affected a on a.cluster_id = b.cluster_id order by b.doc_id",
            [key, start],
        ).fetchall():
            members[cluster_id].append(doc_id)
            sizes[cluster_id] += 1
        for row in connection.sql(
            f"""
            select c.doc_id, c.batch_key, d.domain, c.crawled_at, c.token_count, b.cluster_id {keep.select_list("d")}
            from {tables.clusters} c
            join {tables.documents} d on d.doc_id = c.doc_id
            join ({_members_before(tables)}) b on b.doc_id = c.doc_id
            semi join affected a on a.cluster_id = b.cluster_id
            where c.decision = '{KEPT}' and c.position < $2
            """,
            params=[key, start],
        ).to_arrow_table().to_pylist():
            kept[row["cluster_id"]].append(row)
    finally:
        connection.unregister("affected")
    return sizes, kept, members
