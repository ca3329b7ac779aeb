"""The ray engine's tables: each a folder of Parquet files (``datasets.py``) read and written as
Ray datasets (as Daft dataframes by ``daft_tables.py``), handed to DuckDB as a view in the DuckDB
engine's row order; and the helpers every Ray Data step maps its batches with."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray
import ray.data
from ray.data import SaveMode

from ..storage.store import TableBuild
from .datasets import (
    POSITION,
    folder_rows,
    replace_table,
    table_folder,
    view_build,
    write_positioned,
)

PAIR_SCHEMA = pa.schema(
    [
        ("left_doc_id", pa.string()),
        ("right_doc_id", pa.string()),
        ("left_domain", pa.string()),
        ("right_domain", pa.string()),
        ("shared_bands", pa.int32()),
        ("found_by", pa.string()),
    ]
)
SCORED_SCHEMA = PAIR_SCHEMA.append(pa.field("jaccard", pa.float64())).append(
    pa.field("signature_overlap", pa.float64())
).append(pa.field("is_exact", pa.bool_())).append(pa.field("is_duplicate", pa.bool_())).append(
    pa.field("reason", pa.string())
)
# the tables ordered by pair, and by input position
PAIR_TABLES = ("candidate_pairs", "scored_pairs", "duplicate_pairs")
POSITION_TABLES = ("documents", "fingerprinted", "clusters", "deduped_documents")
FIRST_COPIES_SCHEMA = pa.schema([("doc_id", pa.string()), ("first_copy_doc_id", pa.string())])
CLUSTER_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("source_file", pa.string()),
        ("input_row", pa.int64()),
        ("cluster_id", pa.string()),
        ("cluster_size", pa.int64()),
        ("crawled_at", pa.timestamp("us")),
        ("token_count", pa.int32()),
        ("representative_rank", pa.int64()),
        ("representative_doc_id", pa.string()),
        ("decision", pa.string()),
        ("jaccard_to_representative", pa.float64()),
        ("chained", pa.bool_()),
        ("keep_reason", pa.string()),
        (POSITION, pa.int64()),
    ]
)


@dataclass(frozen=True)
class RayTables:
    """The folder of every table the ray engine writes, and how many partitions a shuffle
    uses."""

    root: Path
    partitions: int

    def read(self, table: str, columns: list[str] | None = None) -> ray.data.Dataset:
        """``table`` as a dataset, each file one block. Ray Data otherwise splits a read of fewer
        files than its target parallelism into more blocks per task, and such a task pauses,
        holding its CPU, while two of its blocks wait to be taken: on nodes of one CPU the read
        tasks held every CPU while the join or map that would take their blocks waited for one
        (scored_pairs at 50,000 documents, docs/scale-out.md)."""
        folder = table_folder(self.root, table)
        files = len(list(folder.glob("*.parquet")))
        return ray.data.read_parquet(str(folder), columns=columns, override_num_blocks=files)

    def write(self, table: str, dataset: ray.data.Dataset, schema: pa.Schema) -> None:
        """Write ``dataset`` as ``table`` with exactly ``schema`` (joins widen strings to large
        strings; every file gets the same types). A per-document table is written one block per
        file, sorted and named by position (``write_positioned``): where its blocks are runs of
        positions, as when mapped from ``documents``' blocks, its view reads it without sorting."""

        def typed(batch: pa.Table) -> pa.Table:
            return batch.select(schema.names).cast(schema)

        def write(folder: Path) -> None:
            if POSITION in schema.names:

                def one_file(block: pa.Table) -> pa.Table:
                    return pa.table({"rows": [write_positioned(folder, typed(block))]})

                written = arrow_map(dataset, one_file, batch_size=None).sum("rows") or 0
                # a file written over by another block, or left by an attempt that split its
                # blocks otherwise, would change the table's rows without an error
                if written != folder_rows(folder):
                    raise RuntimeError(
                        f"{table}: {written:,} rows were written but {folder} holds {folder_rows(folder):,}: "
                        "another run may be writing the same tables; run the step again with no other run on them"
                    )
            else:
                arrow_map(dataset, typed).write_parquet(str(folder), mode=SaveMode.OVERWRITE)

        replace_table(self.root, table, write, schema)

    def view(self, table: str, **casts: str) -> TableBuild:
        """The table's DuckDB view, in the DuckDB engine's row order."""
        order = ("left_doc_id", "right_doc_id") if table in PAIR_TABLES else (POSITION,) if table in POSITION_TABLES else ()
        return view_build(self.root, table, order, casts)


def arrow_map(dataset: ray.data.Dataset, fn: Callable[[pa.Table], pa.Table], **options) -> ray.data.Dataset:
    return dataset.map_batches(fn, batch_format="pyarrow", zero_copy_batch=True, **options)


def kept(dataset: ray.data.Dataset, condition: Callable[[pa.Table], pa.Array]) -> ray.data.Dataset:
    """The rows where ``condition`` holds, for a dataset a join takes. Not ``Dataset.filter``: a
    block it empties has no columns, and a join's reduce task that gets only such blocks from
    one side fails ("unable to find column left_doc_id": 50 documents, 2 measured pairs)."""
    return arrow_map(dataset, lambda batch: batch.filter(condition(batch)))


def use_task_cpus() -> None:
    """Kernel threads to the CPUs Ray gave this task, not every core of the node."""
    from ..sketch.kernels import use_threads

    use_threads(ray.get_runtime_context().get_assigned_resources().get("CPU", 1))


