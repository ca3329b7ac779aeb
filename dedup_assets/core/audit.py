"""Recall you can measure: every pair, with a sampled document on one side, whose exact shingle
Jaccard is at least the threshold, found without LSH.

A pair with Jaccard ``J(x, y) >= t`` shares at least ``t·|x|`` of x's shingles, so y holds at
least one of any ``floor((1 - t)·|x|) + 1`` shingles of x (the *probes* of x; prefix filtering).
Every document is shingled once, streamed batch by batch; a document holding a probe of a
sampled document is a candidate of it, and each candidate pair is verified with exact Jaccard.
So the pairs found are exactly the true pairs of the sampled documents: none is missed, none
is made up. Comparing them with the pairs the pipeline accepted measures its recall.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import kernels
from .sketch import kernel_blocks
from .store import TableBuild, read_lineage, rows_with_ids
from .tables import Tables, sql
from .text import Shingling, kernel_text
from .verify import first_copies, shingle_sets


@dataclass(frozen=True)
class TruePairs:
    """Pairs of document rows (``left < right``, rows in input order) and their exact Jaccard."""

    left: np.ndarray
    right: np.ndarray
    jaccard: np.ndarray


def sample_rows(documents: int, size: int, seed: int) -> np.ndarray:
    """``size`` document rows drawn without replacement, sorted; every row when ``size`` is 0 or
    at least ``documents``."""
    if size == 0 or size >= documents:
        return np.arange(documents, dtype=np.int64)
    return np.sort(np.random.default_rng(seed).choice(documents, size, replace=False)).astype(np.int64)


@dataclass(frozen=True)
class _Probes:
    """Each sampled document's probe shingles: the distinct hashes (sorted) and, per hash, the
    sampled documents (indexes into the sample) that probe with it, as CSR."""

    hashes: np.ndarray
    owner_offsets: np.ndarray
    owners: np.ndarray
    owner_count: int  # sampled documents with probes: the owners are below it


def _probes(values: np.ndarray, offsets: np.ndarray, threshold: float) -> _Probes:
    owners, hashes = [], []
    for index in range(len(offsets) - 1):
        shingles = np.sort(values[offsets[index] : offsets[index + 1]])
        count = int(np.floor((1.0 - threshold) * len(shingles) + 1e-9)) + 1 if len(shingles) else 0
        hashes.append(shingles[:count])
        owners.append(np.full(min(count, len(shingles)), index, dtype=np.int64))
    hashes_all = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
    owners_all = np.concatenate(owners) if owners else np.zeros(0, np.int64)
    order = np.argsort(hashes_all, kind="stable")
    hashes_all, owners_all = hashes_all[order], owners_all[order]
    unique, starts = np.unique(hashes_all, return_index=True)
    owner_count = int(owners_all.max()) + 1 if len(owners_all) else 0
    return _Probes(unique, np.append(starts, len(hashes_all)).astype(np.int64), owners_all, owner_count)


# bits of the probe filter per probe: few enough to stay in cache, enough that an unrelated
# shingle rarely passes
_FILTER_BITS_PER_PROBE = 16


def _probe_filter(hashes: np.ndarray) -> np.ndarray:
    """A bitmap (uint64 words, a power-of-two number of bits) of the probes' top hash bits."""
    bits = 64
    while bits < len(hashes) * _FILTER_BITS_PER_PROBE:
        bits *= 2
    words = np.zeros(bits // 64, dtype=np.uint64)
    top = hashes >> np.uint64(64 - int(np.log2(bits)))
    np.bitwise_or.at(words, (top >> np.uint64(6)).astype(np.int64), np.uint64(1) << (top & np.uint64(63)))
    return words


def _candidates(values: np.ndarray, offsets: np.ndarray, probes: _Probes) -> tuple[np.ndarray, np.ndarray]:
    """(document row in the batch, sampled document) for every document of the batch that holds
    a probe of that sampled document, each pair once."""
    if not len(probes.hashes) or not len(values):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    at = np.minimum(np.searchsorted(probes.hashes, values), len(probes.hashes) - 1)
    hit = probes.hashes[at] == values
    rows = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))[hit]
    return kernels.probe_pairs_kernel(rows, at[hit], probes.owner_offsets, probes.owners, probes.owner_count)


def exact_pairs(
    bodies: Iterable[pa.Array],
    sample_bodies: pa.Array,
    sample: np.ndarray,
    shingling: Shingling,
    threshold: float,
    left_out: np.ndarray | None = None,
) -> TruePairs:
    """Every pair with a document of ``sample`` (rows into the input, whose bodies are
    ``sample_bodies``) on one side and Jaccard at least ``threshold``, over all documents,
    whose bodies arrive in input order as ``bodies`` batches, except the rows ``left_out``
    marks. Each pair once."""
    sample_values, sample_offsets = shingle_sets(sample_bodies, shingling)
    probes = _probes(sample_values, sample_offsets, threshold)
    bits = _probe_filter(probes.hashes)
    found_left, found_right, found_jaccard = [], [], []
    first = 0
    for batch in bodies:
        batch_size = len(batch)
        # only the documents holding a probe are shingled into sets
        held = np.flatnonzero(
            kernels.probe_hits_kernel(kernel_text(batch, shingling.unit), shingling.size, probes.hashes, bits, kernel_blocks())
        )
        if left_out is not None:
            held = held[~left_out[first + held]]
        values, offsets = shingle_sets(batch.take(pa.array(held)), shingling)
        rows, owners = _candidates(values, offsets, probes)
        if len(rows):
            # one set table: the sample's sets, then the batch's
            table = np.concatenate([sample_values, values])
            table_offsets = np.concatenate([sample_offsets[:-1], offsets + sample_offsets[-1]])
            jaccard = kernels.pair_jaccard_kernel(
                table, table_offsets, owners, rows + len(sample), kernel_blocks()
            )
            documents = held[rows] + first
            keep = (jaccard >= threshold) & (sample[owners] != documents)
            found_left.append(sample[owners][keep])
            found_right.append(documents[keep])
            found_jaccard.append(jaccard[keep])
        first += batch_size
    if not found_left:
        return TruePairs(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64))
    left, right, jaccard = (np.concatenate(parts) for parts in (found_left, found_right, found_jaccard))
    # a pair of two sampled documents is found from both sides: keep it once
    low, high = np.minimum(left, right), np.maximum(left, right)
    pairs, index = np.unique(np.stack([low, high], axis=1), axis=0, return_index=True)
    return TruePairs(pairs[:, 0], pairs[:, 1], jaccard[index])


