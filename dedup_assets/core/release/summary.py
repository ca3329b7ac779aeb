"""Run figures, shared by the manifest, asset metadata and the fixture contracts."""

from __future__ import annotations

import duckdb

from .diagnostics import max_collision_bucket_size
from ..lsh.candidates import BucketPressure
from ..storage.tables import Tables, sql
from ..verify.pairs import REASONS


def possible_pairs(document_count: int) -> int:
    return document_count * (document_count - 1) // 2


def reduction_ratio(possible: int, candidates: int) -> float:
    """Share of the all-pairs baseline that LSH spared from exact scoring, rounded to 4 places."""
    return round(1.0 - candidates / possible, 4) if possible else 0.0


def run_counts(
    connection: duckdb.DuckDBPyConnection, tables: Tables, pressure: BucketPressure, largest_bucket: int | None = None
) -> dict:
    """The run's figures; ``largest_bucket``: the documents in the largest LSH bucket, where the
    caller has counted them (None: counted here)."""
    cursor = connection.execute(sql("run_counts", tables))
    counts = dict(zip([column[0] for column in cursor.description], map(int, cursor.fetchall()[0])))
    possible = possible_pairs(counts["document_rows"])
    documents, candidates = counts["document_rows"], counts["candidate_pair_rows"]
    duplicates = counts["duplicate_pair_rows"]
    return {
        "input_record_rows": documents + counts["rejected_document_rows"],
        "rejected_document_rows": counts["rejected_document_rows"],
        "document_rows": documents,
        # documents with characters decoding replaced by U+FFFD (bytes that were not UTF-8), and those characters
        "replaced_character_rows": counts["replaced_character_rows"],
        "replaced_characters": counts["replaced_characters"],
        "possible_pair_rows": possible,
        "candidate_pair_rows": candidates,
        # band-level pair slots as the published use case counts them (every two documents that
        # share a bucket), and what the join costs once exact copies are grouped
        "candidate_pair_slots": pressure.document_pair_slots,
        "grouped_candidate_pair_slots": pressure.pair_slots,
        "candidate_reduction_ratio": reduction_ratio(possible, candidates),
        "same_domain_candidate_pair_rows": counts["same_domain_candidate_pair_rows"],
        "cross_domain_candidate_pair_rows": candidates - counts["same_domain_candidate_pair_rows"],
        "max_collision_bucket_size": (
            max_collision_bucket_size(connection, tables) if largest_bucket is None else largest_bucket
        ),
        "duplicate_pair_rows": duplicates,
        "exact_duplicate_pair_rows": counts["exact_duplicate_pair_rows"],
        "near_duplicate_pair_rows": duplicates - counts["exact_duplicate_pair_rows"],
        "same_domain_duplicate_pair_rows": counts["same_domain_duplicate_pair_rows"],
        "cross_domain_duplicate_pair_rows": duplicates - counts["same_domain_duplicate_pair_rows"],
        **warc_counts(connection, tables, duplicates),
        "cluster_count": counts["cluster_count"],
        "duplicate_cluster_rows": counts["duplicate_cluster_rows"],
        "singleton_cluster_rows": counts["singleton_cluster_rows"],
        "max_cluster_size": counts["max_cluster_size"],
        # removed with Jaccard below the threshold with their representative (cluster_mode components)
        "chained_member_rows": counts["chained_member_rows"],
        "representative_rows": counts["representative_rows"],
        "removed_document_rows": documents - counts["representative_rows"],
        "retained_ratio": round(counts["representative_rows"] / documents, 4) if documents else 0.0,
        # where each document stands: it matches a reference (reference_matches), shares a cluster
        # with another input document, or neither
        "reference_matched_rows": counts["reference_matched_rows"],
        "within_input_duplicate_rows": counts["within_input_duplicate_rows"],
        "unique_document_rows": documents - counts["reference_matched_rows"] - counts["within_input_duplicate_rows"],
    }


def warc_counts(connection: duckdb.DuckDBPyConnection, tables: Tables, duplicates: int) -> dict:
    """The accepted edges within one WARC file and across two, where documents names each
    document's WARC file (``warc_filename``: WARC input, or a table made from WARC files); none
    for other input, where a WARC file means nothing."""
    columns = connection.sql(f"select * from {tables.documents} limit 0").columns
    if "warc_filename" not in (column.lower() for column in columns):
        return {}
    within = connection.execute(sql("within_warc_pairs", tables)).fetchall()[0][0]
    return {"within_warc_duplicate_pair_rows": within, "cross_warc_duplicate_pair_rows": duplicates - within}


def reason_counts(connection: duckdb.DuckDBPyConnection, scored_pairs: str) -> dict[str, int]:
    found = dict(connection.execute(f"select reason, count(*) from {scored_pairs} group by reason").fetchall())
    return {reason: int(found.get(reason, 0)) for reason in REASONS}


def rejected_by_reason(connection: duckdb.DuckDBPyConnection, rejected_documents: str) -> dict[str, int]:
    return dict(
        connection.execute(
            f"select reason, count(*) from {rejected_documents} group by reason order by reason"
        ).fetchall()
    )


def duplicate_clusters(connection: duckdb.DuckDBPyConnection, clusters: str) -> list[dict]:
    """Every multi-member cluster with its sorted members and representative."""
    rows = connection.execute(
        f"""
        select cluster_id, list(doc_id order by doc_id), any_value(representative_doc_id)
        from {clusters} where cluster_size > 1 group by cluster_id order by cluster_id
        """
    ).fetchall()
    return [
        {"cluster_id": cluster_id, "members": list(members), "representative": representative}
        for cluster_id, members, representative in rows
    ]
