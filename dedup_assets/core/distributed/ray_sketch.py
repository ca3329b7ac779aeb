"""The ray engine's ``documents`` and ``fingerprinted``: the input written as Parquet by position,
and the compiled sketch mapped over its batches on Daft (its Ray runner, on the run's Ray
session)."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from ..audit.probe import AuditProbe
from ..pipeline.step_params import SketchParams
from ..sketch import kernels
from ..sketch.fingerprints import fingerprint_batch, fingerprint_schema
from ..storage.store import TableBuild
from .daft_tables import CALL_CPUS, frame, mapped_batches, scratch_folder, write_positioned_frame
from .datasets import POSITION, write_batches
from .ray_tables import RayTables

# Parquet files of this many documents: enough read tasks to spread a corpus over a cluster,
# few enough that each one's start-up is small next to its work.
DOCUMENTS_PER_FILE = 65_536


def documents(tables: RayTables, batches) -> TableBuild:
    """``documents``: the validated input stream (the readers' batches), written in input order
    with each document's position."""
    write_batches(tables.root, "documents", batches, DOCUMENTS_PER_FILE)
    return tables.view("documents")


def documents_of_table(tables: RayTables, connection: duckdb.DuckDBPyConnection, table: str, batch_size: int) -> None:
    """``documents`` written again from a DuckDB table's rows, in its row order."""
    rows = connection.sql(f"select * from {table} order by rowid").to_arrow_reader(batch_size)
    write_batches(tables.root, "documents", rows, DOCUMENTS_PER_FILE, rows.schema)


def fingerprint(tables: RayTables, params: SketchParams, batch_size: int, probe: AuditProbe | None) -> TableBuild:
    """``fingerprinted``: the compiled sketch over every body, in input order: each of
    ``documents``' files (one row group, a run of positions, which Daft hands over whole) sketched
    ``batch_size`` documents at a time and written as a file of its own. The recall audit's
    ``probe``, if given, is fed on the same pass by the workers, each with a copy of it, and
    what they found is added to it here."""
    with scratch_folder(tables.root, "audit") as found:
        if probe is not None:
            found.mkdir()

        def sketch(batch: pa.Table) -> pa.Table:
            kernels.use_threads(CALL_CPUS)
            doc_ids, bodies = batch["doc_id"].combine_chunks(), batch["body"].combine_chunks()
            own = None if probe is None else probe.emptied()
            parts = [
                fingerprint_batch(doc_ids.slice(start, batch_size), bodies.slice(start, batch_size), params, own)
                for start in range(0, batch.num_rows, batch_size)
            ]
            if own is not None and batch.num_rows:  # named by the batch: a retried task writes the same file
                pq.write_table(own.take_found(), found / f"{batch[POSITION][0].as_py():012d}.parquet")
            return pa.Table.from_batches(parts, fingerprint_schema(params)).append_column(POSITION, batch[POSITION])

        documents = frame(tables.root, "documents", ["doc_id", "body", POSITION])
        schema = fingerprint_schema(params).append(pa.field(POSITION, pa.int64()))
        sketched = mapped_batches(documents, sketch, schema, cpus=CALL_CPUS)
        write_positioned_frame(tables.root, "fingerprinted", sketched, schema)
        if probe is not None:
            for path in sorted(found.glob("*.parquet")):
                probe.add_found(pq.read_table(path))
    return tables.view("fingerprinted", signature=f"ubigint[{params.num_perm}]", lsh_bands=f"ubigint[{params.bands}]")
