"""Verification: exact shingle Jaccard of every candidate pair, its memory estimate, and the
decision reasons.

Exact Jaccard is the only acceptance rule (``sql/pair_decision.sql``, for every engine); the share
of equal signature coordinates is a diagnostic that only chooses between the reasons. Only the documents
of pairs LSH found are shingled again: pairs with exact copies (``found_by`` ``content_hash`` and
``lsh_via_copy``, see ``lsh/candidates.py``) take the scores of the pair of their first copies, so copies
cost no shingling at all.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from ..sketch import kernels
from .jaccard import pair_jaccard
from ..pipeline.step_params import SketchParams, Thresholds
from ..util.errors import DedupError, InconsistentTables
from ..sketch.fingerprints import list_matrix
from ..read.ingest import document_bodies
from ..storage.store import TableBuild
from ..util.streams import Progress, ThroughputLog
from ..storage.tables import Tables, sql, sql_over

REASONS = ("jaccard_and_minhash", "jaccard_match", "minhash_only_rejected", "below_jaccard_threshold")


class MemoryBudgetExceeded(DedupError, RuntimeError):
    """A step would need more memory than the configured budget."""


def signature_overlap(
    signatures: pa.ChunkedArray | pa.Array, left_rows: np.ndarray, right_rows: np.ndarray
) -> np.ndarray:
    """Share of equal coordinates of the signatures (lists of one length) of each row pair."""
    return kernels.pair_overlap_kernel(
        list_matrix(signatures), np.asarray(left_rows, np.int64), np.asarray(right_rows, np.int64)
    )


def verification_memory_estimate(
    connection: duckdb.DuckDBPyConnection, tables: Tables, num_perm: int
) -> tuple[int, int]:
    """(documents to shingle again, bytes their shingle sets and signatures will take)."""
    documents, shingles = connection.execute(
        f"""
        select count(*), coalesce(sum(f.shingle_count), 0)
        from {tables.fingerprinted} f
        semi join (
          select left_doc_id as doc_id from {tables.candidate_pairs} where found_by = 'lsh'
          union select right_doc_id from {tables.candidate_pairs} where found_by = 'lsh'
        ) c on c.doc_id = f.doc_id
        """
    ).fetchall()[0]
    # 8 bytes per distinct shingle hash, plus the body bytes and the kernel's scratch; 8 per
    # signature value
    return int(documents), int(shingles) * 8 * 3 + int(documents) * num_perm * 8


def ensure_memory(estimate_bytes: int, budget_mb: int, what: str) -> None:
    if estimate_bytes > budget_mb * 1024 * 1024:
        raise MemoryBudgetExceeded(
            f"{what} would need about {estimate_bytes / 2**20:,.0f} MB, above memory_budget_mb="
            f"{budget_mb:,}. Make LSH stricter (more rows_per_band) so fewer documents are "
            "candidates, or raise memory_budget_mb if the machine has the memory."
        )


def candidate_scores(
    connection: duckdb.DuckDBPyConnection, tables: Tables, params: SketchParams, log: Progress | None = None
) -> pa.Table:
    """Per pair LSH found: exact shingle Jaccard (shingling each involved document once), the
    share of equal signature coordinates, and whether the content hashes (of the normalized
    token sequences) are equal. The shingling's progress goes to ``log``."""
    involved = connection.sql(
        f"""
        select left_doc_id as doc_id from {tables.candidate_pairs} where found_by = 'lsh'
        union
        select right_doc_id from {tables.candidate_pairs} where found_by = 'lsh'
        """
    ).to_arrow_table().column(0)
    bodies = document_bodies(connection, tables.documents, involved, in_order=False)  # pairs find them by position
    connection.register(
        "candidate_documents", pa.table({"doc_id": bodies.column("doc_id"), "position": np.arange(bodies.num_rows)})
    )
    try:
        fingerprints = connection.sql(sql("candidate_fingerprints", tables)).to_arrow_table()
        pairs = connection.sql(
            f"""
            select p.left_doc_id, p.right_doc_id, l.position as left_row, r.position as right_row
            from {tables.candidate_pairs} p
            join candidate_documents l on l.doc_id = p.left_doc_id
            join candidate_documents r on r.doc_id = p.right_doc_id
            where p.found_by = 'lsh'
            """
        ).to_arrow_table()
        expected = connection.execute(
            f"select count(*) from {tables.candidate_pairs} where found_by = 'lsh'"
        ).fetchall()[0][0]
    finally:
        connection.unregister("candidate_documents")
    if pairs.num_rows != expected:
        raise InconsistentTables(
            f"{expected - pairs.num_rows} candidate pairs name documents missing from documents: "
            "re-materialize candidate_pairs and everything downstream"
        )
    if not fingerprints.column("doc_id").equals(bodies.column("doc_id")):
        raise InconsistentTables(
            f"fingerprinted has {fingerprints.num_rows:,} rows for the {bodies.num_rows:,} candidate documents "
            "(one missing or repeated): re-materialize fingerprinted and everything downstream"
        )
    left, right = pairs.column("left_row").to_numpy(), pairs.column("right_row").to_numpy()
    content_hashes = fingerprints.column("content_hash").to_numpy()
    return pa.table(
        {
            "left_doc_id": pairs.column("left_doc_id"),
            "right_doc_id": pairs.column("right_doc_id"),
            "jaccard": pair_jaccard(
                bodies.column("body"),
                left,
                right,
                params.shingling,
                params.hash_scheme,
                fingerprints.column("shingle_count").to_numpy(),
                log and ThroughputLog(log, "scored_pairs", bodies.num_rows, "candidate documents shingled").advance,
            ),
            "signature_overlap": signature_overlap(fingerprints.column("signature"), left, right),
            "is_exact": content_hashes[left] == content_hashes[right],
        }
    )


