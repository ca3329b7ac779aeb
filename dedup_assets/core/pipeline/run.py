"""The one run every step gets: a one-shot run's step (``steps.py``), a batch added to the
incremental index (``incremental/batch_steps.py``), the library runner and the sweep (``library.py``),
the Dagster assets (``assets/asset_common.py``, ``assets/batch_graph.py``), and through
``run_library`` the benchmark, all build a :class:`Run`, so a step never asks which called it.

A run has its settings, its tables (a one-shot run's :class:`Tables`, or the index's tables for a
batch), its engine (made on first use: the ray engine starts Ray, which a step that needs no
engine must not), a way to open a cursor, ``write``, the progress log, the stop signal its
readers' threads watch, and for a batch its key.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import duckdb

from ..storage.store import TableBuild, write_table
from ..storage.tables import Tables, in_schema_of
from ..settings.model import Settings
from .engines import Engine, Log

Lineage = Mapping | Callable[[], Mapping]
# (a table: a name in the run's schema, or schema-qualified; its build; the step's own lineage)
# -> rows written
Write = Callable[[str, TableBuild, Lineage], int]


@dataclass(frozen=True)
class Run:
    settings: Settings
    tables: Any  # Tables, or for a batch the index's IndexTables
    engine_for: Callable[[], Engine]
    cursor: Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]
    write: Write
    log: Log
    # set on SIGINT/SIGTERM while the input is read: the fetches of a targets file run in
    # threads a signal never reaches
    stop: threading.Event = field(default_factory=threading.Event)
    batch: str | None = None  # the key of the batch being added, for a batch of the index

    @cached_property
    def engine(self) -> Engine:
        return self.engine_for()


def library_writer(connection: duckdb.DuckDBPyConnection, tables: Tables) -> Write:
    """``Run.write`` for a run outside Dagster: each table with the step's own lineage only."""

    def write(name: str, build: TableBuild, lineage: Lineage) -> int:
        return write_table(connection, in_schema_of(tables.documents, name), build, lineage or None)

    return write
