"""Planted-pair recall of our runs, read from their DuckDB files after every measured run: the
share of planted (origin, copy) pairs with exact 5-shingle Jaccard >= 0.7 that end up as accepted
edges (and as candidates), and the accepted edges below the threshold (0 when precision holds).

Exact copies are stored as a spanning set: each copy paired with its copy group's first copy
(``found_by = 'content_hash'``; the first copy is the earlier in input order, on either side) and
with the first copy's LSH partners. A pair is therefore found when its documents' first copies are
one document or a stored pair: their texts are the same, and so are their scores.

The recall audit's headline (``recall_audit``) counts every true pair of its sample, exact copies
included; its near-copy figure counts the pairs with Jaccard < 1, which LSH had to find. So, beside
the recall of every planted pair, the report gives the recall of the planted pairs of two distinct
texts (one per pair of first copies), the figure closest to what the near-copy interval estimates,
and the audit's own figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import recall_spread
from .common import ROWS_PER_BAND, SHINGLE_SIZE, THRESHOLD, BenchmarkError, progress


class CorpusBodies:
    """The bodies of the documents ``needed`` by integer ``doc_id``, for exact Jaccard of pairs
    among them. Only those are held (the corpus's bodies can outgrow memory); ``id_base`` still
    exceeds every doc_id of the corpus, since candidate pairs' keys use any document."""

    def __init__(self, corpus: Path, needed: np.ndarray, batch_size: int = 65_536):
        from dedup_assets.core.text.normalize import Shingling
        from dedup_assets.core.verify.jaccard import exact_jaccard

        wanted = pa.array(np.unique(needed), pa.int64())
        corpus_file = pq.ParquetFile(corpus)
        doc_ids, bodies, top = [], [], -1
        for batch in corpus_file.iter_batches(columns=["doc_id", "body"], batch_size=batch_size):
            ids = pc.cast(batch.column("doc_id"), pa.int64())
            if len(ids):
                top = max(top, pc.max(ids).as_py())
            keep = pc.is_in(ids, value_set=wanted)
            doc_ids.append(ids.filter(keep))
            # large_string: the kept bodies may still overflow 32-bit offsets once combined
            bodies.append(batch.column("body").filter(keep).cast(pa.large_string()))
        self.doc_ids = pa.chunked_array(doc_ids, pa.int64()).combine_chunks()
        self.bodies = pa.chunked_array(bodies, pa.large_string())
        self.id_base = top + 1
        self._exact_jaccard = exact_jaccard
        self._shingling = Shingling(SHINGLE_SIZE)

    def jaccard(self, left_ids: np.ndarray, right_ids: np.ndarray) -> np.ndarray:
        """Exact 5-shingle Jaccard of each (left_ids[i], right_ids[i]) pair."""
        if len(left_ids) == 0:
            return np.zeros(0, dtype=np.float64)
        return np.asarray(
            self._exact_jaccard(self.bodies_of(left_ids), self.bodies_of(right_ids), self._shingling)
        )

    def pair_keys(self, left_ids: np.ndarray, right_ids: np.ndarray) -> np.ndarray:
        """One int64 per unordered pair, so (a, b) and (b, a) compare equal."""
        low, high = np.minimum(left_ids, right_ids), np.maximum(left_ids, right_ids)
        return low.astype(np.int64) * self.id_base + high.astype(np.int64)

    def bodies_of(self, ids: np.ndarray) -> pa.Array:
        positions = pc.index_in(pa.array(ids, pa.int64()), value_set=self.doc_ids)
        if positions.null_count:
            raise BenchmarkError(
                f"{positions.null_count} doc_id(s) of a pair are not among the loaded documents "
                "of the corpus (those of the planted pairs and accepted edges)"
            )
        return self.bodies.take(positions).combine_chunks()


@dataclass
class PlantedPairs:
    """The planted (origin, copy) pairs of the truth sidecar with their exact Jaccard."""

    origin: np.ndarray
    copy: np.ndarray
    keys: np.ndarray
    jaccard: np.ndarray

    @classmethod
    def load(cls, truth: Path, bodies: CorpusBodies) -> PlantedPairs:
        table = pq.read_table(truth, columns=["doc_id", "origin_doc_id"])
        origin = table["origin_doc_id"].to_numpy()
        copy = table["doc_id"].to_numpy()
        return cls(origin, copy, bodies.pair_keys(origin, copy), bodies.jaccard(origin, copy))


def stored_pairs(database: Path, table: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(left, right) integer doc ids of ``dedup.<table>``, or None when the table is absent."""
    with duckdb.connect(str(database), read_only=True) as connection:
        try:
            columns = connection.execute(
                "select cast(left_doc_id as bigint) as left_id, "
                f"cast(right_doc_id as bigint) as right_id from dedup.{table}"
            ).fetchnumpy()
        except duckdb.CatalogException:
            return None
    return np.asarray(columns["left_id"], np.int64), np.asarray(columns["right_id"], np.int64)


def first_copies(database: Path) -> tuple[np.ndarray, np.ndarray]:
    """(copies, their first copies), sorted by copy, as the pipeline names them: an engine that
    stores its tables as Parquet under the dataset root, ``<database>.datasets`` (where
    ``ours.run_dagster`` puts it), stores them (its views have no rowid, which the DuckDB
    engine's query orders by); the DuckDB engine's are computed by its query."""
    from dedup_assets.core.storage.tables import Tables
    from dedup_assets.core.verify.pairs import first_copies as pipeline_first_copies

    stored = Path(f"{database}.datasets") / "first_copies"
    if stored.is_dir():
        table = pq.read_table(stored, columns=["doc_id", "first_copy_doc_id"])
    else:
        with duckdb.connect(str(database), read_only=True) as connection:
            table = pipeline_first_copies(connection, Tables.in_schema("dedup"))
    copies = pc.cast(table["doc_id"], pa.int64()).to_numpy()
    firsts = pc.cast(table["first_copy_doc_id"], pa.int64()).to_numpy()
    order = np.argsort(copies, kind="stable")
    return copies[order], firsts[order]


def audit_figures(database: Path) -> dict:
    """The stored recall audit's recall and 95% interval, every true pair (``audit_``) and the
    near copies (``audit_near_``); empty without an audit."""
    from dedup_assets.core.audit.recall import stored_audit_summary

    with duckdb.connect(str(database), read_only=True) as connection:
        try:
            summary = stored_audit_summary(connection, "dedup.recall_audit")
        except (duckdb.CatalogException, KeyError):
            return {}
    names = ("true_pairs", "recall", "ci_low", "ci_high")
    return {
        **{f"audit_{name}": summary[name] for name in names},
        **{f"audit_near_{name}": summary["near_copies"][name] for name in names},
    }


def first_copy_of(ids: np.ndarray, copies: np.ndarray, firsts: np.ndarray) -> np.ndarray:
    """Each id's first copy (itself when it is no later copy)."""
    if not len(copies):
        return ids
    positions = np.minimum(np.searchsorted(copies, ids), len(copies) - 1)
    return np.where(copies[positions] == ids, firsts[positions], ids)


def share(hits: np.ndarray) -> float | None:
    return float(hits.mean()) if len(hits) else None


def recall_report(database: Path, planted: PlantedPairs, bodies: CorpusBodies) -> dict:
    """Planted-pair recall of the edges and candidates stored in ``database`` (or implied by
    them, see above), plus the number of accepted edges whose exact Jaccard is below the
    threshold; empty without stored edges."""
    accepted = stored_pairs(database, "duplicate_pairs")
    candidates = stored_pairs(database, "candidate_pairs")
    if accepted is None:
        return {}
    positive = planted.jaccard >= THRESHOLD
    copies, firsts = first_copies(database)
    left = first_copy_of(planted.origin[positive], copies, firsts)
    right = first_copy_of(planted.copy[positive], copies, firsts)
    implied = bodies.pair_keys(left, right)

    def found(pairs: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        keys = bodies.pair_keys(*pairs)
        return (left == right) | np.isin(implied, keys)

    accepted_found = found(accepted)
    # one per pair of distinct texts: two planted copies of one origin are one pair of texts
    _, distinct = np.unique(implied[left != right], return_index=True)
    return {
        "planted_pairs": int(len(planted.keys)),
        "planted_positive": int(positive.sum()),
        "recall": share(accepted_found),
        "planted_distinct_text_pairs": int(len(distinct)),
        "recall_distinct_texts": share(accepted_found[left != right][distinct]),
        **audit_figures(database),
        "candidate_recall": None if candidates is None else share(found(candidates)),
        "accepted_below_threshold": int((bodies.jaccard(*accepted) < THRESHOLD).sum()),
    }


def measure_spread(bodies: CorpusBodies, planted: PlantedPairs, perm: int, seed_count: int) -> dict:
    """Recall of the planted pairs with J >= THRESHOLD by the sketch and banding alone, for ours
    and the installed peers' sketches of the same shingle hashes, over ``seed_count`` seeds."""
    progress(f"recall of the sketches over {seed_count} seeds")
    positive = planted.jaccard >= THRESHOLD
    origin, copy = planted.origin[positive], planted.copy[positive]
    ids = np.unique(np.concatenate([origin, copy]))
    engines = recall_spread.sketchers(bodies.bodies_of(ids), SHINGLE_SIZE, perm, ROWS_PER_BAND)
    rows = recall_spread.spread_rows(
        engines, np.searchsorted(ids, origin), np.searchsorted(ids, copy), ROWS_PER_BAND, seed_count
    )
    return {
        "seeds": recall_spread.seeds(seed_count),
        "planted_positive": int(positive.sum()),
        "independent_expectation": recall_spread.independent_expectation(
            planted.jaccard[positive], perm // ROWS_PER_BAND, ROWS_PER_BAND
        ),
        "rows": [row.as_dict() for row in rows],
        "comparison": recall_spread.comparison(rows[0], rows[1:]),
        "table": recall_spread.spread_table(rows),
    }


def needed_doc_ids(truth: Path, databases: list[Path]) -> np.ndarray:
    """The documents whose bodies recall reads: the planted pairs' and the accepted edges' of
    every run in ``databases``."""
    planted = pq.read_table(truth, columns=["doc_id", "origin_doc_id"])
    ids = [pc.cast(column, pa.int64()).to_numpy() for column in planted.columns]
    for database in databases:
        ids.extend(stored_pairs(database, "duplicate_pairs") or ())
    return np.unique(np.concatenate(ids))


def measure_recall(
    corpus: Path, truth: Path, our_runs: list[dict], perm: int, seed_count: int
) -> dict | None:
    """Add recall and the precision count to each of our runs, in place; with ``seed_count``,
    return the recall spread of the sketches."""
    progress("recall of planted pairs")
    databases = [Path(run["database"]) for run in our_runs]
    bodies = CorpusBodies(corpus, needed_doc_ids(truth, databases))
    planted = PlantedPairs.load(truth, bodies)
    for run, database in zip(our_runs, databases):
        run.update(recall_report(database, planted, bodies))
    return measure_spread(bodies, planted, perm, seed_count) if seed_count else None
