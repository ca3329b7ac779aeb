"""Clusters: connected components of the accepted edges, and one representative per cluster.

``cluster_id`` is ``cluster-`` + the smallest member doc_id. The representative is the newest
``crawled_at``, then the most tokens, then the smallest doc_id (``sql/clusters.sql``); the
deduplicated corpus is the representatives' rows (``sql/deduped_documents.sql``).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
import networkx as nx
import pyarrow as pa

from .store import TableBuild
from .tables import Tables, sql


def component_roots(connection: duckdb.DuckDBPyConnection, tables: Tables) -> pa.Table:
    """Each member of a duplicate component and the component's smallest doc_id. networkx finds
    the components of the accepted edges LSH found; an exact copy then takes the root of its
    first copy (the left side of its ``content_hash`` edge), so the graph holds one node per
    distinct text and the other edges with copies, which connect nothing more, are never read.
    Documents without an edge are left out; the clusters query makes them singletons."""
    edges = connection.execute(
        f"select left_doc_id, right_doc_id from {tables.duplicate_pairs} where found_by = 'lsh'"
    ).fetchall()
    members, roots = [], []
    with _collector_paused():
        for component in nx.connected_components(nx.Graph(edges)):
            root = min(component)
            members.extend(component)
            roots.extend([root] * len(component))
    lsh_roots = pa.table(
        {"doc_id": pa.array(members, pa.string()), "root_doc_id": pa.array(roots, pa.string())}
    )
    connection.register("lsh_roots", lsh_roots)
    try:
        return connection.sql(
            f"""
            select doc_id, root_doc_id from lsh_roots
            union all
            select p.right_doc_id, coalesce(r.root_doc_id, p.left_doc_id)
            from {tables.duplicate_pairs} p
            left join lsh_roots r on r.doc_id = p.left_doc_id
            where p.found_by = 'content_hash'
            """
        ).to_arrow_table()
    finally:
        connection.unregister("lsh_roots")


@contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: a graph is a dict per node, and the collector would
    walk them again and again while they are made."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def build_clusters(connection: duckdb.DuckDBPyConnection, tables: Tables) -> TableBuild:
    """One row per document: its cluster, the cluster's size and representative, its decision."""
    return TableBuild(
        sql=sql("clusters", tables),
        arrow_inputs={"component_roots": component_roots(connection, tables)},
    )


def build_deduped_documents(tables: Tables) -> TableBuild:
    """A view: the representatives' rows are already in ``documents``; copying the corpus text
    again would cost a full write of every kept body."""
    return TableBuild(sql=sql("deduped_documents", tables), view=True)
