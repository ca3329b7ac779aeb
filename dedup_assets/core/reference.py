"""Reference corpora: inputs that new documents are deduplicated against, never removed or
rewritten (a corpus already trained on, last month's release).

Each entry of the ``reference`` setting is an input in any supported format, or the index an
earlier run built of one (a ``.duckdb`` file). An input is read and fingerprinted once into an
index of its own, a DuckDB file in ``reference_indexes/`` beside the run's database, which
records the sketch scheme (``sketch_scheme.py``), the settings that read the input and each
input file's stamp; a later run reuses the index while all three are as they were, and says so.
A named index of another sketch scheme is refused, with the command that fingerprints its input
again.

A new document is matched when its exact Jaccard with a reference document is at or above the
threshold: the candidates are the pairs of a new and a reference text that share a band key, as
in the one-shot join; the best-scoring reference document (the smallest doc_id on a tie) is its
match. Only direct matches count: a copy of a matched document that is not itself close enough
to a reference document stays with the new data, where the clusters may keep it. Matched
documents are removed in ``clusters`` (``decision`` ``matched_reference``) and take no part in
its components, and ``reference_matches`` names each one's reference document and score.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from . import steps
from .engines import DuckDBEngine
from .errors import DedupError
from .ingest import document_bodies
from .jaccard import pair_jaccard
from .readers import InputError, InputFile
from .readers.files import input_changes, input_files
from .setting_lineage import STAGE_SETTINGS
from .settings import Settings
from .sketch_scheme import described_differences, scheme_differences
from .store import TableBuild, open_database, write_table
from .tables import REFERENCES, SCHEMA, Tables, sql_over, sql_string
from .verify import ensure_memory

INDEX_FOLDER = "reference_indexes"  # beside the run's database
INDEX_SUFFIX = ".duckdb"
INFO_TABLE = f"{SCHEMA}.reference_index"  # the index's one row: what built it
MATCH_COLUMNS = {
    "doc_id": pa.string(), "reference": pa.string(), "reference_doc_id": pa.string(),
    "reference_source_file": pa.string(), "reference_input_row": pa.int64(), "jaccard": pa.float64(),
}
# the documents stage's settings that decide how an input is read, and so a reference's rows
_READ_SETTINGS = tuple(name for name in STAGE_SETTINGS["documents"] if name not in ("table_layout", "engine", "input_path"))


class ReferenceError(DedupError, ValueError):
    """A reference that cannot be used: a named index of another scheme, or not an index."""


@dataclass(frozen=True)
class ReferenceIndex:
    name: str  # the reference as the settings name it
    path: Path  # its index
    documents: int
    reused: bool
    sha256: str  # of the input it was built from, as manifest.json names it

    def described(self) -> dict:
        """What lineage and ``manifest.json`` record of it (``references``)."""
        return {"reference": self.name, "documents": self.documents, "sha256": self.sha256}


def index_path(reference: str, folder: Path) -> Path:
    """Where the index of reference input ``reference`` is kept: named for the input, and for
    its absolute path so that two inputs of one name do not share an index."""
    where = Path(reference).expanduser().resolve()
    key = hashlib.sha256(str(where).encode()).hexdigest()[:12]
    return folder / f"{where.name.replace(' ', '_')}-{key}{INDEX_SUFFIX}"


def _reference_settings(settings: Settings) -> Settings:
    # bodies copied into the index, so that it holds what verification reads; no recall audit
    return replace(settings, engine="duckdb", parquet_bodies="copy", audit_sample_size=0)


def _built_with(settings: Settings) -> dict:
    values = {**settings.as_dict(), **settings.derived()}
    return {"sketch_scheme": values["sketch_scheme"], "read": {name: values.get(name) for name in _READ_SETTINGS}}


def _recorded(path: Path) -> dict | None:
    """The index's record of what built it; None where ``path`` is no index."""
    try:
        with duckdb.connect(str(path), read_only=True) as connection:
            row = connection.execute(f"select record from {INFO_TABLE}").fetchone()
    except duckdb.Error:
        return None
    return json.loads(row[0]) if row else None


