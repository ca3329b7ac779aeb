"""Which reader reads a file: the one ``source_format`` names, else the one its file name fits."""

from __future__ import annotations

import re
from pathlib import Path

from ..input_settings import SOURCE_FORMATS
from . import csv, jsonl, parquet, warc, warc_ranges
from .input_contract import REQUIRED_COLUMNS
from .protocol import INPUT_SETTING, InputError, Reader

# Format name -> reader, in the order of SOURCE_FORMATS.
READERS: dict[str, Reader] = {
    reader.name: reader
    for reader in (csv.READER, parquet.READER, jsonl.READER, warc.READER, warc_ranges.READER)
}
SUPPORTED_NAMES = ".csv, .parquet, .jsonl, .jsonl.gz, .json.gz, .warc or .warc.gz"
# the extensions the readers' file names end with, longest first, so .warc.gz is cut whole
_FORMAT_SUFFIX = re.compile(r"\.(jsonl\.gz|json\.gz|warc\.gz|jsonl|warc|csv|parquet)$", re.IGNORECASE)


def format_stem(name: str) -> str:
    """A file name without the format's extensions (``2026-11-29.warc.gz`` -> ``2026-11-29``);
    other names as they are. Input files are read in the order of their stems, which is the
    order of the incremental batches they would be."""
    return _FORMAT_SUFFIX.sub("", name)


def matching_reader(path: Path, source_format: str | None = None, fields: dict | None = None) -> Reader | None:
    """The reader of a file: ``source_format``'s when set, else the one whose file names fit
    ``path``, if any; a CSV or Parquet file with a targets file's columns, and none of the
    documents columns or of those ``fields`` names, is a targets file."""
    if source_format:
        if source_format not in READERS:
            raise InputError(
                f"source_format must be one of {', '.join(SOURCE_FORMATS)} (or unset to use the "
                f"file extension), got {source_format!r}"
            )
        return READERS[source_format]
    reader = next((reader for reader in READERS.values() if reader.matches(path)), None)
    if reader in (csv.READER, parquet.READER) and warc_ranges.is_targets_file(path, reader, fields):
        return warc_ranges.READER
    return reader


def reader_for(path: Path, source_format: str | None = None, fields: dict | None = None) -> Reader:
    """The reader of a file, as :func:`matching_reader` finds it; a file no reader reads fails."""
    reader = matching_reader(path, source_format, fields)
    if reader is None:
        raise InputError(
            f"{path}: unsupported file type '{path.suffix or '(none)'}'. Give a .csv or .parquet "
            "file with at least the columns " + ", ".join(REQUIRED_COLUMNS) + f", or any {SUPPORTED_NAMES} "
            f"file, folder or glob (set {INPUT_SETTING}), or set source_format."
        )
    return reader
