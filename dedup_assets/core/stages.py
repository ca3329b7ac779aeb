"""The pipeline stages over DuckDB tables, without Dagster.

Each stage reads its inputs through a DuckDB connection and returns a :class:`TableBuild` for its
output table; whoever runs it (the Dagster IO manager, or :func:`pipeline.run_library`) writes it.
Table names are the caller's (``Tables``), values from users are always bound parameters.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, fields
from functools import cache
from typing import TypeVar
from pathlib import Path

import duckdb
import networkx as nx
import numpy as np
import pyarrow as pa

from . import kernels
from .fingerprint import (
    SketchParams,
    fingerprint_batch,
    fingerprint_schema,
    list_matrix,
    pair_jaccard,
    signature_overlap,
)
from .inputs import InputPolicy, InputStats, document_batches
from .tables import TableBuild
from .verify import Thresholds

SQL_DIR = Path(__file__).parent / "sql"
PIPELINE_TABLES = (
    "documents",
    "rejected_documents",
    "fingerprinted",
    "band_memberships",
    "candidate_pairs",
    "scored_pairs",
    "duplicate_pairs",
    "clusters",
    "deduped_documents",
)
Progress = Callable[[str], None]
T = TypeVar("T")


class PairBudgetExceeded(RuntimeError):
    """The band buckets would create more self-join rows than the configured budget allows."""


class MemoryBudgetExceeded(RuntimeError):
    """A stage would need more memory than the configured budget."""


@dataclass(frozen=True)
class Tables:
    """Qualified table names, e.g. ``Tables.in_schema("dedup")``."""

    documents: str
    rejected_documents: str
    fingerprinted: str
    band_memberships: str
    candidate_pairs: str
    scored_pairs: str
    duplicate_pairs: str
    clusters: str
    deduped_documents: str

    @classmethod
    def in_schema(cls, schema: str) -> Tables:
        return cls(**{name: f"{schema}.{name}" for name in PIPELINE_TABLES})


@dataclass(frozen=True)
class BucketPressure:
    pair_slots: int
    largest_bucket_size: int
    largest_bucket_key: str | None
    bucket_count: int

    # Carried in candidate_pairs' lineage, so that the release reports the figures the join was
    # admitted with instead of grouping every band row a second time (2.2 s of CPU per 1M
    # documents at 16 bands).
    LINEAGE_PREFIX = "lsh_"

    def as_lineage(self) -> dict:
        return {f"{self.LINEAGE_PREFIX}{name}": value for name, value in asdict(self).items()}

    @classmethod
    def from_lineage(cls, lineage: dict) -> BucketPressure | None:
        """The figures recorded by :meth:`as_lineage`; None for tables built before they were."""
        names = [f"{cls.LINEAGE_PREFIX}{field.name}" for field in fields(cls)]
        if not all(name in lineage for name in names):
            return None
        return cls(*(lineage[name] for name in names))


@cache
def _template(name: str) -> str:
    return (SQL_DIR / f"{name}.sql").read_text(encoding="utf-8")


def sql(name: str, tables: Tables) -> str:
    """The named query with the caller's table names filled in (identifiers only, never values)."""
    return _template(name).format(**tables.__dict__)


class ThroughputLog:
    """Logs documents done, documents per second and time to go, at most every ``interval`` s."""

    def __init__(self, log: Progress, label: str, total: int, interval: float = 5.0):
        self.log, self.label, self.total, self.interval = log, label, total, interval
        self.started = self.last = time.monotonic()
        self.done = 0

    def advance(self, count: int) -> None:
        self.done += count
        now = time.monotonic()
        if now - self.last >= self.interval or self.done >= self.total:
            self.last = now
            rate = self.done / max(now - self.started, 1e-9)
            remaining = (self.total - self.done) / rate if rate else float("inf")
            self.log(
                f"{self.label}: {self.done:,}/{self.total:,} documents, {rate:,.0f} docs/s, "
                f"about {remaining:,.0f} s to go"
            )


def prefetched(items: Iterator[T]) -> Iterator[T]:
    """``items``, each produced in a worker thread while the caller handles the one before.
    Worth it where producing and consuming both release the GIL (Arrow compute, compiled kernels,
    DuckDB), which is how a batch stream uses both cores."""
    end = object()
    with ThreadPoolExecutor(max_workers=1) as worker:
        pending = worker.submit(next, items, end)
        while (item := pending.result()) is not end:
            pending = worker.submit(next, items, end)
            yield item


def document_stream(
    path: Path, stats: InputStats, batch_size: int, policy: InputPolicy, log: Progress
) -> Iterator[pa.RecordBatch]:
    """The validated input, logged as it streams; the next batch is read and validated while
    the caller stores the previous one."""
    last = time.monotonic()
    for batch in prefetched(document_batches(path, stats, batch_size, policy)):
        if time.monotonic() - last >= 5.0:
            last = time.monotonic()
            log(f"documents: {stats.rows:,} rows read")
        yield batch


