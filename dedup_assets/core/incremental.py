"""Incremental batches: each batch is deduplicated against every document of the earlier batches,
kept or removed, with decisions that are never taken back.

The index (schema ``incremental``) holds what every earlier batch added: its documents (without
bodies), fingerprints with their position in the order batches were added, the band keys of each
distinct text (``band_index``: what a new batch joins against), the scored pairs, each document's
decision, its current cluster, and the bridges. Bodies, signatures and band keys, which verifying a
pair with an earlier document needs, are in per-batch payload files (``payloads.py``), so
verification never re-reads old input files.

A batch is staged first (``staged_*`` tables, one step each) and added to the index in one
transaction at the end, so a batch that fails half way adds nothing. Staging reads the index as
it was before the batch (positions below the batch's first position), so the latest batch can be
staged again while it is in the index: adding it replaces it.

Pairs: the one-shot candidate and scoring queries run on the batch's *universe*
(``sql/universe_earlier.sql``) and the pairs with a document of the batch are kept. A copy
group's first copy is the first document in input order, which a later batch never changes, so
the union of every batch's pairs is the pair set of one run over all batches.

Clusters: a new document joins the clusters of the earlier documents it has edges with. A document
kept earlier stays kept; a new document in a cluster with a kept document is removed in its
favour; a cluster of new documents only keeps one by the one-shot keep rule (``keep_rule.py``).
A batch that joins two clusters that each have a kept document records a bridge and keeps both.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb
import networkx as nx
import numpy as np
import pyarrow as pa

from . import payloads
from .capabilities import CAPABILITIES

from .keep_rule import keep_ranked
from .lsh import BucketPressure, build_band_memberships, build_candidate_pairs
from .readers import InputError, InputStats
from .release import DEDUPED_DOCUMENTS
from .errors import DedupError
from .setting_lineage import STAGE_SETTINGS
from .settings import Settings, SettingsError
from .step_params import PairLimits, SketchParams, Thresholds
from .store import TableBuild, database_path, read_lineage, table_exists, transaction, write_lineage, write_table
from .tables import PIPELINE_TABLES, Tables, sql
from .verify import build_scored_pairs

INDEX_SCHEMA = "incremental"
# The version of the index tables' columns, the index's own ``table_layout``: raised when an index
# table changes, not with the one-shot tables' TABLE_LAYOUT (3: first copies in input order; 4:
# doc_ids kept byte for byte, where an index of layout 3 holds them trimmed; 5: tokens in every
# script, so an index fingerprinted with clause-long Chinese tokens takes no new batch, and the
# input contract, where an index of layout 4 rejected undated rows).
INDEX_LAYOUT = 5
# what changes the tables a batch adds (the recall audit reads them and adds nothing)
INDEX_SETTINGS = tuple(
    name
    for stage in ("documents", "fingerprinted", "scored_pairs", "clusters")
    for name in STAGE_SETTINGS[stage]
    # the index is always the DuckDB engine's, and clusters by components (index_settings); it
    # has no recall audit, whose sample fingerprinting draws in one-shot runs
    if name not in ("input_path", "engine", "cluster_mode", "audit_sample_size")
)
KEPT, REMOVED = "kept_representative", "removed_duplicate"
# the one-shot scored_pairs columns, which every pair table and file of a batch keeps
PAIR_COLUMNS = (
    "left_doc_id, right_doc_id, left_domain, right_domain, shared_bands, found_by, jaccard, "
    "signature_overlap, is_exact, is_duplicate, reason"
)
CLUSTER_COLUMNS = (
    "doc_id, source_file, input_row, cluster_id, cluster_size, crawled_at, token_count, "
    "representative_rank, representative_doc_id, decision, representative_batch"
)
BRIDGE_COLUMNS = ("cluster_id", "kept_doc_id", "kept_batch", "other_kept_doc_id", "other_kept_batch", "via_doc_ids")


class BatchOrderError(DedupError, RuntimeError):
    """A batch cannot be added now: an earlier one is missing, later ones depend on it, its
    settings are not the index's, or it was staged against another index."""