def _why_stale(record: dict | None, reference: str, built_with: dict) -> str | None:
    """Why an index cannot be reused for ``reference`` under ``built_with``; None when it can."""
    if record is None:
        return "there is no index of it yet"
    differences = scheme_differences(record["sketch_scheme"], built_with["sketch_scheme"])
    if differences:
        return "its index was fingerprinted with another sketch scheme (" + described_differences(
            differences, "index", "this run") + ")"
    if record["read"] != built_with["read"]:
        changed = sorted(k for k in built_with["read"] if record["read"].get(k) != built_with["read"][k])
        return f"its index read it with other settings ({', '.join(changed)})"
    input_file = InputFile(**{**record["input"], "stamps": tuple(tuple(s) for s in record["input"]["stamps"])})
    if Path(input_file.path).expanduser().resolve() != Path(reference).expanduser().resolve():
        return f"its index was built from {input_file.path}"
    source_format = record["read"].get("source_format")
    try:
        now = [str(path) for path in input_files(Path(input_file.path), source_format)]
    except InputError as error:
        raise ReferenceError(f"reference {reference}: {error}") from None
    if now != [stamp[0] for stamp in input_file.stamps]:
        return "files were added to it or taken from it since its index was built"
    edited = [change.path for change in input_changes(input_file, source_format) if change.edited]
    if edited:
        return f"{edited[0]} changed since its index was built"
    return None


def _build_index(reference: str, path: Path, settings: Settings, memory: str, log: Callable[[str], None]) -> None:
    """Read and fingerprint ``reference`` into a new index at ``path``, written beside it and
    moved in place once whole, so that a run stopped half way leaves no index to reuse."""
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    tables = Tables.in_schema(SCHEMA)
    with open_database(str(partial), memory, SCHEMA) as connection:
        write = steps.library_writer(connection, tables)
        run = steps.StepRun(settings, tables, DuckDBEngine, connection.cursor, write, log)
        ingested = steps.ingest(run, Path(reference).expanduser())
        steps.fingerprint(run, audit=False)
        record = {**_built_with(settings), "input": asdict(ingested.input_file), "documents": ingested.documents}
        write_table(connection, INFO_TABLE, TableBuild(sql=f"select {sql_string(json.dumps(record))} as record"))
    os.replace(partial, path)


def reference_index(reference: str, folder: Path, settings: Settings, memory: str, log: Callable[[str], None]) -> ReferenceIndex:
    """The index of ``reference``: a named index checked against the run's sketch scheme, or the
    input's index in ``folder``, reused when its scheme, read settings and input are unchanged,
    else built (again)."""
    settings = _reference_settings(settings)
    built_with = _built_with(settings)
    named = Path(reference).expanduser()
    if named.suffix == INDEX_SUFFIX:
        record = _recorded(named)
        if record is None:
            raise ReferenceError(
                f"reference {reference} is not a reference index (no {INFO_TABLE} table): name the input it "
                "was built from instead, in any supported format, and the run builds its index"
            )
        differences = scheme_differences(record["sketch_scheme"], built_with["sketch_scheme"])
        if differences:
            raise ReferenceError(
                f"reference index {reference} was fingerprinted with another sketch scheme "
                f"({described_differences(differences, 'index', 'this run')}), whose fingerprints cannot be "
                f"compared with this run's. Re-fingerprint it: name its input, "
                f"\"reference\": [\"{record['input']['path']}\"], instead of the index"
            )
        log(f"reference {reference}: a named index of {record['documents']:,} documents, used as it is")
        return ReferenceIndex(reference, named, record["documents"], True, record["input"]["sha256"])
    path = index_path(reference, folder)
    stale = _why_stale(_recorded(path), reference, built_with)
    if stale is None:
        record = _recorded(path)
        log(
            f"reference {reference}: its index {path} is reused ({record['documents']:,} documents; the input, "
            "its read settings and the sketch scheme are as they were), not fingerprinted again"
        )
        return ReferenceIndex(reference, path, record["documents"], True, record["input"]["sha256"])
    log(f"reference {reference}: fingerprinting it into {path}, as {stale}")
    _build_index(reference, path, settings, memory, log)
    record = _recorded(path)
    return ReferenceIndex(reference, path, record["documents"], False, record["input"]["sha256"])


def reference_indexes(settings: Settings, database: str, memory: str, log: Callable[[str], None]) -> list[ReferenceIndex]:
    folder = Path(database).expanduser().parent / INDEX_FOLDER
    return [reference_index(reference, folder, settings, memory, log) for reference in settings.reference]


