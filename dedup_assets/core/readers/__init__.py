"""Reading the input: one reader per format (CSV, Parquet, JSONL, WARC), each keeping the
:class:`Reader` protocol (its file names, the columns a file brings, the file's records in
batches with a callback for the records it rejects, and an independent record count). The
files of an input (one file, a folder or a glob) are read in turn, and their batches validated
into documents with the six base columns; every input record ends as a document or a reject."""

from ..settings import DEFAULT_BATCH_SIZE, InputPolicy
from .documents import REJECTED_SCHEMA, InputStats, count_input_records, document_batches, read_documents
from .files import InputFile, check_file, describe_input, file_sha256, input_files
from .protocol import REQUIRED_COLUMNS, InputError, Reader
from .registry import READERS, reader_for

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "READERS",
    "REJECTED_SCHEMA",
    "REQUIRED_COLUMNS",
    "InputError",
    "InputFile",
    "InputPolicy",
    "InputStats",
    "Reader",
    "check_file",
    "count_input_records",
    "describe_input",
    "document_batches",
    "file_sha256",
    "input_files",
    "read_documents",
    "reader_for",
]
