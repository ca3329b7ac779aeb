"""A case's row of the table (:class:`Outcome`), what the cases share (:class:`Work`), and the
accounting of a library run against the content a case wrote: records lost, documents altered,
the rejects by reason and what became of the release."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import duckdb

from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.release.files import MANIFEST_FILE, verify_release
from dedup_assets.core.settings.model import Settings
from dedup_bench.corpus import generate


# the reasons a reader gives for bytes it cannot trust
DAMAGE_REASONS = ("decode_error", "truncated")
TABLES_QUERY = "select table_name from information_schema.tables where table_schema = 'dedup'"


@dataclass
class Outcome:
    """One row of the table."""

    injected: str
    observed: str = ""
    lost: int | None = None  # input records neither a document nor rejected; None: not meaningful
    altered: int = 0  # documents that differ from their source without a reject
    note: str = ""  # how damaged records were accounted for; which records went missing
    release: str = "—"
    release_whole: bool = True  # False: a mixed or corrupt release
    expected: bool = True  # whether the case behaved as the issue asks
    failures: list[str] = field(default_factory=list)

    def expect(self, condition: bool, failure: str) -> None:
        if not condition:
            self.expected = False
            self.failures.append(failure)


@dataclass
class Work:
    """What the cases share (corpora, a finished release to replace, the random draws) and the
    folder of the case being run."""

    root: Path
    quick: bool
    rng: random.Random
    folder: Path = Path()

    @property
    def big_docs(self) -> int:
        return 8_000 if self.quick else 30_000

    @property
    def small_docs(self) -> int:
        return 2_000 if self.quick else 5_000

    def corpus(self, name: str, documents: int, seed: int) -> Path:
        path = self.root / "corpora" / f"{name}.parquet"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            generate(documents, path, seed=seed)
        return path

    @property
    def corpus_a(self) -> Path:
        return self.corpus("a", self.big_docs, 1)

    @property
    def corpus_b(self) -> Path:
        return self.corpus("b", self.big_docs, 2)

    @property
    def corpus_small(self) -> Path:
        return self.corpus("small", self.small_docs, 3)

    @cached_property
    def release_a(self) -> Path:
        """A whole release of the small corpus, copied into place as the old release."""
        folder = self.root / "corpora" / "release-a"
        run_library(str(self.corpus_small), str(folder.with_suffix(".duckdb")), str(folder))
        folder.with_suffix(".duckdb").unlink()
        return folder


def check_release(folder: Path) -> tuple[str, bool]:
    """What ``verify_release`` says of the folder, and whether the release is whole. A check that
    raises is reported as such (the case then fails), not taken for a corrupt release."""
    try:
        problems = verify_release(folder)
    except Exception as error:
        return f"not verifiable: {describe_error(error)}", True
    if problems:
        return f"CORRUPT: {'; '.join(problems[:3])}", False
    return "verifies", True


def describe_release(output: Path, labels: dict[Path, str]) -> tuple[str, bool]:
    """Which release the folder holds (by its input) and whether it is whole."""
    if not output.exists():
        return "none", True
    said, whole = check_release(output)
    if said != "verifies":
        return said, whole
    source = Path(json.loads((output / MANIFEST_FILE).read_text())["input"]["path"])
    return f"{labels.get(source, source.name)}, {said}", whole


def describe_error(error: BaseException, limit: int = 300) -> str:
    """The error on one line, cut short: some messages quote a whole line of a file."""
    words_ = [
        word if len(word) <= 100 else f"{word[:60]}…({len(word):,} characters)"
        for word in f"{type(error).__name__}: {error}".split()
    ]
    text = " ".join(words_)
    return text if len(text) <= limit else text[:limit] + " …"


@dataclass
class LibraryRun:
    documents: list[dict]
    rejects: list[dict]
    error: str | None
    release: str
    release_whole: bool
    tables: list[str]
    failure: Exception | None = None  # the error whole, where the run was in this process


def library_run(
    folder: Path, input_path: Path, settings: Settings | None = None, release: bool = True
) -> LibraryRun:
    """``run_library`` into the case's folder; the documents and rejects its database holds."""
    database, output = folder / "db.duckdb", folder / "out"
    folder.mkdir(parents=True, exist_ok=True)
    failure = None
    try:
        run_library(
            str(input_path), str(database), str(output) if release else None, settings or Settings()
        )
    except Exception as error:  # the message is the observation
        failure = error
    said = None if failure is None else describe_error(failure)
    run = read_library_run(database, output if release else None, said)
    run.failure = failure
    return run


def read_library_run(database: Path, output: Path | None, error: str | None) -> LibraryRun:
    """The documents and rejects a finished run left in ``database``, and what its release
    (``output``, None for none) verifies as."""
    documents, rejects, tables = [], [], []
    if database.exists():
        with duckdb.connect(str(database), read_only=True) as connection:
            tables = [name for name, in connection.sql(TABLES_QUERY).fetchall()]
            if error is None:
                documents = table_rows(connection, "documents")
                rejects = table_rows(connection, "rejected_documents")
    said, whole = check_release(output) if output and error is None else ("—", True)
    return LibraryRun(documents, rejects, error, said, whole, tables)


def table_rows(connection: duckdb.DuckDBPyConnection, table: str) -> list[dict]:
    query = f"select * from dedup.{table} order by source_file, input_row"
    return connection.sql(query).to_arrow_table().to_pylist()


def account(
    outcome: Outcome, known: dict[str, dict], run: LibraryRun, damaged: set[str] = frozenset()
) -> None:
    """Add to the outcome the records of ``known`` (doc_id -> the fields it must keep) that are
    neither documents nor rejects, and the documents that differ from ``known``.

    ``damaged`` are the records whose bytes were corrupted: how many records a reader finds in
    garbage cannot be known, so they are accounted for when the reader rejected damaged data;
    every other record must come out as a document or a reject of its own. A run that failed
    published nothing, so it loses nothing; whether its error was the right one is the case's
    to judge."""
    if run.error is not None:
        return
    altered = sum(
        1
        for document in run.documents
        if (source := known.get(document["doc_id"])) is None
        or any(document[name] != value for name, value in source.items())
    )
    damage_rejects = sum(reject["reason"] in DAMAGE_REASONS for reject in run.rejects)
    if damaged and damage_rejects:
        intact = sum(document["doc_id"] not in damaged for document in run.documents)
        lost = len(known) - len(damaged) - intact - (len(run.rejects) - damage_rejects)
        outcome.note += ("; " if outcome.note else "") + (
            f"damaged records: {len(damaged):,} in, {damage_rejects:,} rejects out"
        )
    else:
        lost = len(known) - len(run.documents) - len(run.rejects)
    if lost > 0:
        read = {document["doc_id"] for document in run.documents}
        missing = [doc_id for doc_id in known if doc_id not in read and doc_id not in damaged]
        outcome.note += ("; " if outcome.note else "") + f"not documents: {', '.join(missing[:5])}"
    outcome.lost = (outcome.lost or 0) + lost
    outcome.altered += altered


def reasons(run: LibraryRun) -> str:
    found: dict[str, int] = {}
    for reject in run.rejects:
        found[reject["reason"]] = found.get(reject["reason"], 0) + 1
    return ", ".join(f"{reason} {count}" for reason, count in sorted(found.items())) or "none"


def library_release(run: LibraryRun) -> tuple[str, bool]:
    if run.error is not None:
        return "none (refused)", True
    return run.release, run.release_whole
