"""A batch's staging, before it is added: the lineage every staging table of the batch records
(its input, the index's settings, its first position and the state of the index it was staged
against), the screening of doc_ids an earlier batch holds already, and the check before adding
that the staging tables are of one run against the index as it is now. Staging reads the index but
never writes it, which is why it is apart from adding a batch (``index_changes.py``)."""

from __future__ import annotations

import hashlib
import json

import duckdb

from ..read import InputError, InputStats
from ..storage.store import read_lineage, table_exists, transaction, write_lineage
from .batch_order import (
    BatchOrderError,
    batch_command,
    refuse_other_settings,
    refuse_out_of_order,
)
from .index_tables import IndexedBatch, IndexTables, indexed_batches

# the lineage of staged documents not yet screened against the index: no batch's yet
UNSCREENED = {"batch_key": None}
# the staging tables of one batch, written by its steps in this order
STAGED = (
    "staged_documents", "staged_rejected", "staged_fingerprints", "staged_pairs", "staged_clusters",
    "staged_members", "staged_moves", "staged_bridges",
)


def batch_start(indexed: list[IndexedBatch], key: str) -> int:
    """The position of the batch's first document: how many documents the batches before it hold."""
    return sum(batch.documents for batch in indexed if batch.key < key)


def index_state(indexed: list[IndexedBatch], key: str) -> str:
    """A digest of the batches before ``key`` as they are in the index: a batch staged against
    one state of the index is added only to that state."""
    earlier = [(b.key, b.first_position, b.documents, b.input_sha256) for b in indexed if b.key < key]
    return hashlib.sha256(json.dumps(earlier).encode()).hexdigest()


def staged_lineage(indexed: list[IndexedBatch], key: str, settings: dict, input_file) -> dict:
    """What every staging table of batch ``key`` records: the batch, the index's settings, the
    input's identity, and the index state it was staged against."""
    return {
        "batch_key": key,
        **settings,
        "input_path": input_file.path,
        "input_sha256": input_file.sha256,
        "input_byte_size": input_file.byte_size,
        "first_position": batch_start(indexed, key),
        "index_state": index_state(indexed, key),
    }


def screen_indexed_doc_ids(
    connection: duckdb.DuckDBPyConnection,
    tables: IndexTables,
    lineage: dict,
    stats: InputStats,
    fail_on_reject: bool = False,
) -> int:
    """Move the staged documents whose doc_id an earlier batch holds to ``stats.rejected``
    (``duplicate_doc_id``, as a one-shot run over all batches would: the first one is kept), and
    record ``lineage`` for the staged documents in the same transaction: until then they are no
    batch's. How many there were; with ``fail_on_reject`` the first one fails the batch instead."""
    with transaction(connection, tables.staged_documents):
        repeated = _repeated_doc_ids(connection, tables, lineage["first_position"])
        for source_file, input_row, doc_id, batch, first_file, first_row in repeated:
            detail = f"doc_id first seen in batch {batch} ({first_file} row {first_row})"
            if fail_on_reject:
                raise InputError(
                    f"{source_file}: row {input_row}: column doc_id repeats '{doc_id}' ({detail}). Give "
                    "each document a unique doc_id."
                )
            stats.reject_document(source_file, input_row, doc_id, "duplicate_doc_id", detail)
        if repeated:
            connection.execute(
                f"""
                delete from {tables.staged_documents}
                where doc_id in (select doc_id from {tables.fingerprints} where position < ?)
                """,
                [lineage["first_position"]],
            )
        write_lineage(connection, tables.staged_documents, lineage)
    return len(repeated)


def _repeated_doc_ids(connection: duckdb.DuckDBPyConnection, tables: IndexTables, start: int) -> list[tuple]:
    if not table_exists(connection, tables.fingerprints):
        return []
    return connection.execute(
        f"""
        select s.source_file, s.input_row, s.doc_id, f.batch_key, d.source_file, d.input_row
        from {tables.staged_documents} s
        join {tables.fingerprints} f on f.doc_id = s.doc_id and f.position < ?
        join {tables.documents} d on d.doc_id = f.doc_id
        order by s.source_file, s.input_row
        """,
        [start],
    ).fetchall()


def refuse_stale_staging(connection: duckdb.DuckDBPyConnection, tables: IndexTables, key: str) -> dict:
    """The staged batch's lineage, once every staging table is of batch ``key``, of one staging
    (the same input and settings) and of the index as it is now; else a :class:`BatchOrderError`
    saying to stage the batch again."""
    indexed = indexed_batches(connection, tables)
    lineages = {name: read_lineage(connection, getattr(tables, name)) for name in STAGED}
    lineage = lineages["staged_documents"]
    again = f"Stage batch {key} again from its first step: {batch_command(key)}"
    if lineage.get("batch_key") != key:
        raise BatchOrderError(f"The staging tables do not hold batch {key}. {again}")
    mixed = [name for name, other in lineages.items() if other != lineage]
    if mixed:
        raise BatchOrderError(
            f"The staging tables of batch {key} come from different runs ({', '.join(mixed)} differ from "
            f"staged_documents: another input file or other settings). {again}"
        )
    refuse_out_of_order(indexed, [], key)
    if lineage["index_state"] != index_state(indexed, key):
        raise BatchOrderError(
            f"The batches before {key} in the index changed since batch {key} was staged (taken out "
            f"or added again), so its pairs were found against another index. {again}"
        )
    refuse_other_settings(indexed, lineage, key)
    return lineage
