"""Each step of a one-shot run, defined once: what it reads, which engine call builds its tables,
and what it writes, with the lineage it adds. The assets (``assets/``) call these steps and
describe what they wrote; the library runner (``pipeline.run_library``), the parameter sweep and
the engines' consistency check call them in the graph's order. So a step cannot differ between
the graph and the library: there is one wiring, and only the describing is the assets' own.

A step gets a :class:`StepRun`: the run's settings, tables and engine (made on first use: the
ray engine starts Ray, which a step that needs no engine must not), a way to open a cursor, and
``write``, which replaces one table (named in the run's schema) with the lineage the caller
keeps (the asset's upstream lineage and settings; nothing more for the library) plus the step's own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import duckdb
import pyarrow as pa

from ..audit.recall import build_recall_audit, stored_true_pairs
from ..audit.probe import AUDIT_PAIRS, AUDIT_SAMPLED, AUDIT_THRESHOLD, audit_pairs_table, audit_probe, documents_pass
from ..audit.sample import AUDIT_SAMPLE_BODIES, SampleBodies, no_sample_bodies
from ..text.boilerplate import boilerplate_passages, shared_passages, template_clusters as template_clusters_of
from .engines import Engine, Log
from ..audit.evaluation import EVALUATION_SUMMARY, build_evaluation_table
from ..read.ingest import build_documents, build_rejected_documents, input_identity
from ..lsh.candidates import BucketPressure, build_band_memberships, hot_buckets_build
from ..text.passages import FOUND_PASSAGES, with_found_passages
from ..read import InputFile, InputStats
from ..settings.model import Settings
from ..storage.store import TableBuild, read_lineage, write_table
from ..util.streams import stop_on_signals
from ..storage.tables import DOCUMENT_ROWS, HOT_BUCKETS, INPUT_SKIPPED_FILES, INPUT_STAMPS, READ_IN_PLACE, Tables, beside

Lineage = Mapping | Callable[[], Mapping]
# (table name in the run's schema, its build, the step's own lineage) -> rows written
Write = Callable[[str, TableBuild, Lineage], int]


@dataclass(frozen=True)
class StepRun:
    settings: Settings
    tables: Tables
    engine_for: Callable[[], Engine]
    cursor: Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]
    write: Write
    log: Log

    @cached_property
    def engine(self) -> Engine:
        return self.engine_for()


def library_writer(connection: duckdb.DuckDBPyConnection, tables: Tables) -> Write:
    """``StepRun.write`` for a run outside Dagster: each table with the step's own lineage only."""

    def write(name: str, build: TableBuild, lineage: Lineage) -> int:
        return write_table(connection, beside(tables.documents, name), build, lineage or None)

    return write


@dataclass(frozen=True)
class Ingested:
    documents: int
    rejected: int
    stats: InputStats
    input_file: InputFile


def ingest(run: StepRun, path: Path) -> Ingested:
    """``documents`` and ``rejected_documents`` from one read of the input; its size and sha256,
    taken while it is read, in both tables' lineage (``read_in_place`` too, where the bodies stay
    in the input's Parquet files). The recall audit's sampled documents are kept with their
    bodies as they pass (``audit_sample_bodies``), for fingerprinting to take instead of reading
    every body again to find them."""
    settings = run.settings
    rows_table = beside(run.tables.documents, DOCUMENT_ROWS) if settings.bodies_read_in_place() else None
    stop = threading.Event()  # for the fetches of a targets file, in threads a signal never reaches
    sample = (
        SampleBodies(settings.audit_sample_size, settings.minhash_seed)
        if settings.audit_sample_size
        else None
    )
    # emptied first: a documents step that fails leaves no sample of an earlier input behind
    run.write(AUDIT_SAMPLE_BODIES, no_sample_bodies(), {})
    build, stats = build_documents(
        path, settings.batch_size, settings.input_policy(stop), run.log, rows_table, sample.offer if sample else None
    )
    with stop_on_signals(stop), input_identity(path, settings.source_format) as identity:

        def input_lineage() -> dict:
            # the input's identity is known once the stream is read; it is written with the rows
            found = identity.result()
            in_place = {READ_IN_PLACE: stats.read_in_place} if stats.read_in_place else {}
            skipped = {INPUT_SKIPPED_FILES: list(found.skipped)} if found.skipped else {}
            return {
                "input_sha256": found.sha256, "input_byte_size": found.byte_size, INPUT_STAMPS: [list(s) for s in found.stamps],
                **in_place, **skipped,
            }

        documents = run.write("documents", run.engine.documents(build), input_lineage)
        rejected = run.write("rejected_documents", build_rejected_documents(stats), input_lineage)
        if sample is not None:
            run.write(AUDIT_SAMPLE_BODIES, sample.build(), input_lineage)
    return Ingested(documents, rejected, stats, identity.result())


@dataclass(frozen=True)
class Fingerprinted:
    rows: int
    sampled: int  # the recall audit's sampled documents
    # rows of audit_true_pairs: one per sampled set and each text it finds (recall_audit counts
    # the document pairs they stand for)
    audit_rows: int


