"""The ray engine's large release files, written by the cluster's workers (issue 51): the
Dagster node then only writes the small files and the manifest, from the rows and sha256 the
workers give back.

The files are the rows of a small dataframe, one per file and each a partition of its own, so
that they can go to different workers. A call of Daft's batch function (declaring
``CALL_CPUS``, as every call of ours does, so that it runs in Daft's per-node worker, which
holds the node's CPUs: a plain Ray task wanting a CPU could wait for ever beside it) opens an
in-memory DuckDB on its node, creates the views its query reads with their own ``create view``
statements from the Dagster node's DuckDB catalog (views over the engine's Parquet folders,
which every node sees, and views over those), with the settings that shape the rows Arrow
gets, and writes the file with the release's own function (``release/outputs.py``). The views
read the same files in the same order, and the same rows give the same bytes
(``release/parquet_files.py``), so the file is the one the Dagster node would have written.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path

import daft
import duckdb
import pyarrow as pa

from ..release.engine_files import SHARED_OUTPUT, remove_output
from ..release.outputs import write_output
from ..release.parquet_files import PART_WRITERS
from ..storage.tables import sql_string
from ..util.errors import DedupError
from .daft_tables import CALL_CPUS, mapped_batches

# the settings of the Dagster node's DuckDB that decide which rows, in which order and of which
# Arrow types a query gives (those this DuckDB has), set alike on the workers
ROW_SETTINGS = (
    "preserve_insertion_order", "TimeZone", "Calendar", "default_order", "default_null_order", "binary_as_string",
    "arrow_large_buffer_size", "arrow_lossless_conversion", "arrow_output_list_view", "arrow_output_version",
)
# A worker's DuckDB threads: the call's CPU scans the Parquet files, and a folder of parts is
# encoded by PART_WRITERS threads of pyarrow's beside it, which wait for rows unless the scan
# keeps up with them. Taken to be idle: the manifest is the run's last step on the cluster.
WORKER_THREADS = CALL_CPUS + PART_WRITERS
WRITTEN = pa.schema([("name", pa.string()), ("outputs", pa.string()), ("problem", pa.string())])


class WorkerCannotWrite(DedupError, RuntimeError):
    """A node of the cluster cannot write the large release files where the Dagster node reads them."""


def check_release_folder(folder: Path, node: str, versions: dict[str, str]) -> None:
    """Refuse to write where this node does not see the staging folder the Dagster node made, or
    with other versions of the libraries that give the files' bytes than ``versions``, the
    Dagster node's (the manifest names those)."""
    if not folder.is_dir():
        raise WorkerCannotWrite(
            f"{folder}: node {node} of the Ray cluster does not see this folder, the release's staging folder, "
            f"which the Dagster node made. {SHARED_OUTPUT}"
        )
    if _versions() != versions:
        raise WorkerCannotWrite(
            f"node {node} of the Ray cluster has {_versions()} where the Dagster node has {versions}: the files "
            "it would write could differ from the Dagster node's. Install the same versions on every node."
        )


def _versions() -> dict[str, str]:
    return {"duckdb": duckdb.__version__, "pyarrow": pa.__version__}


def parquet_views(connection: duckdb.DuckDBPyConnection, queries: dict[str, str]) -> list[tuple[str, str]]:
    """The schema and ``create view`` statement, from ``connection``'s catalog, of each view
    that ``queries`` read and each view those read, every one before the views that read it:
    all of them views over Parquet files (the engine's folders) or over such views (as
    ``deduped_documents``, the DuckDB engine's join of ``documents`` and ``clusters``)."""
    catalog = {}
    for schema, name, statement in connection.execute(
        "select schema_name, view_name, sql from duckdb_views() where not internal and database_name = current_database()"
    ).fetchall():
        catalog[f"{schema}.{name}"] = (schema, statement)
    ordered: list[tuple[str, str]] = []

    def add(read: str, schema: str) -> None:
        name = read.split(" AS ")[0]  # a name as get_table_names gives it, with its alias
        key = name if "." in name else f"{schema}.{name}" if f"{schema}.{name}" in catalog else f"main.{name}"
        if key not in catalog:
            raise RuntimeError(f"the release's large files read {name}: not a view over the engine's Parquet folders")
        view = catalog[key]
        if view not in ordered:
            for inner in _names_read(view[1]):
                add(inner, view[0])
            ordered.append(view)

    for query in queries.values():
        for read in duckdb.get_table_names(query, qualified=True):
            add(read, "main")
    return ordered


