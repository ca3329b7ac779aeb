"""The columns of a reader's batch as every later step sees them: text NFC-normalized,
``crawled_at`` a UTC timestamp, the extra columns of all files, ``source_file`` and ``input_row``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .protocol import REQUIRED_COLUMNS

TEXT_COLUMNS = ["doc_id", "source", "domain", "title", "body"]
_ISO_FORMATS = ("%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%d %H:%M:%S%z", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d")


def _text(column: pa.Array) -> pa.Array:
    return pc.fill_null(column.cast(pa.large_string()), "")


def _nfc(text: pa.Array) -> pa.Array:
    """NFC on read; only rows with non-ASCII characters can change, so only those are touched."""
    non_ascii = pc.invert(pc.string_is_ascii(text))
    if not pc.any(non_ascii).as_py():
        return text
    return pc.replace_with_mask(text, non_ascii, pc.utf8_normalize(text.filter(non_ascii), form="NFC"))


def _timestamps(column: pa.Array) -> pa.Array:
    """``crawled_at`` as UTC microseconds without zone; null where it does not parse."""
    if pa.types.is_timestamp(column.type):
        utc = column if column.type.tz else pc.assume_timezone(column, "UTC")
        parsed = utc.cast(pa.timestamp("us", tz="UTC"))
    else:
        parsed = _parse_iso8601(pc.utf8_trim_whitespace(_text(column)))
    return parsed.cast(pa.timestamp("us", tz="UTC")).cast(pa.timestamp("us"))


def _parse_iso8601(text: pa.Array) -> pa.Array:
    """Arrow's ISO 8601 cast handles the common forms at C speed; values it rejects get a second
    chance per format, and what still fails stays null."""
    try:
        return text.cast(pa.timestamp("us", tz="UTC"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    normalized = pc.replace_substring_regex(text, r"Z$", "+0000")
    normalized = pc.replace_substring_regex(normalized, r"([+-]\d\d):(\d\d)$", r"\1\2")
    normalized = pc.replace_substring_regex(normalized, r"\.\d+", "")
    result = pa.nulls(len(text), pa.timestamp("us", tz="UTC"))
    for pattern in _ISO_FORMATS:
        attempt = pc.strptime(normalized, format=pattern, unit="us", error_is_null=True)
        if attempt.type.tz is None:
            attempt = pc.assume_timezone(attempt, "UTC")
        result = pc.coalesce(result, attempt.cast(pa.timestamp("us", tz="UTC")))
    return result


def standardize(
    path: Path, batch: pa.RecordBatch, first_record: int, extra: dict[str, pa.DataType]
) -> pa.RecordBatch:
    """The six columns as text (``crawled_at`` as a UTC timestamp, null where it does not
    parse), the extra columns (null where this file lacks one), ``source_file`` and ``input_row``
    (numbered from ``first_record`` unless the reader numbered its rows)."""
    arrays = {name: _text(batch.column(name)) for name in TEXT_COLUMNS}
    arrays["doc_id"] = pc.utf8_trim_whitespace(arrays["doc_id"])
    arrays["title"], arrays["body"] = _nfc(arrays["title"]), _nfc(arrays["body"])
    arrays["crawled_at"] = _timestamps(batch.column("crawled_at"))
    names = batch.schema.names
    extras = [
        batch.column(name).cast(data_type) if name in names else pa.nulls(batch.num_rows, data_type)
        for name, data_type in extra.items()
    ]
    records = (
        batch.column("input_row")  # record numbers, when the source skipped some records
        if "input_row" in names
        else pa.array(np.arange(first_record, first_record + batch.num_rows, dtype=np.int64))
    )
    files = pa.array([str(path)] * batch.num_rows, pa.large_string())
    return pa.RecordBatch.from_arrays(
        [arrays[name] for name in REQUIRED_COLUMNS] + extras + [files, records],
        names=REQUIRED_COLUMNS + list(extra) + ["source_file", "input_row"],
    )
