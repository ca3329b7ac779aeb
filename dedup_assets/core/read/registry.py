"""Which reader reads a file: the one ``source_format`` names, else the one its file name fits."""

from __future__ import annotations

import re
from pathlib import Path

from ..settings.input import unknown_format
from . import csv, jsonl, parquet, warc, warc_ranges
from .input_contract import REQUIRED_COLUMNS
from .protocol import INPUT_SETTING, InputError, Reader

# Format name -> reader, in the order of SOURCE_FORMATS (test_readers holds the two equal). The
# lists below are made from the readers' names, labels and suffixes, which each reader writes once.
READERS: dict[str, Reader] = {
    reader.name: reader
    for reader in (csv.READER, parquet.READER, jsonl.READER, warc.READER, warc_ranges.READER)
}
_SUFFIXES = tuple(suffix for reader in READERS.values() for suffix in reader.suffixes)


def _either(words: tuple[str, ...]) -> str:
    return f"{', '.join(words[:-1])} or {words[-1]}"


SUPPORTED_NAMES = _either(_SUFFIXES)  # .csv, .parquet, .jsonl, .jsonl.gz, .json.gz, .warc or .warc.gz
# the formats a file's name tells (a targets file's is CSV or Parquet): CSV, Parquet, JSONL or WARC
NAMED_FORMATS = _either(tuple(reader.label for reader in READERS.values() if reader.suffixes))
# longest first, so .warc.gz is cut whole
_FORMAT_SUFFIX = re.compile(
    "(" + "|".join(map(re.escape, sorted(_SUFFIXES, key=len, reverse=True))) + ")$", re.IGNORECASE
)


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
            raise InputError(unknown_format(source_format))
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