@dataclass(frozen=True)
class IndexTables:
    """The index's tables, and the staging tables of the batch being added."""

    batches: str
    documents: str
    fingerprints: str
    band_index: str
    pairs: str
    clusters: str
    members: str
    moves: str
    bridges: str
    rejected: str
    staged_documents: str
    staged_rejected: str
    staged_fingerprints: str
    staged_pairs: str
    staged_clusters: str
    staged_members: str
    staged_moves: str
    staged_bridges: str

    @classmethod
    def in_schema(cls, schema: str = INDEX_SCHEMA) -> IndexTables:
        return cls(**{name: f"{schema}.{name}" for name in cls.__dataclass_fields__})

    @property
    def schema(self) -> str:
        return self.batches.split(".")[0]

    def universe(self) -> Tables:
        """Where the one-shot queries read a batch's universe and write its pairs."""
        return Tables(**{name: f"{self.schema}.universe_{name}" for name in PIPELINE_TABLES})

    def staged(self) -> Tables:
        """The staged documents, where the one-shot fingerprint step reads them."""
        return replace(self.universe(), documents=self.staged_documents)


@dataclass(frozen=True)
class IndexedBatch:
    """A batch in the index: its positions are ``first_position`` to ``first_position +
    documents - 1``; ``settings`` are the index's."""

    key: str
    seq: int
    first_position: int
    documents: int
    input_sha256: str
    payload_file: str
    settings: dict


def indexed_batches(connection: duckdb.DuckDBPyConnection, tables: IndexTables) -> list[IndexedBatch]:
    """The batches in the index, in key order (none before the first is added)."""
    if not table_exists(connection, tables.batches):
        return []
    rows = connection.execute(
        f"""
        select batch_key, seq, first_position, documents, input_sha256, payload_file, settings
        from {tables.batches} order by batch_key
        """
    ).fetchall()
    return [IndexedBatch(*row[:-1], json.loads(row[-1])) for row in rows]


def index_state(indexed: list[IndexedBatch], key: str) -> str:
    """A digest of the batches before ``key`` as they are in the index: a batch staged against
    one state of the index is added only to that state."""
    earlier = [(b.key, b.first_position, b.documents, b.input_sha256) for b in indexed if b.key < key]
    return hashlib.sha256(json.dumps(earlier).encode()).hexdigest()


def staged_lineage(indexed: list[IndexedBatch], key: str, settings: dict, input_file) -> dict:
    """What every staging table of batch ``key`` records: the batch, the index's settings, the
    input's identity, and the index state it was staged against."""
    return {
        "batch_key": key,
        **settings,
        "input_path": input_file.path,
        "input_sha256": input_file.sha256,
        "input_byte_size": input_file.byte_size,
        "first_position": batch_start(indexed, key),
        "index_state": index_state(indexed, key),
    }


def batch_start(indexed: list[IndexedBatch], key: str) -> int:
    """The position of the batch's first document: how many documents the batches before it hold."""
    return sum(batch.documents for batch in indexed if batch.key < key)


def order_problem(indexed: list[IndexedBatch], earlier_in_folder: list[str], key: str) -> tuple[str, list[str]] | None:
    """Why ``key`` cannot be added now, if it cannot: ``("missing", keys)`` when earlier batches of
    the folder are not in the index yet, ``("later", keys)`` when later batches already are."""
    present = {batch.key for batch in indexed}
    missing = [earlier for earlier in earlier_in_folder if earlier not in present]
    if missing:
        return "missing", missing
    later = [batch.key for batch in indexed if batch.key > key]
    if later:
        return "later", later
    return None


def settings_problems(indexed: list[IndexedBatch], current: dict) -> list[tuple[str, object, object]]:
    """Each algorithm setting the index was built with that this run would change:
    (name, the index's value, this run's value)."""
    if not indexed:
        return []
    # an index built before bands could be chosen used rows_per_band's bands, and one built
    # before prefer_domains the keep rule without it
    implied = {
        "auto_bands": False,
        "bands": built_bands(indexed[0].settings),
        "rows_in_use": indexed[0].settings.get("rows_per_band"),
        "prefer_domains": [],
    }
    built = {**implied, **indexed[0].settings}
    return [(name, built[name], current[name]) for name in sorted(built) if name in current and current[name] != built[name]]


def built_bands(settings: dict) -> int | None:
    """The bands an index was built with; for one from before they were recorded, num_perm / rows_per_band."""
    if "bands" in settings:
        return settings["bands"]
    if settings.get("num_perm") and settings.get("rows_per_band"):
        return settings["num_perm"] // settings["rows_per_band"]
    return None


