"""What verifying a pair with an earlier document needs, kept per batch beside the database.

For each batch in the index, an uncompressed Arrow IPC file holds, in position order, every
document's ``doc_id``, ``domain``, ``body``, ``signature`` and ``lsh_bands``. A new batch pairs
with a few thousand earlier documents scattered over the whole index; DuckDB reads a column's
every block to fetch scattered rows, while a memory-mapped file reads only the pages of the rows
taken. Each file's rows are checked against the doc_ids the index expects at those positions,
so a file that does not belong to the index is refused, not trusted.

A file is written under a hidden temporary name (``.NAME.PID``) and renamed once whole; a failed
write removes it, and what a killed run left is removed when the folder is next used.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..util.errors import DedupError
from ..read.batches import key_path_name
from ..storage.places import DATABASE, said_of_the_place

PAYLOAD_COLUMNS = ("doc_id", "domain", "body", "signature", "lsh_bands")
SUFFIX = ".arrow"
_PARTIAL = re.compile(rf"\..+{re.escape(SUFFIX)}\.\d+")


class PayloadError(DedupError, RuntimeError):
    """A batch's payload file is missing or does not match the index."""


@dataclass(frozen=True)
class Span:
    """One batch's positions in the index, ``first`` to ``first + documents - 1``, and the
    payload file the index names for it."""

    key: str
    first: int
    documents: int
    file: str


def payload_folder(database: str) -> Path:
    """The folder beside the database file that holds its payload files, without the temporary
    files of a killed run: whoever asks holds the database open, which no other run then can,
    so no temporary file there is still being written."""
    if not database or database == ":memory:":
        raise PayloadError(
            "Incremental batches need a database file: set DEDUP_DATABASE to a file path, not :memory:."
        )
    folder = Path(f"{database}.payloads")
    if folder.is_dir():
        for path in folder.iterdir():
            if _PARTIAL.fullmatch(path.name):
                path.unlink(missing_ok=True)
    return folder


def _versions(folder: Path, key: str) -> list[Path]:
    if not folder.is_dir():
        return []
    name = re.compile(rf"{re.escape(key_path_name(key))}\.[0-9a-f]{{16}}{re.escape(SUFFIX)}")
    return [path for path in folder.iterdir() if name.fullmatch(path.name)]


def write_payload(folder: Path, key: str, input_sha256: str, table: pa.Table) -> str:
    """Write a batch's payload whole, under a name of its own input (another input of the same
    batch gets another file, so the file the index names is never overwritten): a temporary
    file, flushed, renamed, and the folder flushed. Returns the file's name."""
    final = folder / f"{key_path_name(key)}.{input_sha256[:16]}{SUFFIX}"
    partial = folder / f".{final.name}.{os.getpid()}"
    with said_of_the_place(folder, DATABASE, PayloadError, f"the payload of batch {key}"):
        folder.mkdir(parents=True, exist_ok=True)
        try:
            with pa.OSFile(str(partial), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table.select(list(PAYLOAD_COLUMNS)))
            for path in (partial, folder):
                descriptor = os.open(path, os.O_RDONLY)
                try:
                    os.fsync(descriptor)
                finally:
                    os.close(descriptor)
            os.replace(partial, final)
        except BaseException:
            partial.unlink(missing_ok=True)  # a kill skips this: payload_folder removes it next time
            raise
    return final.name


def remove_other_versions(folder: Path, key: str, keep: str) -> None:
    for path in _versions(folder, key):
        if path.name != keep:
            path.unlink(missing_ok=True)


def remove_payloads(folder: Path, keys: list[str]) -> None:
    for key in keys:
        for path in _versions(folder, key):
            path.unlink(missing_ok=True)


def take(folder: Path, spans: list[Span], positions: np.ndarray, doc_ids: pa.Array) -> pa.Table:
    """The payload rows at ``positions`` (ascending, at least one), whose doc_ids the index
    says are ``doc_ids``; refuses a missing file or one whose rows are other documents."""
    pieces = []
    starts = np.array([span.first for span in spans], dtype=np.int64)
    owner = np.searchsorted(starts, positions, side="right") - 1
    for index in np.unique(owner):
        span = spans[index]
        path = folder / span.file
        try:
            table = pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()
        except (OSError, pa.ArrowInvalid) as error:
            raise PayloadError(_broken(path, span, f"it cannot be read ({error})")) from None
        if table.num_rows != span.documents:
            raise PayloadError(_broken(path, span, f"it holds {table.num_rows:,} rows, the index {span.documents:,}"))
        pieces.append(table.take(pa.array(positions[owner == index] - span.first)))
    taken = pa.concat_tables(pieces)
    if not pc.all(pc.equal(taken.column("doc_id"), doc_ids)).as_py():
        raise PayloadError(
            f"The payload files in {folder} hold other documents than the index at the same "
            "positions. Take the batches out of the index and add them again (dedup "
            "forget-batches KEY, from the first batch whose file changed)."
        )
    return taken


def _broken(path: Path, span: Span, what: str) -> str:
    return (
        f"{path}: the payload of batch {span.key} does not match the index: {what}. Add batch "
        f"{span.key} again if it is the latest, or take it and every later batch out of the index "
        f"(dedup forget-batches {span.key}) and add them again in key order."
    )
