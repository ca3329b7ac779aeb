"""Recall you can measure: the true pairs of a seeded sample of documents (every pair with a
sampled document on one side and exact shingle Jaccard at least the threshold, found without LSH
while fingerprinting: ``probe.py``), counted per pair of texts with whether the pipeline
found them (``sql/recall_audit.sql``). A group of n copies counts its n·(n − 1)/2 pairs from its
size, so the audit's cost grows with the distinct texts near the sample, not with their copies.

The headline recall counts every true pair, exact copies included, so an exhaustive audit
(``audit_sample_size`` 0) counts what an all-pairs comparison counts. Beside it, the near-copy
figure counts only the pairs with Jaccard below 1: what LSH had to find, since the pipeline pairs
identical texts through their content hash whatever LSH does.
"""

from __future__ import annotations

import math
from dataclasses import replace

import duckdb
import numpy as np
import pyarrow as pa

from .probe import AUDIT_SAMPLED, audit_pairs_table
from ..storage.store import TableBuild, read_lineage
from ..storage.tables import Tables, sql_over
from ..verify.pairs import first_copies

# the true pairs counted by text, a temporary table the recall_audit table is made from
COUNTED = "recall_audit_counted"
# the Jaccard bands the audit reports recall in: [t, 0.8), [0.8, 0.9), [0.9, 1.0) and 1.0
BAND_EDGES = (0.8, 0.9, 1.0)
IDENTICAL = "1.0"  # the band of Jaccard 1: identical shingle sets, exact copies among them


def band_labels(threshold: float) -> list[str]:
    """The labels of the Jaccard bands from ``threshold`` up, one more than :data:`BAND_EDGES`: a
    pair's band is the label after the edges at or below its Jaccard."""
    lowers = (threshold, *BAND_EDGES[:-1])
    return [f"[{_decimal(lower)}, {_decimal(upper)})" for lower, upper in zip(lowers, BAND_EDGES)] + [IDENTICAL]


def _decimal(value: float) -> str:
    """0.7 -> 0.7, 1 -> 1.0, 0.75 -> 0.75."""
    text = f"{value:g}"
    return text if "." in text else f"{text}.0"


