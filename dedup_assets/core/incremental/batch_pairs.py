"""A batch's scored pairs: the one-shot candidate and scoring queries run on the batch's
*universe*, its own documents and the earlier ones (``sql/universe_earlier.sql``) with their
signatures and bodies from the payload files, and the pairs with a document of the batch are kept.
It is the one step that reuses the one-shot pipeline's SQL, so it is apart from the clustering that
follows."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

from . import payloads
from ..lsh.candidates import BucketPressure, build_band_memberships, build_candidate_pairs
from ..pipeline.step_params import PairLimits, SketchParams, Thresholds
from ..storage.store import TableBuild, table_exists, write_table
from ..storage.tables import sql
from ..verify.pairs import build_scored_pairs
from .index_tables import PAIR_COLUMNS, IndexTables, indexed_batches, payload_folder


@dataclass(frozen=True)
class BatchPairs:
    build: TableBuild
    pressure: BucketPressure
    universe_documents: int
    reshingled: int


def build_batch_pairs(
    connection: duckdb.DuckDBPyConnection,
    tables: IndexTables,
    start: int,
    params: SketchParams,
    thresholds: Thresholds,
    limits: PairLimits,
    memory_budget_mb: int,
) -> BatchPairs:
    """The scored pairs of the batch's documents: with each other and with every earlier
    document. Writes the universe's tables (``universe_*``: fingerprints, documents, candidate
    and scored pairs) on the way, so each can be looked at."""
    universe = tables.universe()
    new = connection.sql(
        f"""
        select $1 + f.rowid as position, true as is_new, f.doc_id, f.token_count, f.shingle_count,
               f.content_hash, f.signature, f.lsh_bands, d.domain, d.body
        from {tables.staged_fingerprints} f join {tables.staged_documents} d on d.doc_id = f.doc_id
        order by position
        """,
        params=[start],
    ).to_arrow_table()
    rows = pa.concat_tables([_earlier_rows(connection, tables, start, new.schema), new])
    write_table(
        connection,
        universe.fingerprinted,
        TableBuild(sql="select * exclude (domain, body) from universe_rows", arrow_inputs={"universe_rows": rows}),
    )
    write_table(
        connection,
        universe.documents,
        TableBuild(sql="select doc_id, domain, body from universe_rows", arrow_inputs={"universe_rows": rows}),
    )
    write_table(connection, universe.band_memberships, build_band_memberships(universe))
    candidates, pressure, _ = build_candidate_pairs(connection, universe, limits)  # none hot: index_settings
    write_table(connection, universe.candidate_pairs, candidates)
    scored, reshingled = build_scored_pairs(connection, universe, params, thresholds, memory_budget_mb)
    write_table(connection, universe.scored_pairs, scored)
    build = TableBuild(
        sql=f"""
        with new as (select doc_id from {universe.fingerprinted} where is_new)
        select {PAIR_COLUMNS}
        from {universe.scored_pairs}
        where left_doc_id in (select doc_id from new) or right_doc_id in (select doc_id from new)
        order by left_doc_id, right_doc_id
        """
    )
    return BatchPairs(build, pressure, rows.num_rows, reshingled)


def _earlier_rows(
    connection: duckdb.DuckDBPyConnection, tables: IndexTables, start: int, schema: pa.Schema
) -> pa.Table:
    """The universe's earlier documents (``sql/universe_earlier.sql``) with their signatures,
    band keys, domains and bodies from the payload files."""
    if not table_exists(connection, tables.fingerprints):
        return schema.empty_table()
    earlier = connection.sql(sql("universe_earlier", tables), params=[start]).to_arrow_table()
    if not earlier.num_rows:
        return schema.empty_table()
    spans = [
        payloads.Span(batch.key, batch.first_position, batch.documents, batch.payload_file)
        for batch in indexed_batches(connection, tables)
        if batch.first_position < start
    ]
    payload = payloads.take(
        payload_folder(connection), spans, earlier.column("position").to_numpy(), earlier.column("doc_id")
    )
    columns = {name: earlier.column(name) for name in earlier.column_names}
    columns["is_new"] = pa.array(np.zeros(earlier.num_rows, dtype=bool))
    columns.update({name: payload.column(name) for name in ("signature", "lsh_bands", "domain", "body")})
    return pa.table({field.name: columns[field.name] for field in schema}).cast(schema)
