"""The ray engine's tables as Daft dataframes (its steps run on Daft's Ray runner): read from and
written to the Parquet folders of ``datasets.py``, which DuckDB's views read; and our Arrow
functions mapped over a dataframe's batches or groups."""

from __future__ import annotations

import re
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import daft
import pyarrow as pa
from daft import DataType, col
from daft.functions import to_struct

from ..sketch.kernels import threads_may_share_kernels
from .datasets import POSITION, folder_rows, replace_table, table_folder, write_positioned
from .session import cluster_cpus

# The CPUs a call of our functions (the sketch, the ranking) declares to Daft, and its kernels'
# threads. Daft's per-node worker (one Ray actor) runs as many calls at once as the node has CPUs
# over this, each in a thread of its own, and Ray assigns the actor no CPUs to read back: without
# a count of their own, numba's kernels would start a thread per core of the machine in every
# call (two one-CPU nodes on one machine: each node's calls on every core).
CALL_CPUS = 1
# one call at a time in a Daft worker whose kernels' threads cannot be shared: Daft runs a node's
# calls as threads of one actor, and numba's workqueue layer ends the process when two threads
# launch parallel kernels at once (fingerprints.py's stream_workers, for the DuckDB engine)
_KERNEL_CALLS = threading.Lock()


@contextmanager
def _kernel_turn() -> Iterator[None]:
    if threads_may_share_kernels():
        yield
    else:
        with _KERNEL_CALLS:
            yield


def frame(root: Path, table: str, columns: list[str] | None = None) -> daft.DataFrame:
    """``table`` of the folder ``root`` as a Daft dataframe."""
    # Daft reads every path as a glob: each mark in the folder's name alone in brackets matches itself
    folder = re.sub(r"([][*?{}\\])", r"[\1]", str(table_folder(root, table)))
    read = daft.read_parquet(f"{folder}/*.parquet")
    return read.select(*columns) if columns else read


def write_frames(root: Path, table: str, frames: list[daft.DataFrame], schema: pa.Schema) -> None:
    """Write Daft dataframes, one after the other, as ``table`` with ``schema``'s columns and
    types (strings as Daft's large strings, which DuckDB reads alike). Daft names and
    orders its files as it likes: for tables whose view sorts (the pair tables) or whose order
    no one reads (first_copies)."""

    def write(folder: Path) -> None:
        for written in frames:
            typed = written.select(*[daft.col(field.name).cast(daft.DataType.from_arrow_type(field.type)) for field in schema])
            typed.write_parquet(str(folder), write_mode="append")

    replace_table(root, table, write, schema)


@contextmanager
def scratch_folder(root: Path, name: str) -> Iterator[Path]:
    """The folder of a step's staged results, hidden among the tables of ``root`` (``.name``):
    emptied first, of what a killed run left, and removed at the end, whatever happens."""
    folder = Path(root) / f".{name}"
    shutil.rmtree(folder, ignore_errors=True)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def pair_ends(pairs: daft.DataFrame) -> daft.DataFrame:
    """Both documents of every pair (``left_doc_id``, ``right_doc_id``), a row each, as ``doc_id``."""
    return pairs.select(col("left_doc_id").alias("doc_id")).concat(pairs.select(col("right_doc_id").alias("doc_id")))


def staged(root: Path, table: str, rows: daft.DataFrame) -> daft.DataFrame:
    """``rows`` written as ``table`` of the folder ``root`` by the workers, and read back: for a
    result read more than once. Not ``collect``: a join of Daft 0.7.26's Ray runner with a
    collected join's result on one side took 14 s where the same rows read from files took 1 s
    (1M documents' 51,567 copies against their texts, two one-CPU nodes)."""
    write_frames(root, table, [rows], rows.schema().to_pyarrow_schema())
    return frame(root, table)


# the most keys a semi-join broadcasts to every task of the table it reads (about 200 MB of ids
# of 46 characters, as WARC record ids)
BROADCAST_KEYS = 4_000_000


def rows_among(table: daft.DataFrame, keys: daft.DataFrame, on: str, key_rows: int) -> daft.DataFrame:
    """``table``'s rows whose ``on`` is among ``keys``' (``key_rows`` of them): the keys, when
    few, broadcast to the table's files, so its rows are read where they lie and only those
    wanted move; with more, Daft chooses the join (its own choice at 100,000 documents was a
    hash join that moved every body)."""
    return table.join(keys, on=on, how="semi", strategy="broadcast" if key_rows <= BROADCAST_KEYS else None)


def join_partitions() -> int:
    """Two a CPU of the cluster: what ``hash_joined`` hashes a join's sides into, for every join
    of the candidates, verification and clusters on ray (its docstring has the figures)."""
    return 2 * cluster_cpus()


