"""Reading the input: one reader per format (CSV, Parquet, JSONL, WARC), each keeping the
:class:`Reader` protocol (its file names, the columns a file brings, the file's records in
batches with a callback for the records it rejects, and an independent record count). The
files of an input (one file, a folder or a glob) are read in turn, and their batches validated
into documents with the six base columns; every input record ends as a document or a reject.
Beside the readers: ``ingest.py`` (the documents and rejects tables from one read), ``batches.py``
(a batch folder's batches) and ``cdx.py`` (a targets file from a CDX API)."""

from ..settings.input import InputPolicy
from .documents import (
    InputStats, bodies_in_place, count_input_records, document_batches, document_rows, footer_records, read_documents,
)
from .files import InputFile, describe_input, file_sha256, skipped_files_line
from .protocol import InputError, Reader
from .registry import READERS, reader_for

__all__ = [
    "READERS",
    "InputError",
    "InputFile",
    "InputPolicy",
    "InputStats",
    "Reader",
    "bodies_in_place",
    "count_input_records",
    "describe_input",
    "document_batches",
    "document_rows",
    "file_sha256",
    "footer_records",
    "read_documents",
    "reader_for",
    "skipped_files_line",
]
