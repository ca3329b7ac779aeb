"""What the index says once a batch is in it: the queries that fill the batch's release files,
its counts and the index's running totals, its ``manifest.json``, and how the whole index differs
from a one-shot run over the same documents (the check that batches and one run agree). These
only read the index, so they are apart from the steps that build and add a batch."""

from __future__ import annotations

import json

import duckdb

from ..release.files import DEDUPED_DOCUMENTS
from ..storage.store import table_exists
from ..storage.tables import Tables, sql
from .index_tables import (
    BRIDGE_COLUMNS,
    CLUSTER_COLUMNS,
    PAIR_COLUMNS,
    IndexTables,
    quoted_name,
)


def batch_release_queries(connection: duckdb.DuckDBPyConnection, tables: IndexTables, key: str) -> dict[str, str]:
    """File name -> the query that fills it, for the release of batch ``key`` (in the index).
    The key is bound as $batch_key when each file is written; the kept documents are a folder of
    Parquet parts, as in the one-shot release."""
    columns = json.loads(
        connection.execute(f"select columns from {tables.batches} where batch_key = ?", [key]).fetchall()[0][0]
    )
    return {
        DEDUPED_DOCUMENTS: f"""
            select {", ".join("d." + quoted_name(name) for name in columns)}, c.cluster_id, c.cluster_size
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
    ) = connection.execute(sql("batch_counts", tables), [key]).fetchall()[0]
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
