"""The only writes to the index: adding a staged batch in one transaction (replacing it when it is
the latest one already), and taking a batch and every later one out again, latest first, undoing
the cluster renames each made. The index's tables are created here, from the staging tables'
columns, when the first batch is added. Kept in one place so that every change to the index is a
single transaction beside the one that undoes it."""

from __future__ import annotations

import json

import duckdb

from . import payloads
from ..storage.store import transaction
from ..storage.tables import sql
from .batch_staging import refuse_stale_staging
from .index_tables import (
    INDEX_SETTINGS,
    IndexedBatch,
    IndexTables,
    indexed_batches,
    payload_folder,
    quoted_name,
)

# index table -> the staged table its first version takes its columns from, and what each row gains
_FROM_STAGED = {
    "fingerprints": (
        "staged_fingerprints",
        (
            "0::bigint as position, ''::varchar as batch_key, doc_id, token_count, shingle_count, content_hash, "
            "lsh_bands[1] as first_band_key"
        ),
    ),
    "pairs": ("staged_pairs", "''::varchar as batch_key, *"),
    "clusters": ("staged_clusters", "''::varchar as batch_key, *"),
    "members": ("staged_members", "*"),
    "moves": ("staged_moves", "''::varchar as batch_key, doc_id, previous_cluster_id"),
    "bridges": ("staged_bridges", "''::varchar as batch_key, *"),
    "rejected": ("staged_rejected", "''::varchar as batch_key, *"),
    # the bodies are in the payload files only
    "documents": ("staged_documents", "* exclude (body)"),
}


def _create_index(connection: duckdb.DuckDBPyConnection, tables: IndexTables) -> None:
    connection.execute(
        f"""
        create table if not exists {tables.batches} (
          batch_key varchar primary key, seq integer, first_position bigint, documents bigint,
          rejected bigint, input_path varchar, input_sha256 varchar, input_byte_size bigint,
          columns varchar, settings varchar, payload_file varchar
        )
        """
    )
    connection.execute(
        f"create table if not exists {tables.band_index} (band_index smallint, lsh_band ubigint, position bigint)"
    )
    for name, (staged, columns) in _FROM_STAGED.items():
        connection.execute(
            f"create table if not exists {getattr(tables, name)} as select {columns} from {getattr(tables, staged)} limit 0"
        )
    # a batch may bring columns the earlier ones did not have (WARC lineage, extra CSV columns)
    have = {row[0].lower() for row in connection.execute(f"describe {tables.documents}").fetchall()}
    for column, kind, *_ in connection.execute(f"describe {tables.staged_documents}").fetchall():
        if column.lower() not in have | {"body"}:
            connection.execute(f"alter table {tables.documents} add column {quoted_name(column)} {kind}")


def _remove(connection: duckdb.DuckDBPyConnection, tables: IndexTables, batch: IndexedBatch) -> None:
    """Take one batch, the latest in the index, out of it: its rows, and the cluster renames it made."""
    key, start = batch.key, batch.first_position
    connection.execute(
        f"""
        update {tables.members} set cluster_id = mv.previous_cluster_id
        from {tables.moves} mv where mv.batch_key = ? and {tables.members}.doc_id = mv.doc_id
        """,
        [key],
    )
    connection.execute(f"delete from {tables.members} where position >= ?", [start])
    connection.execute(f"delete from {tables.band_index} where position >= ?", [start])
    connection.execute(
        f"delete from {tables.documents} where doc_id in (select doc_id from {tables.fingerprints} where batch_key = ?)",
        [key],
    )
    for name in ("fingerprints", "pairs", "clusters", "moves", "bridges", "rejected", "batches"):
        connection.execute(f"delete from {getattr(tables, name)} where batch_key = ?", [key])


def add_batch(connection: duckdb.DuckDBPyConnection, tables: IndexTables, key: str) -> None:
    """Add the staged batch to the index in one transaction, replacing it if it is there (it is
    then the latest: anything else is refused)."""
    lineage = refuse_stale_staging(connection, tables, key)
    indexed = indexed_batches(connection, tables)
    start = lineage["first_position"]
    # the payload is written first under a name of its own input, and the index names the file
    # it uses: a failed commit leaves the index and the file it names as they were
    folder = payload_folder(connection)
    payload_file = payloads.write_payload(
        folder,
        key,
        lineage["input_sha256"],
        connection.sql(
            f"""
            select f.doc_id, d.domain, d.body, f.signature, f.lsh_bands
            from {tables.staged_fingerprints} f join {tables.staged_documents} d on d.doc_id = f.doc_id
            order by f.rowid
            """
        ).to_arrow_table(),
    )
    with transaction(connection, f"batch {key} into the index"):
        _create_index(connection, tables)
        for batch in indexed:
            if batch.key == key:
                _remove(connection, tables, batch)
        columns = [row[0] for row in connection.execute(f"describe {tables.staged_documents}").fetchall()]
        documents, rejected = (
            connection.execute(f"select count(*) from {table}").fetchall()[0][0]
            for table in (tables.staged_documents, tables.staged_rejected)
        )
        seq = 1 + sum(1 for batch in indexed if batch.key < key)
        connection.execute(
            f"insert into {tables.batches} values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                key, seq, start, documents, rejected, lineage["input_path"], lineage["input_sha256"],
                lineage["input_byte_size"], json.dumps(columns),
                json.dumps({name: lineage[name] for name in INDEX_SETTINGS}, sort_keys=True),
                payload_file,
            ],
        )
        connection.execute(
            f"insert into {tables.documents} by name select * exclude (body) from {tables.staged_documents}"
        )
        connection.execute(
            f"""
            insert into {tables.fingerprints}
            select ? + rowid, ?, doc_id, token_count, shingle_count, content_hash, lsh_bands[1]
            from {tables.staged_fingerprints}
            """,
            [start, key],
        )
        connection.execute(sql("band_index_rows", tables), [start])
        for name in ("pairs", "clusters", "bridges", "rejected"):
            connection.execute(
                f"insert into {getattr(tables, name)} select ?, * from {getattr(tables, 'staged_' + name)}", [key]
            )
        connection.execute(
            f"""
            update {tables.members} set cluster_id = mv.cluster_id
            from {tables.staged_moves} mv where {tables.members}.doc_id = mv.doc_id
            """
        )
        connection.execute(
            f"insert into {tables.moves} select ?, doc_id, previous_cluster_id from {tables.staged_moves}", [key]
        )
        connection.execute(f"insert into {tables.members} select * from {tables.staged_members}")
    payloads.remove_other_versions(folder, key, keep=payload_file)


def forget_batches(connection: duckdb.DuckDBPyConnection, tables: IndexTables, first_key: str) -> list[str]:
    """Remove ``first_key`` and every later batch from the index, latest first, in one
    transaction; the keys removed."""
    removed = [batch for batch in indexed_batches(connection, tables) if batch.key >= first_key]
    with transaction(connection, "the incremental index"):
        for batch in reversed(removed):
            _remove(connection, tables, batch)
    payloads.remove_payloads(payload_folder(connection), [batch.key for batch in removed])
    return [batch.key for batch in removed]
