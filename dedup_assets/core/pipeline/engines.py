"""The engines a one-shot run's steps execute on, behind one protocol.

``duckdb`` runs the library's steps on the run's DuckDB connection. ``ray`` runs the same steps
on a Ray cluster (Daft's Ray runner) over Parquet folders (``distributed/engine.py``) and hands
each table to DuckDB as a view. An asset asks its engine for its step by the step's name and never asks which
engine it has; how the engines differ is in their capabilities (``capabilities.py``). Which engine
a run has is asked once, in :func:`for_settings`. A new engine is a class with these methods, a
row there and an opener here.
"""

from __future__ import annotations

import importlib.util

from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Protocol

import duckdb
import pyarrow as pa

from ..audit.probe import AuditProbe
from ..cluster.components import build_clusters, build_deduped_documents
from ..distributed.plan import ClusterOptions
from ..util.errors import DedupError, listed
from ..lsh.candidates import BucketPressure, build_candidate_pairs
from .step_params import ClusterParams, PairLimits, SketchParams, Thresholds
from ..settings.model import Settings
from ..sketch.fingerprints import build_fingerprinted
from ..storage.store import TableBuild
from ..storage.tables import SCHEMA, Tables
from ..verify.pairs import build_duplicate_pairs, build_scored_pairs

Log = Callable[[str], None]
# the release files an engine writes where it runs, and their outputs by name (Engine.release_files)
ClusterWrite = Callable[[], dict[str, list[dict]]]


class Engine(Protocol):
    """The steps of the one-shot graph that depend on where the work runs; each returns what the
    asset writes (a ``TableBuild``) and what it describes."""

    def documents(self, build: TableBuild) -> TableBuild:
        """The validated input stream (the readers' ``build``) as the engine stores it."""

    def fingerprinted(
        self,
        connection: duckdb.DuckDBPyConnection,
        tables: Tables,
        params: SketchParams,
        batch_size: int,
        log: Log,
        probe: AuditProbe,
    ) -> TableBuild:
        """The fingerprints; ``probe`` (the recall audit's) has found its true pairs once the
        build is written: fed on the fingerprinting pass where the engine can."""

    def candidate_pairs(
        self, connection: duckdb.DuckDBPyConnection, tables: Tables, limits: PairLimits
    ) -> tuple[TableBuild, BucketPressure, pa.Table]:
        """The candidate pairs, the buckets' pressure and the hot buckets left out."""

    def scored_pairs(
        self,
        connection: duckdb.DuckDBPyConnection,
        tables: Tables,
        params: SketchParams,
        thresholds: Thresholds,
        memory_budget_mb: int,
        log: Log,
    ) -> tuple[TableBuild, int]:
        """The scored pairs and how many candidate documents were shingled again; progress to
        ``log`` where the engine can tell it."""

    def duplicate_pairs(self, tables: Tables) -> TableBuild: ...

    def clusters(
        self, connection: duckdb.DuckDBPyConnection, tables: Tables, params: ClusterParams, log: Log
    ) -> TableBuild: ...

    def deduped_documents(self, tables: Tables) -> TableBuild: ...

    def first_copies(self, connection: duckdb.DuckDBPyConnection, tables: Tables) -> pa.Table | None:
        """Each exact copy and its first copy where the engine keeps them; None: read them from
        the DuckDB tables."""

    def release_files(
        self, connection: duckdb.DuckDBPyConnection, queries: dict[str, str], output_dir: Path, compression: str,
        log: Log,
    ) -> ClusterWrite | None:
        """Where the release's large files (file name -> the query that fills it) are written:
        None, on this node with the others (``release/files.py``); else the call, made in a thread
        of the release's writers while they write the others, that writes each one it can into
        ``output_dir`` where the engine runs, and gives its outputs (file, rows and sha256; a
        folder's part by part), by name, having said in ``log`` why it did not write the others
        (this node writes them, ``release/engine_files.py``)."""


class DuckDBEngine:
    """The library's steps on the run's DuckDB connection."""

    def documents(self, build: TableBuild) -> TableBuild:
        return build

    def fingerprinted(self, connection, tables, params, batch_size, log, probe):
        return build_fingerprinted(connection, tables, params, batch_size, log, probe)

    def candidate_pairs(self, connection, tables, limits):
        return build_candidate_pairs(connection, tables, limits)

    def scored_pairs(self, connection, tables, params, thresholds, memory_budget_mb, log):
        return build_scored_pairs(connection, tables, params, thresholds, memory_budget_mb, log)

    def duplicate_pairs(self, tables):
        return build_duplicate_pairs(tables)

    def clusters(self, connection, tables, params, log):
        return build_clusters(connection, tables, params, log)

    def deduped_documents(self, tables):
        return build_deduped_documents(tables)

    def first_copies(self, connection, tables):
        return None

    def release_files(self, connection, queries, output_dir, compression, log):
        return None


class EngineUnavailable(DedupError, RuntimeError):
    """The settings' engine cannot be opened here (its extra is not installed)."""


Opener = Callable[[str, ClusterOptions, ExitStack, str], Engine]


def _duckdb(database: str, cluster: ClusterOptions, session: ExitStack, schema: str) -> Engine:
    return DuckDBEngine()


# the ray extra's packages (pyproject.toml), as imported
RAY_EXTRA = ("ray", "daft")


def _ray(database: str, cluster: ClusterOptions, session: ExitStack, schema: str) -> Engine:
    try:  # here, so that the default install, which has no Ray, never imports it
        from ..distributed.engine import open_ray_engine
    except ImportError as error:
        # every package of the extra that is missing, not only the first one imported
        missing = [name for name in RAY_EXTRA if importlib.util.find_spec(name) is None] or [error.name or "part of it"]
        raise EngineUnavailable(
            f"engine ray needs the ray extra (Ray and Daft), and {listed(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed ({error}). Install the ray extra "
            "(make setup-ray in the project folder, or pip install -e '.[ray]' there), or set engine: duckdb."
        ) from None
    return open_ray_engine(database, cluster, session, schema)


# by the names of capabilities.py (test_engines.py holds them equal)
OPENERS: dict[str, Opener] = {"duckdb": _duckdb, "ray": _ray}


def for_settings(
    settings: Settings,
    database: str,
    session: ExitStack,
    cluster: ClusterOptions = ClusterOptions(),
    schema: str = SCHEMA,
) -> Engine:
    """The engine ``settings.engine`` names, for a run on the DuckDB file ``database`` whose
    tables are in ``schema``: the one place that asks which engine runs. What it starts (a Ray
    session) stays open on ``session`` until the run closes it. An engine that keeps files of its
    own keeps each schema's apart, so that a batch of the incremental index never replaces the
    one-shot run's. A run asks again at each step, so that an engine can size a step's work to
    the tables written before it."""
    return OPENERS[settings.engine](database, cluster, session, schema)