def screen_indexed_doc_ids(
    connection: duckdb.DuckDBPyConnection,
    tables: IndexTables,
    lineage: dict,
    stats: InputStats,
    fail_on_reject: bool = False,
) -> int:
    """Move the staged documents whose doc_id an earlier batch holds to ``stats.rejected``
    (``duplicate_doc_id``, as a one-shot run over all batches would: the first one is kept), and
    record ``lineage`` for the staged documents in the same transaction: until then they are no
    batch's. How many there were; with ``fail_on_reject`` the first one fails the batch instead."""
    with transaction(connection, tables.staged_documents):
        repeated = _repeated_doc_ids(connection, tables, lineage["first_position"])
        for source_file, input_row, doc_id, batch, first_file, first_row in repeated:
            detail = f"doc_id first seen in batch {batch} ({first_file} row {first_row})"
            if fail_on_reject:
                raise InputError(
                    f"{source_file}: row {input_row}: column doc_id repeats '{doc_id}' ({detail}). Give "
                    "each document a unique doc_id."
                )
            stats.reject_document(source_file, input_row, doc_id, "duplicate_doc_id", detail)
        if repeated:
            connection.execute(
                f"""
                delete from {tables.staged_documents}
                where doc_id in (select doc_id from {tables.fingerprints} where position < ?)
                """,
                [lineage["first_position"]],
            )
        write_lineage(connection, tables.staged_documents, lineage)
    return len(repeated)


def _repeated_doc_ids(connection: duckdb.DuckDBPyConnection, tables: IndexTables, start: int) -> list[tuple]:
    if not table_exists(connection, tables.fingerprints):
        return []
    return connection.execute(
        f"""
        select s.source_file, s.input_row, s.doc_id, f.batch_key, d.source_file, d.input_row
        from {tables.staged_documents} s
        join {tables.fingerprints} f on f.doc_id = s.doc_id and f.position < ?
        join {tables.documents} d on d.doc_id = f.doc_id
        order by s.source_file, s.input_row
        """,
        [start],
    ).fetchall()


@dataclass(frozen=True)
class BatchPairs:
    build: TableBuild
    pressure: BucketPressure
    universe_documents: int
    reshingled: int


def build_batch_pairs(
    connection: duckdb.DuckDBPyConnection,
    tables: IndexTables,
    start: int,
    params: SketchParams,
    thresholds: Thresholds,
    limits: PairLimits,
    memory_budget_mb: int,
) -> BatchPairs:
    """The scored pairs of the batch's documents: with each other and with every earlier
    document. Writes the universe's tables (``universe_*``: fingerprints, documents, candidate
    and scored pairs) on the way, so each can be looked at."""
    universe = tables.universe()
    new = connection.sql(
        f"""
        select $1 + f.rowid as position, true as is_new, f.doc_id, f.token_count, f.shingle_count,
               f.content_hash, f.signature, f.lsh_bands, d.domain, d.body
        from {tables.staged_fingerprints} f join {tables.staged_documents} d on d.doc_id = f.doc_id
        order by position
        """,
        params=[start],
    ).to_arrow_table()
    rows = pa.concat_tables([_earlier_rows(connection, tables, start, new.schema), new])
    write_table(
        connection,
        universe.fingerprinted,
        TableBuild(sql="select * exclude (domain, body) from universe_rows", arrow_inputs={"universe_rows": rows}),
    )
    write_table(
        connection,
        universe.documents,
        TableBuild(sql="select doc_id, domain, body from universe_rows", arrow_inputs={"universe_rows": rows}),
    )
    write_table(connection, universe.band_memberships, build_band_memberships(universe))
    candidates, pressure, _ = build_candidate_pairs(connection, universe, limits)  # none hot: index_settings
    write_table(connection, universe.candidate_pairs, candidates)
    scored, reshingled = build_scored_pairs(connection, universe, params, thresholds, memory_budget_mb)
    write_table(connection, universe.scored_pairs, scored)
    build = TableBuild(
        sql=f"""
        with new as (select doc_id from {universe.fingerprinted} where is_new)
        select {PAIR_COLUMNS}
        from {universe.scored_pairs}
        where left_doc_id in (select doc_id from new) or right_doc_id in (select doc_id from new)
        order by left_doc_id, right_doc_id
        """
    )
    return BatchPairs(build, pressure, rows.num_rows, reshingled)


def _earlier_rows(
    connection: duckdb.DuckDBPyConnection, tables: IndexTables, start: int, schema: pa.Schema
) -> pa.Table:
    """The universe's earlier documents (``sql/universe_earlier.sql``) with their signatures,
    band keys, domains and bodies from the payload files."""
    if not table_exists(connection, tables.fingerprints):
        return schema.empty_table()
    earlier = connection.sql(sql("universe_earlier", tables), params=[start]).to_arrow_table()
    if not earlier.num_rows:
        return schema.empty_table()
    spans = [
        payloads.Span(batch.key, batch.first_position, batch.documents, batch.payload_file)
        for batch in indexed_batches(connection, tables)
        if batch.first_position < start
    ]
    payload = payloads.take(
        payload_folder(connection), spans, earlier.column("position").to_numpy(), earlier.column("doc_id")
    )
    columns = {name: earlier.column(name) for name in earlier.column_names}
    columns["is_new"] = pa.array(np.zeros(earlier.num_rows, dtype=bool))
    columns.update({name: payload.column(name) for name in ("signature", "lsh_bands", "domain", "body")})
    return pa.table({field.name: columns[field.name] for field in schema}).cast(schema)


