"""Clusters: connected components of the accepted edges, and one representative per cluster.

``cluster_id`` is ``cluster-`` + the smallest member doc_id. The representative is the newest
``crawled_at``, then the most tokens, then the smallest doc_id (``sql/clusters.sql``); the
deduplicated corpus is the representatives' rows (``sql/deduped_documents.sql``).
"""

from __future__ import annotations

import gc
from dataclasses import replace
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
import networkx as nx
import pyarrow as pa

from .store import TableBuild
from .verify import first_copies
from .tables import Tables, sql


def component_roots(connection: duckdb.DuckDBPyConnection, tables: Tables) -> pa.Table:
    """Each member of a duplicate component and the component's smallest doc_id. networkx finds
    the components of the accepted edges LSH found; an exact copy then joins the component of its
    first copy (``first_copies``), so the graph holds one node per distinct text and the other
    edges with copies, which connect nothing more, are never read. Documents without an edge are
    left out; the clusters query makes them singletons."""
    edges = connection.execute(
        f"select left_doc_id, right_doc_id from {tables.duplicate_pairs} where found_by = 'lsh'"
    ).fetchall()
    members, components = [], []
    with _collector_paused():
        for component in nx.connected_components(nx.Graph(edges)):
            key = min(component)
            members.extend(component)
            components.extend([key] * len(component))
    connection.register(
        "lsh_components",
        pa.table({"doc_id": pa.array(members, pa.string()), "component": pa.array(components, pa.string())}),
    )
    # a content_hash pair has Jaccard 1, so every one is an edge too: read them there
    edge_tables = replace(tables, candidate_pairs=tables.duplicate_pairs)
    connection.register("first_copies", first_copies(connection, edge_tables))
    try:
        return connection.sql(
            """
            with members as (
              select doc_id, component from lsh_components
              union all
              select c.doc_id, coalesce(l.component, c.first_copy_doc_id)
              from first_copies c
              left join lsh_components l on l.doc_id = c.first_copy_doc_id
              union all
              select distinct c.first_copy_doc_id, c.first_copy_doc_id
              from first_copies c
              anti join lsh_components l on l.doc_id = c.first_copy_doc_id
            )
            select doc_id, min(doc_id) over (partition by component) as root_doc_id from members
            """
        ).to_arrow_table()
    finally:
        connection.unregister("lsh_components")
        connection.unregister("first_copies")


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