def _index_matches(
    connection: duckdb.DuckDBPyConnection, tables: Tables, index: ReferenceIndex, settings: Settings, alias: str
) -> pa.Table:
    """Each new document whose best reference document in ``index`` (attached as ``alias``) has
    an exact Jaccard with it at or above the threshold, with that document and the score."""
    reference = Tables.in_schema(f"{alias}.{SCHEMA}")
    texts = connection.sql(
        sql_over("reference_candidates", fingerprinted=tables.fingerprinted, reference=reference.fingerprinted)
    ).to_arrow_table()
    if not texts.num_rows:
        return _no_matches()
    # each body read and shingled once, however many pairs it is in: the new ones, then the old
    new = document_bodies(connection, tables.documents, texts.column("doc_id").unique())
    old = document_bodies(connection, reference.documents, texts.column("reference_doc_id").unique())
    ensure_memory(2 * (new.nbytes + old.nbytes), settings.memory_budget_mb, f"Matching against reference {index.name}")
    bodies = pa.concat_arrays([
        new.column("body").combine_chunks().cast(pa.large_string()),
        old.column("body").combine_chunks().cast(pa.large_string()),
    ])
    left = _rows_of(new.column("doc_id"), texts.column("doc_id"))
    right = new.num_rows + _rows_of(old.column("doc_id"), texts.column("reference_doc_id"))
    scores = pair_jaccard(bodies, left, right, settings.shingling(), settings.hash_scheme)
    connection.register("scored_texts", texts.append_column("jaccard", pa.array(scores)))
    try:
        return connection.sql(
            sql_over("reference_matches", fingerprinted=tables.fingerprinted, reference=reference.documents),
            params=[index.name, settings.jaccard_threshold],
        ).to_arrow_table()
    finally:
        connection.unregister("scored_texts")


def _rows_of(doc_ids: pa.ChunkedArray, wanted: pa.ChunkedArray) -> np.ndarray:
    """The row of each of ``wanted`` in ``doc_ids``."""
    at = {doc_id: row for row, doc_id in enumerate(doc_ids.to_pylist())}
    return np.fromiter((at[doc_id] for doc_id in wanted.to_pylist()), dtype=np.int64, count=len(wanted))


def _no_matches() -> pa.Table:
    return pa.table({name: pa.array([], kind) for name, kind in MATCH_COLUMNS.items()})


def build_reference_matches(
    connection: duckdb.DuckDBPyConnection, tables: Tables, settings: Settings, indexes: list[ReferenceIndex]
) -> TableBuild:
    """``reference_matches``: one row per new document that matches a reference document, in
    input order; where it matches documents of several references, the first reference's."""
    found = []
    for number, index in enumerate(indexes):
        alias = f"reference_{number}"
        connection.execute(f"attach {sql_string(str(index.path))} as {alias} (read_only)")
        try:
            found.append(_index_matches(connection, tables, index, settings, alias))
        finally:
            connection.execute(f"detach {alias}")
    empty = _no_matches()
    matches = pa.concat_tables([empty, *(table.cast(empty.schema) for table in found)])
    if not indexes:
        return no_reference_matches()
    return TableBuild(
        sql=(
            "select m.* from matches m join "
            f"(select doc_id, rowid as position from {tables.fingerprinted}) f using (doc_id) "
            f"qualify row_number() over (partition by m.doc_id order by list_position($1, m.reference)) = 1 "
            "order by f.position"
        ),
        params=[[index.name for index in indexes]],
        arrow_inputs={"matches": matches},
    )


def match_references(run: steps.StepRun, database: str, memory: str) -> tuple[int, list[ReferenceIndex]]:
    """``reference_matches``, each reference's index built or reused first (in
    ``reference_indexes/`` beside ``database``): its rows and the indexes."""
    indexes = reference_indexes(run.settings, database, memory, run.log)
    with run.cursor() as cursor:
        build = build_reference_matches(cursor, run.tables, run.settings, indexes)
    lineage = {REFERENCES: [{**index.described(), "index": str(index.path)} for index in indexes]}
    return run.write("reference_matches", build, lineage), indexes


def no_reference_matches() -> TableBuild:
    """An empty ``reference_matches``: for a clusters build outside the graph, of a run without
    references."""
    return TableBuild(sql="select * from matches", arrow_inputs={"matches": _no_matches()})