def fingerprint(run: StepRun, audit: bool = True) -> Fingerprinted:
    """``fingerprinted`` and, with ``audit``, the recall audit's true pairs (``audit_true_pairs``),
    found while the bodies stream past. With ``ignore_shared_above``, the passages that share of a
    sample has are found first, left out as ignored_passages are, and named in its lineage."""
    settings, found = run.settings, {}
    if settings.ignore_shared_above is not None:
        with run.cursor() as cursor:
            found = {FOUND_PASSAGES: shared_passages(cursor, run.tables, settings.shingling(), settings.ignore_shared_above)}
        run.log(
            f"fingerprinted: leaving out {len(found[FOUND_PASSAGES]):,} passage(s) whose shingles {settings.ignore_shared_above:g} "
            f"or more of the sampled documents have{': ' if found[FOUND_PASSAGES] else ''}"
            + "; ".join(passage[:80] for passage in found[FOUND_PASSAGES][:3])
        )
        settings = with_found_passages(settings, found)
    params = settings.sketch_params()
    with run.cursor() as reader:  # the build streams through it
        probe = (
            audit_probe(
                reader, run.tables.documents, params.shingling, settings.jaccard_threshold,
                settings.audit_sample_size, params.minhash_seed,
            )
            if audit
            else None
        )
        build = run.engine.fingerprinted(reader, run.tables, params, settings.batch_size, run.log, probe)
        rows = run.write("fingerprinted", build, found)
    if probe is None:
        return Fingerprinted(rows, 0, 0)
    return Fingerprinted(rows, len(probe.sample_ids), run.write(AUDIT_PAIRS, probe.build(), probe.lineage()))


def band_memberships(run: StepRun) -> int:
    return run.write("band_memberships", build_band_memberships(run.tables), {})


@dataclass(frozen=True)
class Candidates:
    rows: int
    pressure: BucketPressure
    hot: pa.Table  # the buckets left out of the join (hot_buckets: skip)


def candidates(run: StepRun) -> Candidates:
    """``candidate_pairs``, with the buckets' pressure in its lineage, and ``hot_buckets``."""
    with run.cursor() as cursor:
        build, pressure, hot = run.engine.candidate_pairs(cursor, run.tables, run.settings.pair_limits())
    rows = run.write("candidate_pairs", build, pressure.as_lineage())
    run.write(HOT_BUCKETS, hot_buckets_build(hot), {})
    return Candidates(rows, pressure, hot)


def score(run: StepRun) -> tuple[int, int]:
    """``scored_pairs``; its rows, and how many candidate documents were shingled again."""
    settings = run.settings
    with run.cursor() as cursor:
        build, reshingled = run.engine.scored_pairs(
            cursor, run.tables, settings.sketch_params(), settings.thresholds(), settings.memory_budget_mb, run.log
        )
    return run.write("scored_pairs", build, {}), reshingled


def duplicate_pairs(run: StepRun) -> int:
    return run.write("duplicate_pairs", run.engine.duplicate_pairs(run.tables), {})


def clusters(run: StepRun) -> int:
    with run.cursor() as cursor:
        build = run.engine.clusters(cursor, run.tables, run.settings.cluster_params(), run.log)
    return run.write("clusters", build, {})


def deduped_documents(run: StepRun) -> int:
    return run.write("deduped_documents", run.engine.deduped_documents(run.tables), {})


def recall_audit(run: StepRun) -> tuple[int, int]:
    """``recall_audit``: the true pairs ``fingerprint`` found, each marked found or missed; its
    rows and the sampled documents. After a rescore to a lower threshold than fingerprinting's,
    the pairs between were never looked for, so the probe reads the bodies on a pass of its own."""
    settings, tables = run.settings, run.tables
    threshold = settings.jaccard_threshold
    with run.cursor() as cursor:
        found_at = read_lineage(cursor, audit_pairs_table(tables))[AUDIT_THRESHOLD]
        if found_at <= threshold:
            found, sampled = stored_true_pairs(cursor, tables)
        else:
            run.log(
                f"recall_audit: fingerprinted found the audit's true pairs at jaccard_threshold={found_at}; "
                f"finding them at {threshold} on a pass of its own over the bodies"
            )
            params = settings.sketch_params()
            probe = audit_probe(
                cursor, tables.documents, params.shingling, threshold, settings.audit_sample_size, params.minhash_seed
            )
            probe = documents_pass(cursor, tables.documents, probe, settings.batch_size)
            found, sampled = probe.found(), len(probe.sample_ids)
        build = build_recall_audit(cursor, tables, threshold, found, copies=run.engine.first_copies(cursor, tables))
    return run.write("recall_audit", build, {AUDIT_SAMPLED: sampled}), sampled


def boilerplate(run: StepRun) -> int:
    """``boilerplate``: the passages a seeded sample of the documents shares (``text/boilerplate.py``)."""
    with run.cursor() as cursor:
        passages = boilerplate_passages(cursor, run.tables, run.settings.shingling())
    return run.write("boilerplate", TableBuild(sql="select * from passages", arrow_inputs={"passages": passages}), {})


def template_clusters(run: StepRun) -> int:
    """``template_clusters``: the largest clusters whose members share mostly boilerplate."""
    with run.cursor() as cursor:
        found = template_clusters_of(
            cursor, run.tables, run.tables.boilerplate, run.settings.shingling(), run.settings.jaccard_threshold
        )
    return run.write("template_clusters", TableBuild(sql="select * from found", arrow_inputs={"found": found}), {})


def evaluation(run: StepRun, labels: Path | None) -> tuple[int, dict]:
    """``evaluation`` against ``labels`` (None: nothing evaluated); its rows and summary."""
    with run.cursor() as cursor:
        build, summary = build_evaluation_table(
            cursor, run.tables, labels, run.settings.shingling(), run.settings.hash_scheme
        )
    return run.write("evaluation", build, {EVALUATION_SUMMARY: summary}), summary