def fingerprint_stream(
    connection: duckdb.DuckDBPyConnection,
    tables: Tables,
    params: SketchParams,
    batch_size: int,
    log: Progress,
) -> Iterator[pa.RecordBatch]:
    """Fingerprints, one Arrow batch per ``batch_size`` documents read from ``documents``.
    Owns ``connection`` and closes it when the stream ends.

    Three threads: one reads batches from DuckDB, one fingerprints them, and the caller stores
    the previous one. Overlapping the store: 14.0 s -> 12.6 s per 1M documents; reading ahead as
    well: 12.4 and 11.9 s -> 11.9 and 11.2 s (two runs each)."""
    try:
        total = connection.execute(f"select count(*) from {tables.documents}").fetchall()[0][0]
        progress = ThroughputLog(log, "fingerprinted", total)
        reader = connection.sql(f"select doc_id, body from {tables.documents}").to_arrow_reader(
            batch_size
        )
        for fingerprints in prefetched(
            fingerprint_batch(batch.column(0), batch.column(1), params) for batch in prefetched(reader)
        ):
            yield fingerprints
            progress.advance(fingerprints.num_rows)
    finally:
        connection.close()


def band_buckets(connection: duckdb.DuckDBPyConnection, tables: Tables) -> tuple[BucketPressure, pa.Table]:
    """The bucket pressure and the shared buckets (``band_index``, ``lsh_band`` of every bucket
    with two documents or more), from the band keys of the documents band_memberships holds
    (those with shingles). Pair slots: a bucket of n documents yields n(n-1)/2 self-join rows."""
    keys = connection.sql(
        f"select lsh_bands from {tables.fingerprinted} where shingle_count > 0"
    ).to_arrow_table()
    slots, largest, largest_keys, buckets, shared, shared_counts = kernels.bucket_pressure_kernel(
        list_matrix(keys.column(0))
    )
    shared_buckets = pa.table(
        {
            "band_index": np.repeat(np.arange(len(shared_counts), dtype=np.int16), shared_counts),
            "lsh_band": np.concatenate(
                [shared[band, :count] for band, count in enumerate(shared_counts)] or [np.zeros(0, np.uint64)]
            ),
        }
    )
    if not len(largest) or largest.max() == 0:
        return BucketPressure(0, 0, None, 0), shared_buckets
    worst = int(np.argmax(largest))  # the first band among equals
    pressure = BucketPressure(
        int(slots.sum()), int(largest[worst]), f"{worst:03d}:{int(largest_keys[worst]):016x}", int(buckets.sum())
    )
    return pressure, shared_buckets


def bucket_pressure(connection: duckdb.DuckDBPyConnection, tables: Tables) -> BucketPressure:
    return band_buckets(connection, tables)[0]


def ensure_within_budget(pressure: BucketPressure, max_pair_slots: int) -> None:
    if pressure.pair_slots > max_pair_slots:
        raise PairBudgetExceeded(
            f"LSH buckets would create {pressure.pair_slots:,} band-level pair slots, above "
            f"max_pair_slots={max_pair_slots:,}. The worst bucket is {pressure.largest_bucket_key} "
            f"with {pressure.largest_bucket_size:,} documents (likely shared boilerplate or "
            "near-empty pages). Strip that boilerplate, raise rows_per_band to make buckets "
            "stricter, or raise max_pair_slots if you have the memory."
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
          select left_doc_id as doc_id from {tables.candidate_pairs}
          union select right_doc_id from {tables.candidate_pairs}
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
    connection: duckdb.DuckDBPyConnection, tables: Tables, params: SketchParams
) -> pa.Table:
    """Per candidate pair: exact shingle Jaccard (shingling each involved document once), the
    share of equal signature coordinates, and whether the content hashes (of the normalized
    token sequences) are equal."""
    bodies = connection.sql(sql("candidate_bodies", tables)).to_arrow_table()
    connection.register(
        "candidate_positions",
        pa.table({"doc_id": bodies.column("doc_id"), "position": np.arange(bodies.num_rows)}),
    )
    try:
        pairs = connection.sql(
            f"""
            select p.left_doc_id, p.right_doc_id, l.position as left_row, r.position as right_row
            from {tables.candidate_pairs} p
            join candidate_positions l on l.doc_id = p.left_doc_id
            join candidate_positions r on r.doc_id = p.right_doc_id
            """
        ).to_arrow_table()
        expected = connection.execute(f"select count(*) from {tables.candidate_pairs}").fetchall()[0][0]
    finally:
        connection.unregister("candidate_positions")
    if pairs.num_rows != expected:
        raise ValueError(
            f"{expected - pairs.num_rows} candidate pairs name documents missing from documents or "
            "fingerprinted: re-materialize candidate_pairs and everything downstream"
        )
    left, right = pairs.column("left_row").to_numpy(), pairs.column("right_row").to_numpy()
    content_hashes = bodies.column("content_hash").to_numpy()
    return pa.table(
        {
            "left_doc_id": pairs.column("left_doc_id"),
            "right_doc_id": pairs.column("right_doc_id"),
            "jaccard": pair_jaccard(
                bodies.column("body"),
                left,
                right,
                params.shingle_size,
                params.hash_scheme,
                bodies.column("shingle_count").to_numpy(),
            ),
            "signature_overlap": signature_overlap(bodies.column("signature"), left, right),
            "is_exact": content_hashes[left] == content_hashes[right],
        }
    )


