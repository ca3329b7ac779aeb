"""Clusters: connected components of the accepted edges, and one representative per cluster.

``cluster_id`` is ``cluster-`` + the smallest member doc_id. The representative is the member
the keep rule ranks first (``keep/rule.py``); the deduplicated corpus is the representatives'
rows (``sql/deduped_documents.sql``).

Components are transitive: A ~ B and B ~ C put C with A even when J(A, C) is low, so every
member's exact Jaccard with its representative is recorded (verification's where it scored the
pair, else measured here), and a member below the threshold is *chained*. In ``star`` mode a
component is split instead: its best-ranked document keeps the members at or above the threshold
with it, and the rest are split again the same way.
"""

from __future__ import annotations

import gc
from dataclasses import replace
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..sketch import kernels
from ..util.errors import InconsistentTables
from ..keep.columns import typed_params
from ..pipeline.step_params import ClusterParams
from ..sketch.fingerprints import kernel_blocks
from ..read.ingest import document_bodies
from ..storage.store import TableBuild
from ..util.streams import Progress, ThroughputLog
from ..text.normalize import Shingling
from ..verify.jaccard import shingle_sets
from ..verify.pairs import ensure_memory, first_copies
from ..storage.tables import Tables, sql, sql_over


Node = TypeVar("Node")
# the decision of a document that matches a reference document (reference_matches)
MATCHED_REFERENCE = "matched_reference"


def component_roots(connection: duckdb.DuckDBPyConnection, tables: Tables) -> pa.Table:
    """Each member of a duplicate component, the component's smallest doc_id, and the document
    whose text it has (its first copy, or itself). networkx finds
    the components of the accepted edges LSH found; an exact copy then joins the component of its
    first copy (``first_copies``), so the graph holds one node per distinct text and the other
    edges with copies, which connect nothing more, are never read. Documents without an edge are
    left out; the clusters query makes them singletons."""
    # a document that matches a reference (reference_matches) is removed for it, and joins nothing
    edges = connection.execute(
        f"select left_doc_id, right_doc_id from {tables.duplicate_pairs} where found_by = 'lsh' "
        f"and left_doc_id not in (select doc_id from {tables.reference_matches}) "
        f"and right_doc_id not in (select doc_id from {tables.reference_matches})"
    ).fetchall()
    connection.register("lsh_components", edge_components(edges).rename_columns(["doc_id", "component"]))
    # a content_hash pair has Jaccard 1, so every one is an edge too: read them there
    edge_tables = replace(tables, candidate_pairs=tables.duplicate_pairs)
    connection.register("first_copies", first_copies(connection, edge_tables))
    try:
        return connection.sql(
            """
            with members as (
              select l.doc_id, l.component, l.doc_id as text_doc_id from lsh_components l
              union all
              select c.doc_id, coalesce(l.component, c.first_copy_doc_id), c.first_copy_doc_id
              from first_copies c
              left join lsh_components l on l.doc_id = c.first_copy_doc_id
              union all
              select distinct c.first_copy_doc_id, c.first_copy_doc_id, c.first_copy_doc_id
              from first_copies c
              anti join lsh_components l on l.doc_id = c.first_copy_doc_id
            )
            select doc_id, min(doc_id) over (partition by component) as root_doc_id, text_doc_id
            from members
            where doc_id not in (select doc_id from {reference_matches})
            """.format(reference_matches=tables.reference_matches)
        ).to_arrow_table()
    finally:
        connection.unregister("lsh_components")
        connection.unregister("first_copies")


def member_decision_sql(members: str) -> str:
    """The cluster rule's decisions (``sql/member_decision.sql``) over ``members``, a relation's
    name or a parenthesized query; bind the threshold as its header says."""
    return sql_over("member_decision", members=members)


def decided_members(members: pa.Table, threshold: float) -> pa.Table:
    """The cluster rule's decisions over an Arrow table of members, as the DuckDB engine makes
    them: for an engine that clusters elsewhere (the ray engine's batches)."""
    with duckdb.connect() as connection:
        connection.register("members", members)
        return connection.sql(member_decision_sql("members"), params=[threshold]).to_arrow_table()


