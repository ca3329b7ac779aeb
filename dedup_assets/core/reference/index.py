"""A reference's index: each reference input read and fingerprinted once, into a DuckDB file of its
own in ``reference_indexes/`` beside the run's database (bodies copied in), which records the
sketch scheme (``sketch/scheme.py``), the settings that read and shingled the input, and each
input file's stamp and sha256. A later run reuses it while all of them are as they were; a named
index (a ``.duckdb`` file an earlier run built) is used as it is, and refused when it was built
another way. ``matching.py`` matches the input against the indexes.

An index is written to a file of its own and moved in place once whole, under a lock, so that a
run stopped half way leaves no index to reuse and two runs at once build it once."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import duckdb

from ..pipeline import steps
from ..pipeline.engines import DuckDBEngine
from ..pipeline.run import Run, library_writer
from ..util.errors import DedupError
from ..read import InputError, InputFile
from ..read.files import input_changes, input_files
from ..settings.lineage import STAGE_SETTINGS
from ..settings.model import Settings
from ..sketch.scheme import described_differences, scheme_differences
from ..storage.store import TableBuild, open_database, table_exists, write_table
from ..storage.tables import SCHEMA, Tables, sql_string

INDEX_FOLDER = "reference_indexes"  # beside the run's database
INDEX_SUFFIX = ".duckdb"
INFO_TABLE = f"{SCHEMA}.reference_index"  # the index's one row: what built it
# the settings an index's rows and fingerprints depend on besides the sketch scheme: how the
# input is read, and how it is shingled (ignored_passages among them)
_BUILT_BY = tuple(
    name for name in (*STAGE_SETTINGS["documents"], *STAGE_SETTINGS["fingerprinted"])
    if name not in ("table_layout", "engine", "input_path", "audit_sample_size", "sketch_scheme")
)


class ReferenceError(DedupError, ValueError):
    """A reference that cannot be used, saying why and what to do."""


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
    # bodies copied into the index, so that it holds what verification reads; no recall audit;
    # the passages the input's sample shares (ignore_shared_above) are in ignored_passages by now,
    # and the reference leaves out those, not its own
    return replace(settings, engine="duckdb", parquet_bodies="copy", audit_sample_size=0, ignore_shared_above=None)


def _built_with(settings: Settings) -> dict:
    values = {**settings.as_dict(), **settings.derived()}
    return {"sketch_scheme": values["sketch_scheme"], "settings": {name: values.get(name) for name in _BUILT_BY}}


def _recorded(path: Path) -> dict | None:
    """The index's record of what built it; None where there is no file, or a database without
    the record (not an index). Any other failure to read it is said as it is."""
    if not path.is_file():
        return None
    try:
        with duckdb.connect(str(path), read_only=True) as connection:
            if not table_exists(connection, INFO_TABLE):
                return None
            rows = connection.execute(f"select record from {INFO_TABLE}").fetchall()
    except duckdb.Error as error:
        raise ReferenceError(f"Cannot read the reference index {path}: {error}") from None
    return json.loads(rows[0][0]) if rows else None


def _built_otherwise(record: dict, built_with: dict) -> str | None:
    """How the index of ``record`` was built otherwise than ``built_with`` says; None if alike."""
    differences = scheme_differences(record["sketch_scheme"], built_with["sketch_scheme"])
    if differences:
        return "fingerprinted with another sketch scheme (" + described_differences(differences, "index", "this run") + ")"
    ours, theirs = built_with["settings"], record.get("settings", {})
    changed = sorted(name for name in ours if theirs.get(name) != ours[name])
    return f"built with other settings ({', '.join(changed)})" if changed else None


def _why_stale(record: dict | None, reference: str, built_with: dict) -> str | None:
    """Why an index cannot be reused for ``reference`` under ``built_with``; None when it can."""
    if record is None:
        return "there is no index of it yet"
    otherwise = _built_otherwise(record, built_with)
    if otherwise:
        return f"its index was {otherwise}"
    input_file = InputFile(**{**record["input"], "stamps": tuple(tuple(s) for s in record["input"]["stamps"])})
    if Path(input_file.path).expanduser().resolve() != Path(reference).expanduser().resolve():
        return f"its index was built from {input_file.path}"
    source_format = record["settings"].get("source_format")
    try:
        now = [str(path) for path in input_files(Path(input_file.path), source_format)]
    except InputError as error:
        raise ReferenceError(f"reference {reference}: {error}") from None
    if now != [stamp[0] for stamp in input_file.stamps]:
        return "files were added to it or taken from it since its index was built"
    edited = [change.path for change in input_changes(input_file, source_format) if change.edited]
    return f"{edited[0]} changed since its index was built" if edited else None


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Held while one run checks and builds the index at ``path``: another waits, then finds it built."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build_index(reference: str, path: Path, settings: Settings, memory: str, log: Callable[[str], None]) -> None:
    """Read and fingerprint ``reference`` into a file of this run's own beside ``path``, moved in
    place once whole."""
    partial = path.with_name(f"{path.name}.{os.getpid()}-{secrets.token_hex(4)}.partial")
    tables = Tables.in_schema(SCHEMA)
    try:
        with open_database(str(partial), memory, SCHEMA) as connection:
            run = Run(settings, tables, DuckDBEngine, connection.cursor, library_writer(connection, tables), log)
            ingested = steps.ingest(run, Path(reference).expanduser())
            steps.fingerprint(run, audit=False)
            record = {**_built_with(settings), "input": asdict(ingested.input_file), "documents": ingested.documents}
            write_table(connection, INFO_TABLE, TableBuild(sql=f"select {sql_string(json.dumps(record))} as record"))
        os.replace(partial, path)
    except DedupError as error:
        raise ReferenceError(
            f"reference {reference}: {error} (a reference is read with the input's settings, its fields among them)"
        ) from None
    finally:
        for left in (partial, partial.with_name(partial.name + ".wal")):
            left.unlink(missing_ok=True)


def _index(name: str, path: Path, record: dict, reused: bool) -> ReferenceIndex:
    return ReferenceIndex(name, path, record["documents"], reused, record["input"]["sha256"])


def _named_index(reference: str, built_with: dict, log: Callable[[str], None]) -> ReferenceIndex:
    named = Path(reference).expanduser()
    record = _recorded(named)
    if record is None:
        raise ReferenceError(
            f"reference {reference} is not a reference index (no {INFO_TABLE} table): name the input it "
            "was built from instead, in any supported format, and the run builds its index"
        )
    otherwise = _built_otherwise(record, built_with)
    if otherwise:
        source = record["input"]["path"]
        fix = (
            f'name its input instead of the index, "reference": ["{source}"], which fingerprints it again'
            if Path(source).exists() else f"its input {source} is gone: build a new index from the corpus"
        )
        raise ReferenceError(
            f"reference index {reference} was {otherwise}, whose fingerprints cannot be compared with this "
            f"run's. Run with the settings it was built with, or {fix}"
        )
    log(f"reference {reference}: a named index of {record['documents']:,} documents, used as it is")
    return _index(reference, named, record, True)


def reference_index(reference: str, folder: Path, settings: Settings, memory: str, log: Callable[[str], None]) -> ReferenceIndex:
    """The index of ``reference``: a named index checked against the run's settings, or the
    input's index in ``folder``, reused while it is as it was, else built (again)."""
    settings = _reference_settings(settings)
    built_with = _built_with(settings)
    if Path(reference).suffix == INDEX_SUFFIX:
        return _named_index(reference, built_with, log)
    path = index_path(reference, folder)
    with _locked(path):
        record = _recorded(path)
        stale = _why_stale(record, reference, built_with)
        if stale is None:
            log(
                f"reference {reference}: its index {path} is reused ({record['documents']:,} documents; the input, "
                "its read settings and the sketch scheme are as they were), not fingerprinted again"
            )
            return _index(reference, path, record, True)
        log(f"reference {reference}: fingerprinting it into {path}, as {stale}")
        _build_index(reference, path, settings, memory, log)
        return _index(reference, path, _recorded(path), False)


def reference_indexes(settings: Settings, database: str, memory: str, log: Callable[[str], None]) -> list[ReferenceIndex]:
    folder = Path(database).expanduser().parent / INDEX_FOLDER
    return [reference_index(reference, folder, settings, memory, log) for reference in settings.reference]