def wilson_interval(found: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion found/total (95% at z = 1.96); (0, 1) when
    there is nothing to count."""
    if total == 0:
        return 0.0, 1.0
    share = found / total
    denominator = 1 + z * z / total
    centre = (share + z * z / (2 * total)) / denominator
    spread = z * math.sqrt(share * (1 - share) / total + z * z / (4 * total * total)) / denominator
    return max(0.0, centre - spread), min(1.0, centre + spread)


def stored_true_pairs(connection: duckdb.DuckDBPyConnection, tables: Tables) -> tuple[str, int]:
    """The table of the true pairs fingerprinting found (:func:`counted_pairs` keeps those at the
    threshold or above: a rescore may have raised it), and how many documents were sampled."""
    pairs = audit_pairs_table(tables)
    return pairs, read_lineage(connection, pairs)[AUDIT_SAMPLED]


def build_recall_audit(
    connection: duckdb.DuckDBPyConnection,
    tables: Tables,
    threshold: float,
    found: pa.Table | str,
    copies: pa.Table | None = None,
) -> TableBuild:
    """The ``recall_audit`` table of the documents the probe ``found``
    (``audit_probe.AUDIT_PAIRS_SCHEMA``, or the table that holds them): :func:`counted_pairs`. ``copies`` (doc_id,
    first_copy_doc_id) names the copies where the engine keeps them; unset: from the DuckDB
    tables."""
    # a content_hash pair has Jaccard 1, so every one is an edge: the edges name the first copies
    edge_tables = replace(tables, candidate_pairs=tables.duplicate_pairs)
    copies = first_copies(connection, edge_tables) if copies is None else copies
    return counted_pairs(tables, threshold, found, copies)


def counted_pairs(tables: Tables, threshold: float, found: pa.Table | str, copies: pa.Table) -> TableBuild:
    """The true pairs of ``found`` (the probe's rows, or the table that holds them) at
    ``threshold`` or above, counted per pair of texts through ``copies`` (doc_id,
    first_copy_doc_id), with their Jaccard band, how many LSH bands the two texts share, and
    whether the pipeline found them (``sql/recall_audit.sql``): in DuckDB, however many they are."""
    inputs = {"first_copies": copies}
    if not isinstance(found, str):
        inputs["true_pairs"], found = found, "true_pairs"
    counted = TableBuild(
        sql=sql_over("recall_audit_counted", true_pairs=found),
        params=[threshold, band_labels(threshold), list(BAND_EDGES)],
        arrow_inputs=inputs,
    )
    query = sql_over(
        "recall_audit", counted=f"temp.{COUNTED}", fingerprinted=tables.fingerprinted,
        duplicate_pairs=tables.duplicate_pairs,
    )
    return TableBuild(sql=query, staged=((COUNTED, counted),))


# what the near-copy figure counts, as the metadata, the summary and the release label it
NEAR_COPIES = "pairs with Jaccard < 1"


def clustered_interval(true: np.ndarray, found: np.ndarray, z: float = 1.96) -> tuple[float, float]:
    """The 95% interval of recall ``sum(found) / sum(true)`` over units (texts) that each bring
    ``true`` pairs of which ``found`` were found: the Wilson interval at the effective number of
    pairs. A text's pairs are found or missed together (LSH pairs two copy groups once, for all
    their copies), so they count less than independent ones: the design effect is the ratio
    estimator's variance over the units against the binomial's (at least 1)."""
    total, units = int(true.sum()), len(true)
    if total == 0:
        return wilson_interval(0, 0, z)
    share = float(found.sum()) / total
    binomial = share * (1 - share) / total
    effect = 1.0
    if units > 1 and binomial > 0:
        over_units = units / (units - 1) * float(((found - share * true) ** 2).sum()) / total**2
        effect = max(1.0, over_units / binomial)
    return wilson_interval(share * total / effect, total / effect, z)


def audit_summary(connection: duckdb.DuckDBPyConnection, table: str, sampled: int) -> dict:
    """The audit's figures: sampled documents, true and found pairs, recall with its 95%
    interval (:func:`clustered_interval`) over every true pair, exact copies included, the same
    per Jaccard band, and for the near copies alone (Jaccard < 1); and how many missed pairs
    shared a bucket."""
    counts = connection.execute(
        f"select jaccard_band, sampled_text, sum(pairs)::bigint as true_pairs, "
        f"coalesce(sum(pairs) filter (where found), 0)::bigint as found_pairs from {table} group by all"
    ).fetchdf()

    def figures(rows) -> dict:
        units = rows.groupby("sampled_text")[["true_pairs", "found_pairs"]].sum()
        true, found = int(units["true_pairs"].sum()), int(units["found_pairs"].sum())
        low, high = clustered_interval(units["true_pairs"].to_numpy(), units["found_pairs"].to_numpy())
        return {
            "true_pairs": true,
            "found_pairs": found,
            "recall": round(found / true, 4) if true else None,
            "ci_low": round(low, 4),
            "ci_high": round(high, 4),
        }

    # a true pair that shared a bucket and was not found was in a bucket the join left out (hot_buckets: skip)
    sharing = connection.execute(
        f"select coalesce(sum(pairs) filter (where not found and shared_bands > 0), 0)::bigint from {table}"
    ).fetchall()[0][0]
    return {
        "sampled_documents": sampled,
        **figures(counts),
        "missed_sharing_a_bucket": int(sharing),
        "by_jaccard_band": {band: figures(rows) for band, rows in sorted(counts.groupby("jaccard_band"))},
        "near_copies": {"counts": NEAR_COPIES, **figures(counts[counts["jaccard_band"] != IDENTICAL])},
    }


def stored_audit_summary(connection: duckdb.DuckDBPyConnection, table: str) -> dict:
    """:func:`audit_summary` of a stored ``recall_audit`` table (its lineage says how many
    documents were sampled)."""
    return audit_summary(connection, table, read_lineage(connection, table)[AUDIT_SAMPLED])