def build_scored_pairs(
    connection: duckdb.DuckDBPyConnection,
    tables: Tables,
    params: SketchParams,
    thresholds: Thresholds,
    memory_budget_mb: int,
    log: Progress | None = None,
) -> tuple[TableBuild, int]:
    """The ``scored_pairs`` table and how many candidate documents were shingled again; refuses,
    before shingling, a verification whose estimate exceeds ``memory_budget_mb``. Progress goes
    to ``log``."""
    documents, estimate = verification_memory_estimate(connection, tables, params.num_perm)
    ensure_memory(estimate, memory_budget_mb, f"Shingling the {documents:,} candidate documents again")
    build = TableBuild(
        sql=f"{decision_sql('(' + sql('scored_pairs', tables) + ')')} order by left_doc_id, right_doc_id",
        params=[thresholds.jaccard, thresholds.signature_overlap],
        arrow_inputs={
            "pair_scores": candidate_scores(connection, tables, params, log),
            "first_copies": first_copies(connection, tables),
        },
    )
    return build, documents


def decision_sql(measured: str) -> str:
    """The acceptance rule (``sql/pair_decision.sql``) over ``measured``, a relation's name or a
    parenthesized query; bind the thresholds as its header says."""
    return sql_over("pair_decision", measured=measured)


def decided_pairs(measured: pa.Table, thresholds: Thresholds) -> pa.Table:
    """The acceptance rule over an Arrow table of measured pairs, as the DuckDB engine applies it
    to its own: for an engine that scores pairs elsewhere (the ray engine's batches)."""
    with duckdb.connect() as connection:
        connection.register("measured", measured)
        return connection.sql(
            decision_sql("measured"), params=[thresholds.jaccard, thresholds.signature_overlap]
        ).to_arrow_table()


def first_copies(connection: duckdb.DuckDBPyConnection, tables: Tables) -> pa.Table:
    """Each exact copy (other than its group's first copy) and its first copy
    (``sql/first_copies.sql``)."""
    return connection.sql(sql("first_copies", tables)).to_arrow_table()


def build_duplicate_pairs(tables: Tables) -> TableBuild:
    """The accepted edges: scored pairs whose exact Jaccard met the threshold."""
    return TableBuild(
        sql=f"select * from {tables.scored_pairs} where is_duplicate order by left_doc_id, right_doc_id"
    )
