"""Each step of a one-shot run, defined once: what it reads, which engine call builds its tables,
and what it writes, with the lineage it adds. The assets (``assets/``) call these steps and
describe what they wrote; the library runner (``library.py``'s ``run_library``), the parameter sweep and
the engines' consistency check call them in the graph's order. So a step cannot differ between
the graph and the library: there is one wiring, and only the describing is the assets' own.

A step gets the :class:`Run` every caller builds (``run.py``); its ``write`` replaces one table
(named in the run's schema) with the lineage the caller keeps (the asset's upstream lineage and
settings; nothing more for the library) plus the step's own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from ..audit.recall import build_recall_audit, stored_true_pairs
from ..audit.probe import AUDIT_PAIRS, AUDIT_SAMPLED, AUDIT_THRESHOLD, audit_pairs_table, audit_probe, documents_pass
from ..audit.sample import AUDIT_SAMPLE_BODIES, SampleBodies, no_sample_bodies
from ..text.boilerplate import boilerplate_passages, shared_passages, template_clusters as template_clusters_of
from .run import Run
from ..audit.evaluation import EVALUATION_SUMMARY, build_evaluation_table
from ..read.ingest import build_documents, build_rejected_documents, input_identity
from ..lsh.candidates import BucketPressure, build_band_memberships, hot_buckets_build
from ..text.passages import FOUND_PASSAGES, with_found_passages
from ..read import InputFile, InputStats
from ..storage.store import TableBuild, read_lineage
from ..util.streams import stop_on_signals
from ..storage.tables import DOCUMENT_ROWS, HOT_BUCKETS, INPUT_SKIPPED_FILES, INPUT_STAMPS, READ_IN_PLACE, beside


@dataclass(frozen=True)
class Ingested:
    documents: int
    rejected: int
    stats: InputStats
    input_file: InputFile


@contextmanager
def reading(
    run: Run, path: Path, rows_table: str | None = None, offer: Callable | None = None
) -> Iterator[tuple[TableBuild, InputStats, Future]]:
    """The input read once, for the one-shot ingest and a batch's alike: its validated stream as
    the run's engine stores it, the stats its readers keep and its identity (size and sha256,
    taken while it is read), both complete once the stream has been written. ``rows_table`` and
    ``offer``: as :func:`build_documents` takes them."""
    settings = run.settings
    build, stats = build_documents(path, settings.batch_size, settings.input_policy(run.stop), run.log, rows_table, offer)
    with stop_on_signals(run.stop), input_identity(path, settings.source_format) as identity:
        yield run.engine.documents(build), stats, identity


def ingest(run: Run, path: Path) -> Ingested:
    """``documents`` and ``rejected_documents`` from one read of the input; its size and sha256,
    taken while it is read, in both tables' lineage (``read_in_place`` too, where the bodies stay
    in the input's Parquet files). The recall audit's sampled documents are kept with their
    bodies as they pass (``audit_sample_bodies``), for fingerprinting to take instead of reading
    every body again to find them."""
    settings = run.settings
    rows_table = beside(run.tables.documents, DOCUMENT_ROWS) if settings.bodies_read_in_place() else None
    sample = (
        SampleBodies(settings.audit_sample_size, settings.minhash_seed)
        if settings.audit_sample_size
        else None
    )
    # emptied first: a documents step that fails leaves no sample of an earlier input behind
    run.write(AUDIT_SAMPLE_BODIES, no_sample_bodies(), {})
    with reading(run, path, rows_table, sample.offer if sample else None) as (build, stats, identity):

        def input_lineage() -> dict:
            # the input's identity is known once the stream is read; it is written with the rows
            found = identity.result()
            in_place = {READ_IN_PLACE: stats.read_in_place} if stats.read_in_place else {}
            skipped = {INPUT_SKIPPED_FILES: list(found.skipped)} if found.skipped else {}
            return {
                "input_sha256": found.sha256, "input_byte_size": found.byte_size, INPUT_STAMPS: [list(s) for s in found.stamps],
                **in_place, **skipped,
            }

        documents = run.write("documents", build, input_lineage)
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


def fingerprint(run: Run, audit: bool = True) -> Fingerprinted:
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


def band_memberships(run: Run) -> int:
    return run.write("band_memberships", build_band_memberships(run.tables), {})


@dataclass(frozen=True)
class Candidates:
    rows: int
    pressure: BucketPressure
    hot: pa.Table  # the buckets left out of the join (hot_buckets: skip)


def candidates(run: Run) -> Candidates:
    """``candidate_pairs``, with the buckets' pressure in its lineage, and ``hot_buckets``."""
    with run.cursor() as cursor:
        build, pressure, hot = run.engine.candidate_pairs(cursor, run.tables, run.settings.pair_limits())
    rows = run.write("candidate_pairs", build, pressure.as_lineage())
    run.write(HOT_BUCKETS, hot_buckets_build(hot), {})
    return Candidates(rows, pressure, hot)


def score(run: Run) -> tuple[int, int]:
    """``scored_pairs``; its rows, and how many candidate documents were shingled again."""
    settings = run.settings
    with run.cursor() as cursor:
        build, reshingled = run.engine.scored_pairs(
            cursor, run.tables, settings.sketch_params(), settings.thresholds(), settings.memory_budget_mb, run.log
        )
    return run.write("scored_pairs", build, {}), reshingled


def duplicate_pairs(run: Run) -> int:
    return run.write("duplicate_pairs", run.engine.duplicate_pairs(run.tables), {})


def clusters(run: Run) -> int:
    with run.cursor() as cursor:
        build = run.engine.clusters(cursor, run.tables, run.settings.cluster_params(), run.log)
    return run.write("clusters", build, {})


def deduped_documents(run: Run) -> int:
    return run.write("deduped_documents", run.engine.deduped_documents(run.tables), {})


def recall_audit(run: Run) -> tuple[int, int]:
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


def boilerplate(run: Run) -> int:
    """``boilerplate``: the passages a seeded sample of the documents shares (``text/boilerplate.py``)."""
    with run.cursor() as cursor:
        passages = boilerplate_passages(cursor, run.tables, run.settings.shingling())
    return run.write("boilerplate", TableBuild(sql="select * from passages", arrow_inputs={"passages": passages}), {})


def template_clusters(run: Run) -> int:
    """``template_clusters``: the largest clusters whose members share mostly boilerplate."""
    with run.cursor() as cursor:
        found = template_clusters_of(
            cursor, run.tables, run.tables.boilerplate, run.settings.shingling(), run.settings.jaccard_threshold
        )
    return run.write("template_clusters", TableBuild(sql="select * from found", arrow_inputs={"found": found}), {})


def evaluation(run: Run, labels: Path | None) -> tuple[int, dict]:
    """``evaluation`` against ``labels`` (None: nothing evaluated); its rows and summary."""
    with run.cursor() as cursor:
        build, summary = build_evaluation_table(
            cursor, run.tables, labels, run.settings.shingling(), run.settings.hash_scheme
        )
    return run.write("evaluation", build, {EVALUATION_SUMMARY: summary}), summary