def column_or_nulls(batch: pa.Table, name: str, kind: pa.DataType) -> pa.ChunkedArray | pa.Array:
    """A column an outer join brought, or nulls: Ray Data drops the columns of an empty side
    (an aggregation of no rows has no schema)."""
    return batch[name] if name in batch.column_names else pa.nulls(batch.num_rows, kind)


def renamed(dataset: ray.data.Dataset, names: dict[str, str]) -> ray.data.Dataset:
    return dataset.rename_columns(names)


@ray.remote
def _position_span(block: pa.Table) -> tuple[int, int, pa.Schema] | None:
    """The smallest and largest position of a block, and its schema; None when it is empty."""
    if not block.num_rows:
        return None
    bounds = pc.min_max(block[POSITION])
    return bounds["min"].as_py(), bounds["max"].as_py(), block.schema


TAKEN_BYTES = 64 * 2**20  # about the bytes of one block a take yields


class AtPositions:
    """Rows keyed by document position (``POSITION`` and any other columns), to be given columns
    of the per-document tables in place: an inner join on position in which only these narrow
    rows are shuffled (sorted once), never the table's wide rows (bodies, signatures). Each block
    of the table fetches the sorted key blocks its positions span, one at a time: every key it
    can match, since a key matches only inside that span. Blocks written in input order
    (documents, and mostly the tables mapped from it) span a run of positions, so each fetches
    about its own share. What it yields comes in blocks of about ``TAKEN_BYTES``: a column is
    repeated for every key at its position, and 800 pages of 25 KB in one LSH group gave 269,884
    pairs, about 7 GB of bodies for one documents file."""

    def __init__(self, keys: ray.data.Dataset):
        # materialized first: Ray Data sorts into as many ranges as it expects input blocks, and
        # it expects a map's (one per documents file), not the blocks a take yields; one range of
        # 7 GB was one reduce task that made no progress in 300 s (the run stalled)
        ordered = keys.materialize().sort(POSITION).materialize()
        refs = ordered.to_arrow_refs()
        spans = ray.get([_position_span.remote(ref) for ref in refs])
        # the refs live as long as this object and the closures that take() hands to Ray Data
        self._spans = [(ref, span[0], span[1]) for ref, span in zip(refs, spans) if span is not None]
        # sorted blocks may differ in string widths: each is cast to one schema
        schemas = [span[2] for span in spans if span is not None]
        self._schema = pa.unify_schemas(schemas, promote_options="permissive") if schemas else ordered.schema().base_schema

    def take(
        self, tables: RayTables, table: str, columns: list[str], then: Callable[[pa.Table], pa.Table] = lambda part: part
    ) -> ray.data.Dataset:
        """Each key row with ``columns`` of ``table``'s row at its position (keys with no such
        row are left out), given to ``then`` in parts, whose results are the dataset. What comes
        next belongs in ``then``: a map after this one is fused into its task, and the blocks
        between fused maps are gathered whole (one 7.5 GB block of 45,000 pairs' bodies)."""
        spans, schema = self._spans, self._schema

        def join(batch: pa.Table) -> Iterator[pa.Table]:
            bounds = pc.min_max(batch[POSITION])
            low, high = bounds["min"].as_py(), bounds["max"].as_py()
            wanted = [ref for ref, first, last in spans if batch.num_rows and first <= high and last >= low]
            taken = batch.select(columns)
            taken_bytes = row_bytes(taken)
            empty = True
            for ref in wanted:
                keys = ray.get(ref).cast(schema)
                rows = pc.index_in(keys[POSITION], value_set=batch[POSITION])
                found = pc.is_valid(rows)
                keys, rows = keys.filter(found), rows.filter(found)
                sizes = np.cumsum(row_bytes(keys) + taken_bytes[rows.to_numpy(zero_copy_only=False)])
                # cut where the rows' own bytes pass each multiple of TAKEN_BYTES (at least one row a part)
                cuts = np.unique(np.searchsorted(sizes, np.arange(TAKEN_BYTES, sizes[-1], TAKEN_BYTES), "right")) if len(sizes) else []
                for start, end in zip([0, *cuts], [*cuts, len(rows)]):
                    if end > start:
                        yield then(_with_columns(keys.slice(start, end - start), taken.take(rows.slice(start, end - start))))
                        empty = False
            if empty:  # the block's columns, for a join that reads them
                yield then(_with_columns(schema.empty_table(), taken.slice(0, 0)))

        # whole blocks: one fetch of the keys per block, not per batch of rows
        return arrow_map(tables.read(table, [*columns, POSITION]), join, batch_size=None)


def row_bytes(table: pa.Table) -> np.ndarray:
    """Each row's bytes: a string or binary value's own length, other columns' average width."""
    sizes = np.zeros(table.num_rows, dtype=np.int64)
    for column in table.columns:
        kind = column.type
        if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
            sizes += pc.fill_null(pc.binary_length(column), 0).to_numpy(zero_copy_only=False).astype(np.int64)
        else:
            sizes += column.nbytes // max(table.num_rows, 1)
    return sizes


def _with_columns(keys: pa.Table, picked: pa.Table) -> pa.Table:
    for name in picked.column_names:
        keys = keys.append_column(name, picked[name])
    return keys


def ordered_pairs(left: pa.ChunkedArray, right: pa.ChunkedArray) -> tuple[pa.Array, pa.Array]:
    swap = pc.greater(left, right)
    return pc.if_else(swap, right, left), pc.if_else(swap, left, right)