# the lineage entry of the recall_audit table that records how many documents were sampled
AUDIT_SAMPLED = "audit_sampled_documents"
# the Jaccard bands the audit reports recall in: [t, 0.8), [0.8, 0.9), [0.9, 1.0) and 1.0
BAND_EDGES = (0.8, 0.9, 1.0)


def jaccard_band(jaccard: float, threshold: float) -> str:
    lower = threshold
    for upper in BAND_EDGES:
        if jaccard < upper:
            return f"[{_decimal(lower)}, {_decimal(upper)})"
        lower = upper
    return "1.0"


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


def build_recall_audit(
    connection: duckdb.DuckDBPyConnection,
    tables: Tables,
    shingling: Shingling,
    threshold: float,
    sample_size: int,
    seed: int,
    batch_size: int,
    copies: pa.Table | None = None,
) -> tuple[TableBuild, int]:
    """The ``recall_audit`` table: every true pair (Jaccard at least ``threshold``) of a seeded
    sample of ``sample_size`` distinct texts (0: all), with its Jaccard band, how many LSH bands
    the two documents share, and whether the pipeline found it (``sql/recall_audit.sql``). Also
    returns how many documents were sampled.

    Exact copies are left out: each text is audited through its first copy, as LSH sees it (the
    pipeline pairs every copy through its copy group, whatever LSH finds), and a page copied n
    times would otherwise add n·(n-1)/2 pairs that say nothing about LSH. ``copies`` (doc_id,
    first_copy_doc_id) names them where the engine keeps them; unset: from the DuckDB tables."""
    doc_ids = connection.sql(f"select doc_id from {tables.documents}").to_arrow_table().column(0).combine_chunks()
    # a content_hash pair has Jaccard 1, so every one is an edge: the edges name the first copies
    edge_tables = replace(tables, candidate_pairs=tables.duplicate_pairs)
    copies = first_copies(connection, edge_tables) if copies is None else copies
    is_copy = pc.is_in(doc_ids, value_set=copies.column("doc_id").combine_chunks()).to_numpy(zero_copy_only=False)
    texts = np.flatnonzero(~is_copy)
    sample = texts[sample_rows(len(texts), sample_size, seed)]
    # by doc_id, not rowid: documents can be a view over Parquet, which has none
    sample_ids = doc_ids.take(pa.array(sample, pa.int64()))
    sample_bodies = rows_with_ids(connection, tables.documents, sample_ids, ["body"]).column("body").combine_chunks()
    reader = connection.sql(f"select body from {tables.documents}").to_arrow_reader(batch_size)
    pairs = exact_pairs(
        (batch.column(0) for batch in reader), sample_bodies, sample, shingling, threshold, left_out=is_copy
    )
    left, right = doc_ids.take(pa.array(pairs.left)), doc_ids.take(pa.array(pairs.right))
    swap = pc.greater(left, right)
    true_pairs = pa.table(
        {
            "left_doc_id": pc.if_else(swap, right, left),
            "right_doc_id": pc.if_else(swap, left, right),
            "jaccard": pa.array(pairs.jaccard),
            "jaccard_band": pa.array([jaccard_band(value, threshold) for value in pairs.jaccard.tolist()], pa.string()),
        }
    )
    build = TableBuild(
        sql=sql("recall_audit", tables),
        arrow_inputs={"true_pairs": true_pairs, "first_copies": copies},
    )
    return build, len(sample)


def audit_summary(connection: duckdb.DuckDBPyConnection, table: str, sampled: int) -> dict:
    """The audit's figures: sampled documents, true and found pairs, recall with its 95% Wilson
    interval, and the same per Jaccard band."""

    def figures(true: int, found: int) -> dict:
        low, high = wilson_interval(found, true)
        return {
            "true_pairs": true,
            "found_pairs": found,
            "recall": round(found / true, 4) if true else None,
            "ci_low": round(low, 4),
            "ci_high": round(high, 4),
        }

    rows = connection.execute(
        f"select jaccard_band, count(*), count(*) filter (where found) from {table} group by all order by all"
    ).fetchall()
    true, found = sum(row[1] for row in rows), sum(row[2] for row in rows)
    return {
        "sampled_documents": sampled,
        **figures(true, found),
        "by_jaccard_band": {band: figures(int(t), int(f)) for band, t, f in rows},
    }


def stored_audit_summary(connection: duckdb.DuckDBPyConnection, table: str) -> dict:
    """:func:`audit_summary` of a stored ``recall_audit`` table (its lineage says how many
    documents were sampled)."""
    return audit_summary(connection, table, read_lineage(connection, table)[AUDIT_SAMPLED])
