"""Reference corpora: inputs that new documents are deduplicated against, never removed or
rewritten (a corpus already trained on, last month's release). Each is an input in any supported
format, fingerprinted once into an index (``index.py``), or such an index.

A new document is matched when its exact Jaccard with a reference document is at or above the
threshold: the candidates are the pairs of a new and a reference text that share a band key, as
in the one-shot join, under the same limits (a bucket of more than ``max_bucket_size`` texts is
refused, or left out with ``hot_buckets: skip``; the pairs stay within ``max_pair_slots``). The
best-scoring reference document (the smallest doc_id on a tie; the first reference's where
several match) is its match. Only direct matches count: a copy of a matched document that is not
itself close enough to a reference document stays with the new data, where the clusters may keep
it. Matched documents are removed in ``clusters`` (``decision`` ``matched_reference``) and take no
part in its components; ``reference_matches`` names each one's reference document and score.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..pipeline.run import Run
from ..read.ingest import document_bodies
from ..verify.jaccard import pair_jaccard
from .index import ReferenceError, ReferenceIndex, reference_indexes
from ..settings.model import Settings
from ..storage.store import TableBuild
from ..storage.tables import REFERENCES, SCHEMA, Tables, sql_over, sql_string
from ..verify.pairs import ensure_memory

MATCH_COLUMNS = {
    "doc_id": pa.string(), "reference": pa.string(), "reference_doc_id": pa.string(),
    "reference_source_file": pa.string(), "reference_input_row": pa.int64(), "jaccard": pa.float64(),
}


def _no_matches() -> pa.Table:
    return pa.table({name: pa.array([], kind) for name, kind in MATCH_COLUMNS.items()})


def no_reference_matches() -> TableBuild:
    """An empty ``reference_matches``: for a clusters build outside the graph, of a run without
    references."""
    return TableBuild(sql="select * from matches", arrow_inputs={"matches": _no_matches()})


# the run's temporary tables while it matches one reference
_NEW_KEYS, _REFERENCE_KEYS, _BUCKETS = "dedup_new_text_keys", "dedup_reference_text_keys", "dedup_shared_buckets"


def _candidates(connection: duckdb.DuckDBPyConnection, tables: Tables, index: ReferenceIndex, reference: Tables, settings: Settings) -> pa.Table:
    """The candidate pairs of new and reference texts (``sql/reference_candidates.sql``), once
    the buckets they share pass the one-shot join's limits."""
    limits = settings.pair_limits()
    for name, side in ((_NEW_KEYS, tables), (_REFERENCE_KEYS, reference)):
        connection.execute(f"create or replace temp table {name} as " + sql_over("reference_keys", fingerprinted=side.fingerprinted))
    connection.execute(
        f"""
        create or replace temp table {_BUCKETS} as
        select band, band_key, n.texts + r.texts as texts, n.texts * r.texts as pair_slots
        from (select band, band_key, count(*) as texts from {_NEW_KEYS} group by all) n
        join (select band, band_key, count(*) as texts from {_REFERENCE_KEYS} group by all) r using (band, band_key)
        """
    )
    try:
        hot, largest, slots = connection.execute(
            f"select count(*) filter (where texts > $1), coalesce(max(texts), 0), "
            f"coalesce(sum(pair_slots) filter (where texts <= $1), 0) from {_BUCKETS}",
            [limits.max_bucket_size],
        ).fetchall()[0]
        if hot and not limits.skip_hot_buckets:
            raise ReferenceError(
                f"reference {index.name}: {hot:,} LSH buckets hold the input's and the reference's texts together, "
                f"more than max_bucket_size={limits.max_bucket_size:,} (the largest {largest:,}): near-duplicate "
                "boilerplate, usually. List the shared passage in ignored_passages (boilerplate.csv names it), set "
                "hot_buckets: skip to leave such buckets out, or raise max_bucket_size"
            )
        if slots > limits.max_pair_slots:
            raise ReferenceError(
                f"reference {index.name}: the buckets the input shares with it would make {slots:,} candidate pairs, "
                f"more than max_pair_slots={limits.max_pair_slots:,}. Make LSH stricter (more rows_per_band), or raise "
                "memory_budget_mb (or max_pair_slots) if the machine has the memory"
            )
        query = sql_over("reference_candidates", new_keys=_NEW_KEYS, reference_keys=_REFERENCE_KEYS, buckets=_BUCKETS)
        return connection.sql(query, params=[limits.max_bucket_size if limits.skip_hot_buckets else None]).to_arrow_table()
    finally:
        for name in (_NEW_KEYS, _REFERENCE_KEYS, _BUCKETS):
            connection.execute(f"drop table if exists {name}")