def _names_read(statement: str) -> set[str]:
    """The tables and views a ``create view`` statement of DuckDB's catalog reads (its query's:
    the statement itself binds its names, which get_table_names then wants to exist)."""
    prefix, _, query = statement.partition(" AS ")
    if not prefix.upper().startswith("CREATE VIEW ") or not query:
        raise RuntimeError(f"not a view's statement as DuckDB's catalog gives it: {statement[:200]}")
    return duckdb.get_table_names(query.rstrip().removesuffix(";"), qualified=True)


def row_settings(connection: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """``ROW_SETTINGS`` as ``connection`` has them."""
    names = ", ".join(sql_string(name) for name in ROW_SETTINGS)
    return dict(connection.execute(f"select name, value from duckdb_settings() where name in ({names})").fetchall())


def write_on_worker(
    views: list[tuple[str, str]], settings: dict[str, str], versions: dict[str, str], output_dir: Path, name: str,
    query: str, compression: str,
) -> list[dict]:
    """Release file ``name`` from ``query`` into ``output_dir``, on this node: its outputs (as
    ``write_output``'s). A retried call writes its file again, whole."""
    node = f"{socket.gethostname()} (pid {os.getpid()})"
    check_release_folder(output_dir, node, versions)
    path = output_dir / name
    try:
        remove_output(path)
        with duckdb.connect(config={"threads": WORKER_THREADS}) as connection:
            for setting, value in settings.items():
                connection.execute(f"set {setting} = {sql_string(value)}")
            for schema, statement in views:
                if schema != "main":
                    connection.execute(f'create schema if not exists "{schema}"')
                connection.execute(statement)
            return write_output(connection.cursor(), query, output_dir, name, {}, None, compression)
    except OSError as error:  # a folder it sees but may not write in (another user's, read-only)
        raise WorkerCannotWrite(f"node {node} of the Ray cluster could not write {name} into {output_dir}: {error}.") from error


def release_write(
    connection: duckdb.DuckDBPyConnection,
    queries: dict[str, str],
    output_dir: Path,
    compression: str,
    log: Callable[[str], None],
) -> Callable[[], dict[str, list[dict]]]:
    """The call that writes each file of ``queries`` (name -> query) into ``output_dir`` on the
    cluster's workers and gives the outputs of those written by name, having said in ``log`` why
    a worker did not write the others. What the workers need of the Dagster node's DuckDB is read
    now, on this thread."""
    views, settings, versions = parquet_views(connection, queries), row_settings(connection), _versions()
    output_dir = Path(os.path.abspath(output_dir))  # the worker's own folder is another

    def write(files: pa.Table) -> pa.Table:
        rows = []
        for name, query in zip(files["name"].to_pylist(), files["query"].to_pylist()):
            try:
                outputs = write_on_worker(views, settings, versions, output_dir, name, query, compression)
                rows.append((name, json.dumps(outputs), None))
            except WorkerCannotWrite as error:  # said as it is, not as Daft's failure: the Dagster node writes it
                rows.append((name, None, str(error)))
        return pa.table(list(zip(*rows)) or [[], [], []], schema=WRITTEN)

    def written() -> dict[str, list[dict]]:
        names = list(queries)
        files = daft.from_pydict({"name": names, "query": [queries[name] for name in names]}).into_partitions(len(names))
        result = mapped_batches(files, write, WRITTEN, cpus=CALL_CPUS, batch_size=1).to_pydict()
        done = {}
        for name, outputs, problem in zip(result["name"], result["outputs"], result["problem"]):
            if problem:
                log(f"manifest: {problem} Writing {name} on this node instead.")
            else:
                done[name] = json.loads(outputs)
        return done

    return written