def hash_joined(
    left: daft.DataFrame, right: daft.DataFrame, on: str | list[str], partitions: int, how: str = "inner"
) -> daft.DataFrame:
    """``left`` joined with ``right`` ``on`` their keys, both sides hashed into ``partitions``.
    Left to itself, Daft's hash join takes as many partitions as the side read in more: one per
    Parquet file (42 for each table of a 1M run), and on two one-CPU nodes each partition's tasks
    cost more than its rows. Verification's joins of 169,000 pairs with their signatures took
    11.5 s in 42 partitions, 12.8 s in 16, 4.4 s in 4; with their bodies 19.0, 15.3 and 7.9 s.
    Every table staged from a join comes in as many files as it had partitions, and the next
    query reads them so: at 1M, ``candidate_pairs`` took 39.7–42.2 s with every join in 4
    against 64.9–94.4 s, ``clusters`` 25.8–30.0 s against 98.5–151.5 s (docs/scale-out.md)."""
    keys = [col(key) for key in ([on] if isinstance(on, str) else on)]
    return left.repartition(partitions, *keys).join(right.repartition(partitions, *keys), on=on, how=how)


def _arrow_udf(fn: Callable[[pa.Table], pa.Table], schema: pa.Schema, unnest: bool, **options):
    """``fn`` as Daft's batch function of one struct column of rows, giving a struct of
    ``schema``'s columns (or the columns, ``unnest``); ``options`` are ``daft.func.batch``'s
    (``batch_size``, ``cpus``)."""

    @daft.func.batch(return_dtype=DataType.from_arrow_type(pa.struct(list(schema))), unnest=unnest, **options)
    def mapped(columns: daft.Series):
        with _kernel_turn():
            result = fn(pa.Table.from_struct_array(columns.to_arrow())).select(schema.names).cast(schema)
        return result.to_struct_array().combine_chunks()

    return mapped


def _rows(frame: daft.DataFrame) -> daft.Expression:
    return to_struct(*[col(name) for name in frame.column_names])


def mapped_batches(rows: daft.DataFrame, fn: Callable[[pa.Table], pa.Table], schema: pa.Schema, **options) -> daft.DataFrame:
    """``fn`` over ``rows``' batches as Arrow tables, giving ``schema``'s columns; ``options``
    as ``_arrow_udf``'s."""
    return rows.select(_arrow_udf(fn, schema, unnest=True, **options)(_rows(rows)))


def mapped_groups(
    rows: daft.DataFrame, key: str, fn: Callable[[pa.Table], pa.Table], schema: pa.Schema, partitions: int
) -> daft.DataFrame:
    """``fn`` over each group of ``rows`` by ``key`` as an Arrow table, one call per group with
    all its rows, giving ``schema``'s columns, the groups hashed to ``partitions`` tasks (left to
    itself, Daft's grouping keeps its input's partition count, which the clusters step's memory
    plan cannot know)."""
    # map_groups takes one column: the struct, unnested after
    rows = rows.repartition(partitions, col(key))
    grouped = rows.groupby(key).map_groups(_arrow_udf(fn, schema, unnest=False, cpus=CALL_CPUS)(_rows(rows)).alias("mapped"))
    return grouped.select(col("mapped").unnest())


def write_positioned_frame(root: Path, table: str, rows: daft.DataFrame, schema: pa.Schema) -> None:
    """Write a per-document table (``schema`` has ``POSITION``) as ``table``: each batch of
    ``rows`` one file, sorted by position, named by its first position and saying so
    (``write_positioned``), by the worker that holds it. Where the batches are runs of positions
    (mapped from ``documents``' files) the view reads the files as they lie, without sorting."""

    def write(folder: Path) -> None:
        @daft.func.batch(return_dtype=DataType.int64())
        def written(columns: daft.Series) -> pa.Array:
            block = pa.Table.from_struct_array(columns.to_arrow()).select(schema.names).cast(schema)
            count = write_positioned(folder, block)
            return pa.array([count] + [0] * (block.num_rows - 1), pa.int64()) if block.num_rows else pa.array([], pa.int64())

        result = rows.select(written(_rows(rows.select(*schema.names))).alias("rows")).sum("rows")
        rows_written = result.to_pydict()["rows"][0] or 0
        # a file written over by another batch, or left by a retried task that split its rows
        # otherwise, would change the table's rows without an error
        if rows_written != folder_rows(folder):
            raise RuntimeError(
                f"{table}: {rows_written:,} rows were written but {folder} holds {folder_rows(folder):,}: "
                "another run may be writing the same tables; run the step again with no other run on them"
            )

    if POSITION not in schema.names:
        raise ValueError(f"{table}: a per-document table has the column {POSITION}")
    replace_table(root, table, write, schema)
