"""Duplicate clusters: connected components of the accepted-edge graph."""

from __future__ import annotations

from collections.abc import Iterable

import networkx as nx
import pandas as pd

CLUSTER_COLUMNS = ["doc_id", "cluster_id", "cluster_size"]


def connected_clusters(doc_ids: Iterable[str], edges: Iterable[tuple[str, str]]) -> pd.DataFrame:
    """Every document in exactly one cluster, named ``cluster-`` + its smallest ``doc_id``.

    Transitive matches join: A~B and B~C put A, B and C together even if A and C never matched.
    """
    graph = nx.Graph()
    graph.add_nodes_from(doc_ids)
    graph.add_edges_from(edges)
    rows = []
    for component in nx.connected_components(graph):
        cluster_id = "cluster-" + min(component)
        rows.extend((doc_id, cluster_id, len(component)) for doc_id in component)
    frame = pd.DataFrame(rows, columns=CLUSTER_COLUMNS).astype({"cluster_size": "int64"})
    return frame.sort_values(["cluster_id", "doc_id"], ignore_index=True)