def connected_components(edges: Iterable[tuple[Node, Node]]) -> list[list[Node]]:
    """The connected components of the graph of ``edges``, each sorted, in the order of their
    smallest nodes: the one place a graph is clustered in this process (networkx), for one-shot
    runs and incremental batches alike (the ray engine's are ``distributed/components.py``)."""
    with _collector_paused():
        import networkx as nx  # here: its import alone takes half a second of every run's start

        return sorted((sorted(component) for component in nx.connected_components(nx.Graph(edges))), key=lambda c: c[0])


def edge_components(edges: Iterable[tuple[str, str]]) -> pa.Table:
    """``doc_id``, ``root_doc_id``: every document of an edge and the smallest doc_id of its
    connected component."""
    members, roots = [], []
    for component in connected_components(edges):
        members.extend(component)
        roots.extend([component[0]] * len(component))
    return pa.table({"doc_id": pa.array(members, pa.string()), "root_doc_id": pa.array(roots, pa.string())})


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


class TextScores:
    """Exact Jaccard of pairs of texts (by text index): verification's where it scored the pair
    (``sql/component_scores.sql``; None: none known), otherwise measured here over the 64-bit
    shingle hashes of the texts :meth:`shingle` was given."""

    def __init__(self, scored: pa.Table | None, texts: int):
        self.texts = texts
        self.keys, self.jaccard = np.zeros(0, np.int64), np.zeros(0)
        if scored is not None:
            keys = self._keys(scored.column("left_index").to_numpy(), scored.column("right_index").to_numpy())
            order = np.argsort(keys)
            self.keys, self.jaccard = keys[order], scored.column("jaccard").to_numpy()[order]
        self.row = np.full(texts, -1, dtype=np.int64)  # a text's row in the shingle sets, if shingled
        self.values, self.offsets = np.zeros(0, np.uint64), np.zeros(1, np.int64)

    def _keys(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        left, right = left.astype(np.int64), right.astype(np.int64)
        return np.minimum(left, right) * self.texts + np.maximum(left, right)

    def known(self, left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(whether verification scored each pair, its Jaccard there, 0 where not)."""
        keys = self._keys(left, right)
        if not len(self.keys):
            return np.zeros(len(keys), dtype=bool), np.zeros(len(keys))
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        found = self.keys[at] == keys
        return found, np.where(found, self.jaccard[at], 0.0)

    def shingle(self, texts: np.ndarray, values: np.ndarray, offsets: np.ndarray) -> None:
        """Take the shingle sets (CSR) of ``texts``, the only ones :meth:`measured` can use
        (called once: the first round decides every text a later round can need)."""
        self.row[texts] = np.arange(len(texts), dtype=np.int64)
        self.values, self.offsets = values, offsets

    def measured(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        rows_left, rows_right = self.row[left], self.row[right]
        if (rows_left < 0).any() or (rows_right < 0).any():
            raise RuntimeError("a pair to measure has a text that was not shingled")
        return kernels.pair_jaccard_kernel(self.values, self.offsets, rows_left, rows_right, kernel_blocks())


def star_members(
    connection: duckdb.DuckDBPyConnection,
    tables: Tables,
    roots: pa.Table,
    params: ClusterParams,
    log: Progress | None = None,
) -> pa.Table:
    """Each member of a duplicate component (``roots``, from :func:`component_roots`), its
    cluster's representative, its rank in its cluster by the params' keep policy (``keep/rule.py``),
    why it was not kept, and its exact Jaccard with the representative.

    ``components``: the representative is the component's best-ranked document. ``star``: the
    best-ranked document of what is left of a component takes the members at or above the
    threshold with it; rounds go on until none is left. Every round measures with at most one
    kernel call over all components at once; a component of n members that splits into s
    clusters costs up to n·s comparisons, fewer where the sizes alone rule a pair out (J <=
    smaller / larger set). Two copies of one text score 1.

    A pair verification scored (``scored_pairs``) keeps its Jaccard there; the others are
    measured over the 64-bit shingle hashes (verification's under ``fss``; the string Jaccard of
    ``blake2b`` differs only where two shingles collide). Most members are scored with their
    representative, so only the components the first round does not settle are read and
    shingled: those with a pair left to measure, or (star) a member left over, whose later rounds
    pair it with other members. The shingling's progress goes to ``log``."""
    connection.register("component_roots", roots)
    try:
        members = connection.sql(
            sql_over(
                "component_members", documents=tables.documents, fingerprinted=tables.fingerprinted,
                keep_columns=params.keep.select_list("d"),
            )
        ).to_arrow_table()
        members = members.take(params.keep.order(members, within="component_index"))
        texts = connection.sql(sql("component_texts", tables)).to_arrow_table()
        scores = TextScores(connection.sql(sql("component_scores", tables)).to_arrow_table(), texts.num_rows)
    finally:
        connection.unregister("component_roots")
    distinct_texts = pc.count_distinct(roots.column("text_doc_id")).as_py()
    # the three queries number the texts alike only when every member and text has its rows (and
    # every text is a member, so each is in documents and its body is found below)
    if members.num_rows != roots.num_rows or texts.num_rows != distinct_texts:
        raise InconsistentTables(
            f"{roots.num_rows - members.num_rows} members and {distinct_texts - texts.num_rows} texts of the "
            "duplicate components are missing from documents or fingerprinted: re-materialize documents "
            "and everything downstream"
        )
    sizes = texts.column("shingle_count").to_numpy().astype(np.int64)

    def shingle(unsettled: np.ndarray) -> None:
        _shingle_components(
            connection, tables, scores, texts.column("text_doc_id"), sizes, unsettled, params.shingling,
            params.memory_budget_mb, log,
        )

    representative, jaccard = choose_representatives(
        members.column("component_index").to_numpy().astype(np.int64),
        members.column("text_index").to_numpy().astype(np.int64), sizes, params, scores, shingle,
    )
    doc_ids = members.column("doc_id")
    return pa.table(
        {
            "doc_id": doc_ids,
            "representative_doc_id": doc_ids.take(pa.array(representative)),
            "representative_rank": pa.array(ranks_in_clusters(representative)),
            "jaccard_to_representative": pa.array(jaccard),
            "keep_reason": params.keep.reasons(members, representative),
        }
    )


def choose_representatives(
    component: np.ndarray,
    text: np.ndarray,
    sizes: np.ndarray,
    params: ClusterParams,
    scores: TextScores,
    shingle: Callable[[np.ndarray], None],
) -> tuple[np.ndarray, np.ndarray]:
    """Each member's representative (its row) and Jaccard with it, by the rounds
    :func:`star_members` describes, for members (rows) in keep-rule order within their components
    (``component``, each contiguous) whose texts are ``text`` (indexes of ``sizes``, the texts'
    shingle counts, and of ``scores``). ``shingle`` is called once, after the first round, with
    the texts of every component a measurement can need (repeats allowed), and gives ``scores``
    their shingle sets: every engine decides by this one loop."""
    representative = np.full(len(text), -1, dtype=np.int64)
    jaccard = np.zeros(len(text), dtype=np.float64)
    left = np.arange(len(text), dtype=np.int64)
    first_round = True
    while len(left):
        starts = np.r_[True, component[left][1:] != component[left][:-1]]
        best = left[starts][np.cumsum(starts) - 1]
        same = text[left] == text[best]
        scored = ~same
        if params.mode == "star":  # only pairs whose sizes allow the threshold
            small, large = np.sort(np.stack([sizes[text[left]], sizes[text[best]]]), axis=0)
            scored &= small >= params.threshold * large
        round_scores = same.astype(np.float64)
        pairs = np.flatnonzero(scored)
        known, known_jaccard = scores.known(text[left][pairs], text[best][pairs])
        round_scores[pairs[known]] = known_jaccard[known]
        measure = pairs[~known]
        if first_round:
            unsettled = np.zeros(len(left), dtype=bool)
            unsettled[measure] = True
            if params.mode == "star":  # a member not taken now is paired again in a later round
                unsettled |= ~same & (round_scores < params.threshold)
            shingle(text[np.isin(component, component[left[unsettled]])])
            first_round = False
        if len(measure):
            round_scores[measure] = scores.measured(text[left][measure], text[best][measure])
        taken = round_scores >= params.threshold if params.mode == "star" else np.ones(len(left), dtype=bool)
        representative[left[taken]] = best[taken]
        jaccard[left[taken]] = round_scores[taken]
        left = left[~taken]
    return representative, jaccard


def ranks_in_clusters(representative: np.ndarray) -> np.ndarray:
    """Each member's rank in its cluster (1: the representative), from members in keep-rule
    order within their components: a cluster is part of one component, so its members keep
    that order."""
    order = np.argsort(representative, kind="stable")
    grouped = representative[order]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    sizes = np.diff(np.r_[starts, len(grouped)])
    ranks = np.empty(len(representative), dtype=np.int64)
    ranks[order] = np.arange(len(grouped)) - np.repeat(starts, sizes) + 1
    return ranks


def _shingle_components(
    connection: duckdb.DuckDBPyConnection,
    tables: Tables,
    scores: TextScores,
    text_doc_ids: pa.ChunkedArray,
    sizes: np.ndarray,
    texts: np.ndarray,
    shingling: Shingling,
    memory_budget_mb: int,
    log: Progress | None,
) -> None:
    """Read and shingle the bodies of ``texts`` (text indexes, repeats allowed) for ``scores``,
    the progress to ``log``."""
    texts = np.unique(texts)
    if not len(texts):
        return
    bodies = document_bodies(connection, tables.documents, text_doc_ids.take(pa.array(texts)))
    counts = sizes[texts]
    ensure_memory(bodies.nbytes + int(counts.sum()) * 8, memory_budget_mb, "Clustering the duplicate components")
    shingled = log and ThroughputLog(log, "clusters", len(texts), "component texts shingled").advance
    scores.shingle(texts, *shingle_sets(bodies.column("body"), shingling, counts, shingled))


def build_clusters(
    connection: duckdb.DuckDBPyConnection,
    tables: Tables,
    params: ClusterParams,
    log: Progress | None = None,
) -> TableBuild:
    """One row per document: its cluster, the cluster's size and representative (the keep rule's
    first), its exact Jaccard with the representative and whether it is below the threshold
    (chained), its decision. Progress goes to ``log``."""
    params = typed_params(connection, params, tables)
    members = star_members(connection, tables, component_roots(connection, tables), params, log)
    members = members.append_column("reference_cluster_id", pa.nulls(members.num_rows, pa.string()))
    matched = reference_members(connection, tables).drop_columns("cluster_size")
    members = pa.concat_tables([members, matched.cast(members.schema)])
    decided = member_decision_sql("(" + sql("clusters", tables) + ")")
    return TableBuild(
        sql=(
            "select * exclude (document_position, reference_cluster_id) "
            f"replace (if(reference_cluster_id is null, decision, '{MATCHED_REFERENCE}') as decision) "
            f"from ({decided}) order by document_position"
        ),
        arrow_inputs={"star_members": members},
        params=[params.threshold],
    )


def reference_members(connection: duckdb.DuckDBPyConnection, tables: Tables) -> pa.Table:
    """The documents that match a reference, as star_members' rows: the reference document
    stands where a representative would, ranked ahead of them (it is never removed); each is in
    the cluster of its reference document's matches (``reference_cluster_id``, of
    ``cluster_size`` documents)."""
    return connection.sql(
        f"""
        select *, count(*) over (partition by reference_cluster_id) as cluster_size
        from (
          select doc_id, reference_doc_id as representative_doc_id, 2::bigint as representative_rank,
                 jaccard as jaccard_to_representative,
                 'matches ' || reference_doc_id || ' of reference ' || reference || ', which is never removed' as keep_reason,
                 'reference:' || reference || ':' || reference_doc_id as reference_cluster_id
          from {tables.reference_matches}
        )
        order by doc_id
        """
    ).to_arrow_table()


def build_deduped_documents(tables: Tables) -> TableBuild:
    """A view: the representatives' rows are already in ``documents``; copying the corpus text
    again would cost a full write of every kept body."""
    return TableBuild(sql=sql("deduped_documents", tables), view=True)