def _index_matches(
    connection: duckdb.DuckDBPyConnection, tables: Tables, index: ReferenceIndex, settings: Settings, alias: str
) -> pa.Table:
    """Each new document whose best reference document in ``index`` (attached as ``alias``) has
    an exact Jaccard with it at or above the threshold, with that document and the score."""
    reference = Tables.in_schema(f"{alias}.{SCHEMA}")
    texts = _candidates(connection, tables, index, reference, settings)
    if not texts.num_rows:
        return _no_matches()
    new_ids, old_ids = texts.column("doc_id").unique(), texts.column("reference_doc_id").unique()
    # the shingle sets, from the counts fingerprinting took, then each side's bodies as they come
    shingles = sum(
        connection.execute(
            f"select coalesce(sum(shingle_count), 0) from {side.fingerprinted} where doc_id in (select unnest(?))",
            [ids.to_pylist()],
        ).fetchall()[0][0]
        for side, ids in ((tables, new_ids), (reference, old_ids))
    )
    what = f"Matching the input against reference {index.name}"
    # each body read and shingled once, however many pairs it is in: the new ones, then the old
    new = document_bodies(connection, tables.documents, new_ids)
    ensure_memory(16 * int(shingles) + new.nbytes, settings.memory_budget_mb, what)
    old = document_bodies(connection, reference.documents, old_ids)
    ensure_memory(16 * int(shingles) + new.nbytes + old.nbytes, settings.memory_budget_mb, what)
    bodies = pa.chunked_array([*new.column("body").cast(pa.large_string()).chunks, *old.column("body").cast(pa.large_string()).chunks])
    left = pc.index_in(texts.column("doc_id"), new.column("doc_id")).to_numpy()
    right = new.num_rows + pc.index_in(texts.column("reference_doc_id"), old.column("doc_id")).to_numpy()
    scores = pair_jaccard(bodies, left.astype(np.int64), right.astype(np.int64), settings.shingling(), settings.hash_scheme)
    # one text on both sides scores 1, as a copy group does in the one-shot run (a body without
    # tokens has no shingles to score)
    scores = np.where(texts.column("same_text").to_numpy(zero_copy_only=False), 1.0, scores)
    connection.register("scored_texts", texts.append_column("jaccard", pa.array(scores)))
    try:
        return connection.sql(
            sql_over("reference_matches", fingerprinted=tables.fingerprinted, reference=reference.documents),
            params=[index.name, settings.jaccard_threshold],
        ).to_arrow_table()
    finally:
        connection.unregister("scored_texts")


def _free_alias(connection: duckdb.DuckDBPyConnection, number: int) -> str:
    """A name to attach a reference index under that no attached database has."""
    taken = {name for (name,) in connection.execute("select database_name from duckdb_databases()").fetchall()}
    alias = f"dedup_reference_{number}"
    while alias in taken:
        alias += "_"
    return alias


def build_reference_matches(
    connection: duckdb.DuckDBPyConnection, tables: Tables, settings: Settings, indexes: list[ReferenceIndex]
) -> TableBuild:
    """``reference_matches``: one row per new document that matches a reference document, in
    input order; where it matches documents of several references, the first reference's."""
    if not indexes:
        return no_reference_matches()
    found = []
    for number, index in enumerate(indexes):
        alias = _free_alias(connection, number)
        connection.execute(f"attach {sql_string(str(index.path))} as {alias} (read_only)")
        try:
            found.append(_index_matches(connection, tables, index, settings, alias).cast(_no_matches().schema))
        finally:
            connection.execute(f"detach {alias}")
    return TableBuild(
        sql=(
            "select m.* from matches m join "
            # numbered in scan order (a view, the ray engine's, has no rowid): DuckDB streams an
            # empty over () on one thread, and numbers a table's rows in its scan
            f"(select doc_id, row_number() over () as position from {tables.fingerprinted}) f using (doc_id) "
            "qualify row_number() over (partition by m.doc_id order by list_position($1, m.reference)) = 1 "
            "order by f.position"
        ),
        params=[[index.name for index in indexes]],
        arrow_inputs={"matches": pa.concat_tables(found)},
    )


def match_references(run: Run, database: str, memory: str) -> tuple[int, list[ReferenceIndex]]:
    """``reference_matches``, each reference's index built or reused first (in
    ``reference_indexes/`` beside ``database``): its rows and the indexes."""
    indexes = reference_indexes(run.settings, database, memory, run.log)
    with run.cursor() as cursor:
        build = build_reference_matches(cursor, run.tables, run.settings, indexes)
    lineage = {REFERENCES: [{**index.described(), "index": str(index.path)} for index in indexes]}
    return run.write("reference_matches", build, lineage), indexes