def payload_folder(connection: duckdb.DuckDBPyConnection) -> Path:
    """The payload files' folder, beside the connection's database file (refuses :memory:)."""
    return payloads.payload_folder(database_path(connection))


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
    connection: duckdb.DuckDBPyConnection, tables: IndexTables, key: str, start: int, prefer_domains: Sequence[str]
) -> BatchClusters:
    """The batch's decisions, by the one-shot keep rule with ``prefer_domains`` where they are open:
    among the batch's own documents, and which of the earlier kept documents a removed one names."""
    edges = connection.execute(
        f"select left_doc_id, right_doc_id from {tables.staged_pairs} where is_duplicate"
    ).fetchall()
    # the batch's documents with an edge; the others are singletons, decided in SQL below
    new = {
        row["doc_id"]: row
        for row in connection.sql(
            f"""
            select f.doc_id, f.token_count, d.domain, d.crawled_at
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
    graph = nx.Graph()
    for left, right in edges:
        graph.add_edge(*(("doc", d) if d in new else ("cluster", old_cluster[d]) for d in (left, right)))
    components = sorted((sorted(component) for component in nx.connected_components(graph)), key=lambda c: c[0])
    affected = sorted({name for component in components for kind, name in component if kind == "cluster"})
    sizes, kept, members_of = _old_clusters(connection, tables, affected, key, start)
    rows, moves, bridges = [], [], []
    for component in components:
        docs = keep_ranked([new[name] for kind, name in component if kind == "doc"], prefer_domains)
        clusters = [name for kind, name in component if kind == "cluster"]
        cluster_id = "cluster-" + min([row["doc_id"] for row in docs] + [_cluster_root(c) for c in clusters])
        size = len(docs) + sum(sizes[c] for c in clusters)
        earlier_kept = keep_ranked([row for c in clusters for row in kept[c]], prefer_domains)
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
        for old in clusters:
            if old != cluster_id:
                moves.extend({"doc_id": doc, "previous_cluster_id": old, "cluster_id": cluster_id} for doc in members_of[old])
        if len(clusters) > 1:
            best = earlier_kept[0]
            for other in clusters:
                if any(row["doc_id"] == best["doc_id"] for row in kept[other]):
                    continue
                other_best = keep_ranked(kept[other], prefer_domains)[0]
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
    )
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
          coalesce(c.representative_batch, $2) as representative_batch
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


def _old_clusters(
    connection: duckdb.DuckDBPyConnection, tables: IndexTables, affected: list[str], key: str, start: int
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
            select c.doc_id, c.batch_key, d.domain, c.crawled_at, c.token_count, b.cluster_id
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


# index table -> the staged table its first version takes its columns from, and what each row gains
_FROM_STAGED = {
    "fingerprints": (
        "staged_fingerprints",
        "0::bigint as position, ''::varchar as batch_key, doc_id, token_count, shingle_count, content_hash, "
        "lsh_bands[1] as first_band_key",
    ),
    "pairs": ("staged_pairs", "''::varchar as batch_key, *"),
    "clusters": ("staged_clusters", "''::varchar as batch_key, *"),
    "members": ("staged_members", "*"),
    "moves": ("staged_moves", "''::varchar as batch_key, doc_id, previous_cluster_id"),
    "bridges": ("staged_bridges", "''::varchar as batch_key, *"),
    "rejected": ("staged_rejected", "''::varchar as batch_key, *"),
    # the bodies are in the payload files only
    "documents": ("staged_documents", "* exclude (body)"),
}


def _create_index(connection: duckdb.DuckDBPyConnection, tables: IndexTables) -> None:
    connection.execute(
        f"""
        create table if not exists {tables.batches} (
          batch_key varchar primary key, seq integer, first_position bigint, documents bigint,
          rejected bigint, input_path varchar, input_sha256 varchar, input_byte_size bigint,
          columns varchar, settings varchar, payload_file varchar
        )
        """
    )
    connection.execute(
        f"create table if not exists {tables.band_index} (band_index smallint, lsh_band ubigint, position bigint)"
    )
    for name, (staged, columns) in _FROM_STAGED.items():
        connection.execute(
            f"create table if not exists {getattr(tables, name)} as select {columns} from {getattr(tables, staged)} limit 0"
        )
    # a batch may bring columns the earlier ones did not have (WARC lineage, extra CSV columns)
    have = {row[0].lower() for row in connection.execute(f"describe {tables.documents}").fetchall()}
    for column, kind, *_ in connection.execute(f"describe {tables.staged_documents}").fetchall():
        if column.lower() not in have | {"body"}:
            connection.execute(f"alter table {tables.documents} add column {_quoted(column)} {kind}")


def _remove(connection: duckdb.DuckDBPyConnection, tables: IndexTables, batch: IndexedBatch) -> None:
    """Take one batch, the latest in the index, out of it: its rows, and the cluster renames it made."""
    key, start = batch.key, batch.first_position
    connection.execute(
        f"""
        update {tables.members} set cluster_id = mv.previous_cluster_id
        from {tables.moves} mv where mv.batch_key = ? and {tables.members}.doc_id = mv.doc_id
        """,
        [key],
    )
    connection.execute(f"delete from {tables.members} where position >= ?", [start])
    connection.execute(f"delete from {tables.band_index} where position >= ?", [start])
    connection.execute(
        f"delete from {tables.documents} where doc_id in (select doc_id from {tables.fingerprints} where batch_key = ?)",
        [key],
    )
    for name in ("fingerprints", "pairs", "clusters", "moves", "bridges", "rejected", "batches"):
        connection.execute(f"delete from {getattr(tables, name)} where batch_key = ?", [key])


# the lineage of staged documents not yet screened against the index: no batch's yet
UNSCREENED = {"batch_key": None}
# the staging tables of one batch, written by its steps in this order
STAGED = (
    "staged_documents", "staged_rejected", "staged_fingerprints", "staged_pairs", "staged_clusters",
    "staged_members", "staged_moves", "staged_bridges",
)


def refuse_stale_staging(connection: duckdb.DuckDBPyConnection, tables: IndexTables, key: str) -> dict:
    """The staged batch's lineage, once every staging table is of batch ``key``, of one staging
    (the same input and settings) and of the index as it is now; else a :class:`BatchOrderError`
    saying to stage the batch again."""
    indexed = indexed_batches(connection, tables)
    lineages = {name: read_lineage(connection, getattr(tables, name)) for name in STAGED}
    lineage = lineages["staged_documents"]
    again = f"Stage batch {key} again from its first step: {batch_command(key)}"
    if lineage.get("batch_key") != key:
        raise BatchOrderError(f"The staging tables do not hold batch {key}. {again}")
    mixed = [name for name, other in lineages.items() if other != lineage]
    if mixed:
        raise BatchOrderError(
            f"The staging tables of batch {key} come from different runs ({', '.join(mixed)} differ from "
            f"staged_documents: another input file or other settings). {again}"
        )
    refuse_out_of_order(indexed, [], key)
    if lineage["index_state"] != index_state(indexed, key):
        raise BatchOrderError(
            f"The batches before {key} in the index changed since batch {key} was staged (taken out "
            f"or added again), so its pairs were found against another index. {again}"
        )
    refuse_other_settings(indexed, lineage, key)
    return lineage


def add_batch(connection: duckdb.DuckDBPyConnection, tables: IndexTables, key: str) -> None:
    """Add the staged batch to the index in one transaction, replacing it if it is there (it is
    then the latest: anything else is refused)."""
    lineage = refuse_stale_staging(connection, tables, key)
    indexed = indexed_batches(connection, tables)
    start = lineage["first_position"]
    # the payload is written first under a name of its own input, and the index names the file
    # it uses: a failed commit leaves the index and the file it names as they were
    folder = payload_folder(connection)
    payload_file = payloads.write_payload(
        folder,
        key,
        lineage["input_sha256"],
        connection.sql(
            f"""
            select f.doc_id, d.domain, d.body, f.signature, f.lsh_bands
            from {tables.staged_fingerprints} f join {tables.staged_documents} d on d.doc_id = f.doc_id
            order by f.rowid
            """
        ).to_arrow_table(),
    )
    with transaction(connection, f"batch {key} into the index"):
        _create_index(connection, tables)
        for batch in indexed:
            if batch.key == key:
                _remove(connection, tables, batch)
        columns = [row[0] for row in connection.execute(f"describe {tables.staged_documents}").fetchall()]
        documents, rejected = (
            connection.execute(f"select count(*) from {table}").fetchall()[0][0]
            for table in (tables.staged_documents, tables.staged_rejected)
        )
        seq = 1 + sum(1 for batch in indexed if batch.key < key)
        connection.execute(
            f"insert into {tables.batches} values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                key, seq, start, documents, rejected, lineage["input_path"], lineage["input_sha256"],
                lineage["input_byte_size"], json.dumps(columns),
                json.dumps({name: lineage[name] for name in INDEX_SETTINGS}, sort_keys=True),
                payload_file,
            ],
        )
        connection.execute(
            f"insert into {tables.documents} by name select * exclude (body) from {tables.staged_documents}"
        )
        connection.execute(
            f"""
            insert into {tables.fingerprints}
            select ? + rowid, ?, doc_id, token_count, shingle_count, content_hash, lsh_bands[1]
            from {tables.staged_fingerprints}
            """,
            [start, key],
        )
        connection.execute(sql("band_index_rows", tables), [start])
        for name in ("pairs", "clusters", "bridges", "rejected"):
            connection.execute(
                f"insert into {getattr(tables, name)} select ?, * from {getattr(tables, 'staged_' + name)}", [key]
            )
        connection.execute(
            f"""
            update {tables.members} set cluster_id = mv.cluster_id
            from {tables.staged_moves} mv where {tables.members}.doc_id = mv.doc_id
            """
        )
        connection.execute(
            f"insert into {tables.moves} select ?, doc_id, previous_cluster_id from {tables.staged_moves}", [key]
        )
        connection.execute(f"insert into {tables.members} select * from {tables.staged_members}")
    payloads.remove_other_versions(folder, key, keep=payload_file)


def forget_batches(connection: duckdb.DuckDBPyConnection, tables: IndexTables, first_key: str) -> list[str]:
    """Remove ``first_key`` and every later batch from the index, latest first, in one
    transaction; the keys removed."""
    removed = [batch for batch in indexed_batches(connection, tables) if batch.key >= first_key]
    with transaction(connection, "the incremental index"):
        for batch in reversed(removed):
            _remove(connection, tables, batch)
    payloads.remove_payloads(payload_folder(connection), [batch.key for batch in removed])
    return [batch.key for batch in removed]


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def batch_release_queries(connection: duckdb.DuckDBPyConnection, tables: IndexTables, key: str) -> dict[str, str]:
    """File name -> the query that fills it, for the release of batch ``key`` (in the index).
    The key is bound as $batch_key when each file is written; the kept documents are a folder of
    Parquet parts, as in the one-shot release."""
    columns = json.loads(
        connection.execute(f"select columns from {tables.batches} where batch_key = ?", [key]).fetchall()[0][0]
    )
    return {
        DEDUPED_DOCUMENTS: f"""
            select {", ".join("d." + _quoted(name) for name in columns)}, c.cluster_id, c.cluster_size
            from {tables.clusters} c
            join {tables.staged_documents} d on d.doc_id = c.doc_id
            where c.batch_key = $batch_key and c.decision like 'kept%'
            order by c.position""",
        "duplicate_pairs.csv": f"""
            select {PAIR_COLUMNS} from {tables.pairs}
            where batch_key = $batch_key and is_duplicate order by left_doc_id, right_doc_id""",
        "clusters.csv": f"""
            select {CLUSTER_COLUMNS} from {tables.clusters}
            where batch_key = $batch_key order by cluster_id, representative_rank""",
        "bridges.csv": f"""
            select {", ".join(BRIDGE_COLUMNS)} from {tables.bridges}
            where batch_key = $batch_key order by cluster_id, other_kept_doc_id""",
        "rejected_documents.csv": f"""
            select source_file, input_row, doc_id, reason, detail from {tables.rejected}
            where batch_key = $batch_key order by source_file, input_row""",
    }


def batch_counts(connection: duckdb.DuckDBPyConnection, tables: IndexTables, key: str) -> dict:
    """The batch's figures and the index's running totals after it (the batch is in the index)."""
    (
        documents, rejected, seq, candidates_new_new, candidates_new_old, edges_new_new, edges_new_old,
        kept, removed, removed_against_earlier, bridges,
    ) = connection.execute(
        f"""
        with batch as (select * from {tables.batches} where batch_key = $1),
        new_docs as (select doc_id, position from {tables.fingerprints} where batch_key = $1),
        pairs as (
          select p.is_duplicate,
                 (p.left_doc_id in (select doc_id from new_docs)
                  and p.right_doc_id in (select doc_id from new_docs)) as within
          from {tables.pairs} p where p.batch_key = $1
        ),
        decisions as (select * from {tables.clusters} where batch_key = $1)
        select
          (select documents from batch), (select rejected from batch), (select seq from batch),
          (select count(*) filter (where within) from pairs),
          (select count(*) filter (where not within) from pairs),
          (select count(*) filter (where within and is_duplicate) from pairs),
          (select count(*) filter (where not within and is_duplicate) from pairs),
          (select count(*) filter (where decision like 'kept%') from decisions),
          (select count(*) filter (where decision like 'removed%') from decisions),
          (select count(*) filter (where decision like 'removed%' and representative_batch <> $1) from decisions),
          (select count(*) from {tables.bridges} where batch_key = $1)
        """,
        [key],
    ).fetchall()[0]
    totals = connection.execute(
        f"""
        select
          (select count(*) from {tables.batches} where batch_key <= $1),
          (select count(*) from {tables.fingerprints} f join {tables.batches} b using (batch_key) where b.batch_key <= $1),
          (select count(*) from {tables.clusters} where batch_key <= $1 and decision like 'kept%'),
          (select count(*) from {tables.clusters} where batch_key <= $1 and decision like 'removed%'),
          (select count(*) from {tables.pairs} where batch_key <= $1 and is_duplicate),
          (select count(*) from {tables.bridges} where batch_key <= $1)
        """,
        [key],
    ).fetchall()[0]
    return {
        "batch": {
            "seq": int(seq),
            "input_record_rows": int(documents + rejected),
            "document_rows": int(documents),
            "rejected_document_rows": int(rejected),
            "candidate_pairs_within_batch": int(candidates_new_new),
            "candidate_pairs_with_earlier": int(candidates_new_old),
            "duplicate_pairs_within_batch": int(edges_new_new),
            "duplicate_pairs_with_earlier": int(edges_new_old),
            "kept_documents": int(kept),
            "removed_documents": int(removed),
            "removed_against_earlier_batches": int(removed_against_earlier),
            "bridges": int(bridges),
        },
        "totals": dict(
            zip(
                ("batches", "document_rows", "kept_documents", "removed_documents", "duplicate_pairs", "bridges"),
                map(int, totals),
            )
        ),
    }


def one_shot_differences(
    connection: duckdb.DuckDBPyConnection, one_shot: Tables, tables: IndexTables, shown: int = 5
) -> list[str] | None:
    """How the index differs from a one-shot run's tables: its duplicate edges (the union of every
    batch's) and its clusters as sets of doc_ids. None when they hold different documents (doc_id
    and content hash), which makes them not comparable."""
    if not (table_exists(connection, tables.fingerprints) and table_exists(connection, one_shot.fingerprinted)):
        return None
    counts = connection.execute(
        f"select (select count(*) from {one_shot.fingerprinted}), (select count(*) from {tables.fingerprints})"
    ).fetchall()[0]
    if counts[0] != counts[1]:
        return None
    same_documents = connection.execute(
        f"""
        select not exists (
          (select doc_id, content_hash from {one_shot.fingerprinted}
           except all select doc_id, content_hash from {tables.fingerprints})
          union all
          (select doc_id, content_hash from {tables.fingerprints}
           except all select doc_id, content_hash from {one_shot.fingerprinted})
        )
        """
    ).fetchall()[0][0]
    if not same_documents:
        return None
    problems = []
    for what, query in (
        (
            "an edge of the one-shot run that no batch found",
            f"""select left_doc_id || ' ~ ' || right_doc_id from (
                  select left_doc_id, right_doc_id from {one_shot.duplicate_pairs}
                  except select left_doc_id, right_doc_id from {tables.pairs} where is_duplicate)""",
        ),
        (
            "an edge a batch found that the one-shot run does not have",
            f"""select left_doc_id || ' ~ ' || right_doc_id from (
                  select left_doc_id, right_doc_id from {tables.pairs} where is_duplicate
                  except select left_doc_id, right_doc_id from {one_shot.duplicate_pairs})""",
        ),
        (
            "a document in another cluster than in the one-shot run",
            f"""select o.doc_id || ': ' || o.cluster_id || ' (one-shot) vs ' || coalesce(m.cluster_id, 'none') || ' (batches)'
                from {one_shot.clusters} o left join {tables.members} m on m.doc_id = o.doc_id
                where m.cluster_id is distinct from o.cluster_id""",
        ),
    ):
        found = [row[0] for row in connection.execute(f"select * from ({query}) order by 1").fetchall()]
        if found:
            examples = "; ".join(found[:shown]) + ("; …" if len(found) > shown else "")
            problems.append(f"{len(found):,} × {what}: {examples}")
    return problems


def batch_command(key: str) -> str:
    """The command that adds batch ``key``."""
    return (
        "dagster asset materialize -m dedup_assets.definitions --select 'group:incremental' "
        f"--partition {shlex.quote(key)}"
    )


def forget_command(key: str) -> str:
    """The command that takes batch ``key`` and every later batch out of the index."""
    return f"dedup forget-batches {shlex.quote(key)}"


def refuse_out_of_order(indexed: list[IndexedBatch], earlier_in_folder: list[str], key: str) -> None:
    """Raise :class:`BatchOrderError`, saying what to run, unless ``key`` can be added now: every
    earlier batch of the folder is in the index and no later one is."""
    problem = order_problem(indexed, earlier_in_folder, key)
    if problem is None:
        return
    kind, keys = problem
    if kind == "missing":
        raise BatchOrderError(
            f"Batch {key} cannot be added before batch {keys[0]}, which is earlier in key order and "
            f"not in the index yet ({len(keys)} earlier batch{'es' if len(keys) > 1 else ''} missing: "
            f"{', '.join(keys)}). Batches are added in key order; add it first: "
            + batch_command(keys[0])
        )
    raise BatchOrderError(
        f"Batch {key} cannot be added again: later batches are in the index already ({', '.join(keys)}), "
        f"and each of them was deduplicated against batch {key} as it is. To rebuild from batch {key}, "
        f"take it and every later batch out of the index with `{forget_command(key)}`, "
        f"then add them again in key order, starting with: {batch_command(key)}"
    )


def refuse_other_settings(indexed: list[IndexedBatch], current: dict, key: str) -> None:
    """Raise :class:`BatchOrderError` when this run's algorithm settings differ from the index's."""
    problems = settings_problems(indexed, current)
    if not problems:
        return
    changed = "; ".join(f"the index has {name}={built!r}, this run {name}={now!r}" for name, built, now in problems)
    config = json.dumps({"resources": {"dedup": {"config": {name: built for name, built, _ in problems}}}})
    raise BatchOrderError(
        f"Cannot add batch {key} with other settings than the batches already in the index ({changed}): "
        "every batch of an index is deduplicated with one set of settings, as one run over all of them "
        f"would be. Run it with the index's settings (--config-json '{config}'), or start a new index: "
        f"`{forget_command(indexed[0].key)}` takes every batch out (or set DEDUP_DATABASE "
        "to a new file)."
    )


def batch_manifest(
    connection: duckdb.DuckDBPyConnection, tables: IndexTables, key: str, settings: dict, versions: dict
) -> dict:
    """Everything a batch's ``manifest.json`` says besides its list of files."""
    path, sha256, byte_size = connection.execute(
        f"select input_path, input_sha256, input_byte_size from {tables.batches} where batch_key = ?", [key]
    ).fetchall()[0]
    counts = batch_counts(connection, tables, key)
    return {
        "product": "dedup-assets",
        "batch": key,
        "settings": settings,
        "input": {"path": path, "rows": counts["batch"]["input_record_rows"], "byte_size": byte_size, "sha256": sha256},
        "versions": versions,
        "counts": counts["batch"],
        "totals": counts["totals"],
    }


def index_settings(settings: Settings) -> dict:
    """The settings every batch of one index shares: those that change any table (the input's
    path aside, which is each batch's own). Refuses ``cluster_mode`` star: a batch's decisions
    are final, and a star split of a component could move a document another batch kept; and
    ``engine`` ray, which the index does not run on."""
    if settings.cluster_mode != "components":
        raise SettingsError(
            f"cluster_mode {settings.cluster_mode!r} applies to the one-shot graph only: the "
            "incremental index clusters batches by connected components. Run the batches with "
            "cluster_mode 'components', or run the one-shot graph over the batch folder (DEDUP_INPUT) "
            "for star clusters."
        )
    if not CAPABILITIES[settings.engine].incremental:
        raise SettingsError(
            f"engine {settings.engine!r} runs the one-shot graph only: the incremental index lives "
            "in the DuckDB file and adds each batch there. Run the batches with engine 'duckdb', "
            "or the one-shot graph over the batch folder (DEDUP_INPUT) with engine 'ray'."
        )
    if settings.hot_buckets != "refuse":
        raise SettingsError(
            f"hot_buckets {settings.hot_buckets!r} applies to the one-shot graph only: a batch's "
            "decisions are final, and the index keeps no list of the buckets a batch left out. Run "
            "the batches with hot_buckets 'refuse', or the one-shot graph over the batch folder "
            "(DEDUP_INPUT) with hot_buckets 'skip'."
        )
    values = {**settings.as_dict(), **settings.derived(), "table_layout": INDEX_LAYOUT}
    return {name: values[name] for name in INDEX_SETTINGS}
