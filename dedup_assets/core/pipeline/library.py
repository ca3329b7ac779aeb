"""The whole pipeline in one call, without Dagster: for scripts and the benchmark.

It runs the steps the assets run (``steps.py``), in the graph's order, with the same
:class:`Settings`, on the engine they name (``engines.for_settings``) and one DuckDB file (schema
``dedup``), and times each step. Its release files are byte-identical to the asset graph's
(``manifest.json`` aside from paths).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import duckdb

from . import engines, steps
from ..read.batches import BatchFolder
from ..distributed.plan import ClusterOptions
from .engines import DuckDBEngine, Engine
from .run import Run, library_writer
from ..incremental.batch_steps import (
    add_to_index, stage_clusters, stage_documents, stage_fingerprints, stage_pairs,
)
from ..incremental.index_reports import batch_release_queries
from ..incremental.index_tables import IndexTables
from ..lsh.candidates import BucketPressure
from ..release.publish import publish_batch_release, publish_release
from ..reference.matching import match_references
from ..settings.lineage import value_sources
from ..settings.choices import DEFAULT_DUCKDB_MEMORY
from ..settings.model import Settings
from ..text.passages import with_found_passages
from ..storage.store import open_database, read_lineage
from ..release.summary import run_counts
from ..storage.tables import SCHEMA, Tables


@contextmanager
def _timed(stages: dict[str, float], name: str) -> Iterator[None]:
    started = time.perf_counter()
    yield
    stages[name] = stages.get(name, 0.0) + time.perf_counter() - started


@dataclass(frozen=True)
class CoreCounts:
    """What the core steps came to: the buckets the join was admitted with, and the rows of
    candidate_pairs and duplicate_pairs."""

    pressure: BucketPressure
    candidates: int
    edges: int


def run_core_steps(
    connection: duckdb.DuckDBPyConnection,
    tables: Tables,
    settings: Settings,
    log: Callable[[str], None],
    stage: Callable[[str], AbstractContextManager] = lambda name: nullcontext(),
    audit: bool = True,
    engine_for: Callable[[], Engine] = DuckDBEngine,
) -> CoreCounts:
    """From the documents table to duplicate_pairs: fingerprints and bands (and, with ``audit``,
    the recall audit's true pairs, found on the same pass), candidates, exact verification; each
    step inside ``stage(name)`` (fingerprint, candidates, verify), on an engine from
    ``engine_for`` (the DuckDB engine unless told: the sweep and the engines' comparison run it)."""
    run = _step_runs(connection, tables, settings, log, engine_for)
    with stage("fingerprint"):
        steps.fingerprint(run(), audit)
        run = _step_runs(connection, tables, found_settings(connection, tables, settings), log, engine_for)
        steps.band_memberships(run())
    with stage("candidates"):
        found = steps.candidates(run())
    with stage("verify"):
        steps.score(run())
        edges = steps.duplicate_pairs(run())
    return CoreCounts(found.pressure, found.rows, edges)


def found_settings(connection: duckdb.DuckDBPyConnection, tables: Tables, settings: Settings) -> Settings:
    """The settings the steps after fingerprinting run with: the passages it found to leave out
    (``ignore_shared_above``) are ignored_passages too."""
    return with_found_passages(settings, read_lineage(connection, tables.fingerprinted))


def _step_runs(
    connection: duckdb.DuckDBPyConnection,
    tables: Tables,
    settings: Settings,
    log: Callable[[str], None],
    engine_for: Callable[[], Engine],
) -> Callable[[], Run]:
    """Each step's run, whose engine is asked for on the step's first use of it, as an asset's is."""
    write = library_writer(connection, tables)
    return lambda: Run(settings, tables, engine_for, connection.cursor, write, log)


def run_library(
    input_path: str,
    database_path: str,
    output_dir: str | None,
    settings: Settings = Settings(),
    *,
    duckdb_memory: str = DEFAULT_DUCKDB_MEMORY,
    log: Callable[[str], None] = lambda message: None,
    labels_path: str | None = None,
    cluster: ClusterOptions = ClusterOptions(),
) -> dict:
    """Run every step into ``database_path`` and, with ``output_dir``, write the release files.
    ``labels_path`` names labels to evaluate the clusters against; ``cluster``, where an engine
    on a cluster runs (as the ``engine`` resource's fields). Returns per-step seconds and the main
    counts."""
    tables = Tables.in_schema(SCHEMA)
    stages: dict[str, float] = {}

    def stage(name: str):
        return _timed(stages, name)

    with open_database(database_path, duckdb_memory, SCHEMA) as connection, ExitStack() as session:

        def engine() -> Engine:
            return engines.for_settings(settings, database_path, session, cluster)

        run = _step_runs(connection, tables, settings, log, engine)
        with stage("documents"):
            ingested = steps.ingest(run(), Path(input_path))
        pressure = run_core_steps(connection, tables, settings, log, stage, engine_for=engine).pressure
        # the release records the settings as given, and what fingerprinting found beside them
        run = _step_runs(connection, tables, found_settings(connection, tables, settings), log, engine)
        with stage("reference"):
            match_references(run(), database_path, duckdb_memory)
        with stage("cluster"):
            steps.clusters(run())
            steps.deduped_documents(run())
        with stage("audit"):
            steps.recall_audit(run())
        with stage("boilerplate"):
            steps.boilerplate(run())
            steps.template_clusters(run())
        with stage("evaluation"):
            steps.evaluation(run(), Path(labels_path) if labels_path else None)
        if output_dir is None:
            counts = run_counts(connection, tables, pressure)
        else:
            with stage("release"):
                paths = {"input_path": input_path, "output_dir": output_dir, "labels_path": labels_path}
                sources = value_sources({**settings.as_dict(), **paths}, {**Settings().as_dict(), **dict.fromkeys(paths)})
                written = publish_release(
                    connection, tables, Path(output_dir), settings, ingested.input_file, pressure,
                    database=database_path, log=log, settings_sources=sources, engine=engine(),
                )
            counts = written["counts"]
    return {
        "stages": stages,
        "documents": counts["document_rows"],
        "candidates": counts["candidate_pair_rows"],
        "duplicates": counts["duplicate_pair_rows"],
        "counts": counts,
    }


def run_batch(
    folder: BatchFolder,
    key: str,
    database_path: str,
    output_dir: str | None,
    settings: Settings = Settings(),
    *,
    duckdb_memory: str = DEFAULT_DUCKDB_MEMORY,
    log: Callable[[str], None] = lambda message: None,
) -> dict:
    """Add batch ``key`` of ``folder`` to the incremental index in ``database_path`` (schema
    ``incremental``), with the same steps as the ``incremental`` assets, and with ``output_dir``
    write its release to ``output_dir/batches/NAME`` (:func:`key_path_name`). Returns per-step
    seconds and the batch's counts."""
    tables = IndexTables.in_schema()
    stages: dict[str, float] = {}
    with open_database(database_path, duckdb_memory, tables.schema) as connection, ExitStack() as session:

        def engine() -> Engine:
            return engines.for_settings(settings, database_path, session, schema=tables.schema)

        run = Run(settings, tables, engine, connection.cursor, library_writer(connection, tables), log, batch=key)
        with _timed(stages, "documents"):
            lineage = stage_documents(run, folder.batch(key).path, folder.earlier(key)).lineage
        with _timed(stages, "fingerprint"):
            stage_fingerprints(run, lineage)
        with _timed(stages, "pairs"):
            stage_pairs(run, lineage)
        with _timed(stages, "cluster"):
            stage_clusters(run, lineage)
        with _timed(stages, "add"):
            manifest = add_to_index(run, connection)
        if output_dir is not None:
            with _timed(stages, "release"):
                manifest = publish_batch_release(
                    connection, Path(output_dir), key, batch_release_queries(connection, tables, key),
                    manifest, database=database_path, log=log, compression=settings.release_compression,
                    keep=settings.releases_kept,
                )
    return {"stages": stages, "counts": manifest["counts"], "totals": manifest["totals"]}
