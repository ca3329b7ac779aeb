"""Where duplicates come from: the release files that show which LSH buckets collect the most
documents (``collision_buckets.csv``), which domains share candidate and duplicate pairs
(``domain_summary.csv``) and how the accepted edges were found (``duplicate_summary.csv``), and
the pairs of domains with the most duplicate edges between them: which sites mirror which.
"""

from __future__ import annotations

import duckdb

from ..storage.tables import Tables, sql

COLLISION_BUCKETS_FILE = "collision_buckets.csv"
DOMAIN_SUMMARY_FILE = "domain_summary.csv"
DUPLICATE_SUMMARY_FILE = "duplicate_summary.csv"
# How much the files list (manifest.json states it): a bucket of shared boilerplate can hold
# thousands of documents, so a row lists its first members and domains and counts them all.
COLLISION_BUCKETS_LISTED = 1_000
BUCKET_MEMBERS_SHOWN = 50
BUCKET_DOMAINS_SHOWN = 20
PARTNER_DOMAINS_SHOWN = 5
# each file's caps, bound to its query's parameters of these names ($name)
CAPS = {
    COLLISION_BUCKETS_FILE: {
        "buckets_listed": COLLISION_BUCKETS_LISTED,
        "members_shown": BUCKET_MEMBERS_SHOWN,
        "domains_shown": BUCKET_DOMAINS_SHOWN,
    },
    DOMAIN_SUMMARY_FILE: {"partner_domains_shown": PARTNER_DOMAINS_SHOWN},
}


def diagnostic_queries(tables: Tables) -> dict[str, str]:
    """File name -> the query that fills it (``sql/<file stem>.sql``), run with the file's
    ``CAPS`` bound."""
    return {
        name: sql(name.removesuffix(".csv"), tables)
        for name in (COLLISION_BUCKETS_FILE, DOMAIN_SUMMARY_FILE, DUPLICATE_SUMMARY_FILE)
    }


def max_collision_bucket_size(connection: duckdb.DuckDBPyConnection, tables: Tables) -> int:
    """Documents in the largest LSH bucket (exact copies included); 0 when no bucket holds two."""
    query = sql("collision_buckets", tables)
    return int(
        connection.execute(
            f"select coalesce(max(member_count), 0) from ({query})", CAPS[COLLISION_BUCKETS_FILE]
        ).fetchall()[0][0]
    )


def mirror_domain_pairs(connection: duckdb.DuckDBPyConnection, tables: Tables, limit: int) -> list[dict]:
    """The ``limit`` pairs of different domains with the most duplicate edges between them, each
    ``{"domain_a", "domain_b", "pairs"}`` with domain_a < domain_b, the most first, then by name."""
    cursor = connection.execute(sql("mirror_domain_pairs", tables), [limit])
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]
