"""The run history's SQLite files, held open for the length of a ``dedup run``.

Dagster's default SQLite storage writes every event through a new connection that commits and
closes, and its files are in WAL mode. Closing the last connection to a WAL database checkpoints
it (two more syncs to disk) and deletes its ``-wal`` and ``-shm`` files, which the next event
makes again. One more connection, kept open without a transaction, makes no close the last one:
an event costs its commit's sync alone. What is stored, and what the UI reads, is the same; the
last close, at the end of the run, checkpoints as before.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path

from dagster import DagsterInstance

# the event log storage that keeps a database per run beside index.db, in base_dir
PER_RUN_FILES = "SqliteEventLogStorage"


def history_files(instance: DagsterInstance, run_id: str) -> list[Path]:
    """The SQLite files a run of ``run_id`` writes its events to, when the instance keeps them
    in DAGSTER_HOME's default layout; none otherwise (a database server, or no DAGSTER_HOME)."""
    if instance.is_ephemeral or type(instance.event_log_storage).__name__ != PER_RUN_FILES:
        return []
    runs = Path(instance.root_directory) / "history" / "runs"
    if not (runs / "index.db").is_file():
        return []
    # the run's own file does not exist yet: it is made here in WAL mode, as Dagster makes it
    return [path for path in (runs.with_suffix(".db"), runs / "index.db") if path.is_file()] + [runs / f"{run_id}.db"]


@contextmanager
def held_open(paths: list[Path]) -> Iterator[None]:
    """``paths`` held open while the run is inside; the last of them, the run's own file, made
    here in WAL mode. A file that cannot be held (locked, read-only) is left to Dagster: this
    saves syncs and never fails a run."""
    made = paths[-1:] if paths and not paths[-1].exists() else []
    try:
        with ExitStack() as stack:
            for path in paths:
                try:
                    connection = stack.enter_context(closing(sqlite3.connect(path, isolation_level=None)))
                    if path in made:
                        connection.execute("pragma journal_mode=wal")
                    elif connection.execute("pragma journal_mode").fetchone()[0] != "wal":
                        continue  # a file in another journal mode is left as it is
                    # a WAL file stays open while a connection holds its shared lock, taken on a read
                    connection.execute("select count(*) from sqlite_master").fetchone()
                except sqlite3.Error:
                    continue
            yield
    finally:
        # a run refused before it started (its config) leaves no empty file for Dagster to find
        for path in made:
            try:
                with closing(sqlite3.connect(path)) as connection:
                    unused = not connection.execute("select count(*) from sqlite_master").fetchone()[0]
            except sqlite3.Error:
                unused = False
            if unused:
                path.unlink(missing_ok=True)
