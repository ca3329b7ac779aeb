"""What every input format's reader provides, and the columns it hands on to validation."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol, runtime_checkable

import pyarrow as pa

from ..util.errors import DedupError
from ..settings.input import InputPolicy
from .input_contract import BASE_COLUMNS

# The six columns as a reader of records (JSONL, WARC) emits them, before validation fills in
# the contract's defaults and parses crawled_at.
RAW_FIELDS = [(name, pa.large_string()) for name in BASE_COLUMNS]
# The columns the pipeline puts beside the input's own in documents and deduped_documents:
# readers count replaced characters, validation adds source_file and input_row (unless the
# reader numbered its records), clustering adds cluster_id and cluster_size. An input column of
# one of these names would be taken for ours or hide it, so it is refused (DuckDB compares
# names without case).
# document_position: the ray engine's own (core/distributed/datasets.py POSITION)
RESERVED_COLUMNS = (
    "replaced_characters", "source_file", "input_row", "cluster_id", "cluster_size", "document_position",
)
# How a reader reports a record it cannot turn into a row: (record number, doc_id, reason, detail).
Reject = Callable[[int, str, str, str], None]


class InputError(DedupError, ValueError):
    """The input cannot be used as it is; the message says where and what to fix."""


# where a user names the input, on every entry point: a message names them all, since the
# library cannot tell which one this run's input came from
INPUT_SETTING = "input_path (in dedup.yaml or the launchpad), dedup run --input, or DEDUP_INPUT"


class BySuffix:
    """``matches`` of a reader whose files are told by how their names end (``suffixes``)."""

    suffixes: tuple[str, ...]

    def matches(self, path: Path) -> bool:
        return path.name.lower().endswith(self.suffixes)


@runtime_checkable
class Reader(Protocol):
    """One input format. An input record is one CSV data row, JSONL line, WARC record or
    Parquet row; each is either in a batch ``batches`` yields or reported to ``reject``."""

    name: str  # the format, as source_format names it
    label: str  # the format, as messages name it
    # how its files' names end, lower case; the registry's lists of file names are made from these
    suffixes: tuple[str, ...]
    # whether its columns are the file's own (CSV, Parquet), so the ``fields`` setting renames
    # them; a reader of records (JSONL, WARC) builds our columns itself
    columns_from_file: bool
    # the columns ``schema`` puts after the file's own (what the reader adds, such as
    # ``input_row``), which ``fields`` does not rename and messages about the file leave out
    appended_columns: tuple[str, ...]

    def matches(self, path: Path) -> bool:
        """Whether the file's name says it is in this format."""
        ...

    def schema(self, path: Path) -> pa.Schema:
        """The columns the file brings, read from its header or metadata only."""
        ...

    def batches(
        self, path: Path, batch_size: int, policy: InputPolicy, reject: Reject
    ) -> Iterator[pa.RecordBatch]:
        """The file's records as rows with the columns of ``schema(path)``, in file order; a
        record that cannot be a row goes to ``reject`` instead."""
        ...

    def count(self, path: Path) -> int:
        """The file's records, counted on their own rather than through ``batches``, so a record
        that ``batches`` loses shows as a difference."""
        ...