def component_roots(connection: duckdb.DuckDBPyConnection, tables: Tables) -> pa.Table:
    """networkx connected components of the accepted edges: each member's smallest doc_id.
    Documents without an edge are left out; the clusters query makes them singletons."""
    edges = connection.execute(
        f"select left_doc_id, right_doc_id from {tables.duplicate_pairs}"
    ).fetchall()
    members, roots = [], []
    with _collector_paused():
        for component in nx.connected_components(nx.Graph(edges)):
            root = min(component)
            members.extend(component)
            roots.extend([root] * len(component))
    return pa.table(
        {"doc_id": pa.array(members, pa.string()), "root_doc_id": pa.array(roots, pa.string())}
    )


@contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: a graph is a dict per node, and the collector walked
    them again and again while they were made (0.8 s -> 0.6 s per 145k edges)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def preview(connection: duckdb.DuckDBPyConnection, query: str, rows: int = 10) -> str:
    """A markdown table of the first ``rows`` rows of ``query``, for the UI."""
    frame = connection.execute(f"select * from ({query}) limit {int(rows)}").fetchdf()
    return frame.to_markdown(index=False) if len(frame) else "_no rows_"


# --- Builders: one per table, returning what to write -------------------------------------------


def build_documents(
    path: Path, batch_size: int, policy: InputPolicy, log: Progress
) -> tuple[TableBuild, InputStats]:
    """The accepted documents as a stream; ``stats`` fills in (rejected rows included) as it is
    written, for :func:`build_rejected_documents`."""
    stats = InputStats()
    return TableBuild(lineage={}, batches=document_stream(path, stats, batch_size, policy, log)), stats


def build_rejected_documents(stats: InputStats) -> TableBuild:
    return TableBuild(
        lineage={},
        sql="select * from rejected order by source_file, input_row",
        arrow_inputs={"rejected": stats.rejected_table()},
    )


def build_fingerprinted(
    reader: duckdb.DuckDBPyConnection, tables: Tables, params: SketchParams, batch_size: int, log: Progress
) -> TableBuild:
    return TableBuild(
        lineage={},
        batches=fingerprint_stream(reader, tables, params, batch_size, log),
        schema=fingerprint_schema(params),
    )


def build_band_memberships(tables: Tables) -> TableBuild:
    """A view: unnesting the band keys where they are read costs less than storing them again.
    1M documents at 16 bands, alternating runs: fingerprint and candidates stages 10.8 and 10.6 s
    against 11.6 and 11.0 s as a table (the join takes 0.7 s more, the build 1.0-1.6 s less)."""
    return TableBuild(lineage={}, sql=sql("band_memberships", tables), view=True)


def build_candidate_pairs(
    connection: duckdb.DuckDBPyConnection, tables: Tables, max_pair_slots: int
) -> tuple[TableBuild, BucketPressure]:
    """Refuses, before joining, a corpus whose buckets exceed ``max_pair_slots``; the join then
    reads only the band rows of shared buckets (1.74 s -> 0.74 s per 1M documents at 16 bands,
    where 1.0M of 14.8M buckets are shared)."""
    pressure, shared_buckets = band_buckets(connection, tables)
    ensure_within_budget(pressure, max_pair_slots)
    build = TableBuild(
        lineage={}, sql=sql("candidate_pairs", tables), arrow_inputs={"shared_buckets": shared_buckets}
    )
    return build, pressure


def build_scored_pairs(
    connection: duckdb.DuckDBPyConnection,
    tables: Tables,
    params: SketchParams,
    thresholds: Thresholds,
    memory_budget_mb: int,
) -> TableBuild:
    documents, estimate = verification_memory_estimate(connection, tables, params.num_perm)
    ensure_memory(estimate, memory_budget_mb, f"Shingling the {documents:,} candidate documents again")
    return TableBuild(
        lineage={},
        sql=sql("scored_pairs", tables),
        params=[thresholds.jaccard, thresholds.signature_overlap],
        arrow_inputs={"pair_scores": candidate_scores(connection, tables, params)},
        metadata={"reshingled_documents": documents},
    )


def build_duplicate_pairs(tables: Tables) -> TableBuild:
    return TableBuild(
        lineage={},
        sql=f"select * from {tables.scored_pairs} where is_duplicate order by left_doc_id, right_doc_id",
    )


def build_clusters(connection: duckdb.DuckDBPyConnection, tables: Tables) -> TableBuild:
    return TableBuild(
        lineage={},
        sql=sql("clusters", tables),
        arrow_inputs={"component_roots": component_roots(connection, tables)},
    )


def build_deduped_documents(tables: Tables) -> TableBuild:
    """A view: the representatives' rows are already in ``documents``; copying the corpus text
    again would cost a full write of every kept body."""
    return TableBuild(lineage={}, sql=sql("deduped_documents", tables), view=True)
