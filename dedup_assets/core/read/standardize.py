"""The columns of a reader's batch as every later step sees them: the base columns with the
input contract's defaults (:mod:`.input_contract`), text NFC-normalized, ``crawled_at`` a UTC
timestamp, the extra columns of all files, ``source_file`` and ``input_row``."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .input_contract import BASE_COLUMNS, base_columns, text

_UTC = pa.timestamp("us", tz="UTC")
# a time of day followed by Z or an offset, which Arrow parses only into a zoned timestamp
_ZONED = r"[T ]\d.*(Z|[+-]\d\d(:?\d\d)?)$"


def _nfc(text: pa.Array) -> pa.Array:
    """NFC on read; only rows with non-ASCII characters can change, so only those are touched.
    By Python's ``unicodedata``: Arrow's NFC only decomposes before pyarrow 26
    (apache/arrow#51225), which the ray extra's Daft requires, and is no faster after."""
    non_ascii = pc.invert(pc.string_is_ascii(text))
    if not pc.any(non_ascii).as_py():
        return text
    changing = text.filter(non_ascii)
    # the filter leaves out null rows (their mask is null), so every row here is a string
    normalized = pa.array([unicodedata.normalize("NFC", row) for row in changing.to_pylist()], changing.type)
    return pc.replace_with_mask(text, non_ascii, normalized)


def _timestamps(column: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """``crawled_at`` as UTC microseconds without zone, null where the input has none or it does
    not parse; and where it does not parse."""
    if pa.types.is_timestamp(column.type):
        utc = column if column.type.tz else pc.assume_timezone(column, "UTC")
        # nanoseconds are cut to microseconds, the pipeline's unit, rather than refused
        parsed = utc.cast(pa.timestamp("us", tz="UTC"), safe=column.type.unit != "ns")
        return parsed.cast(pa.timestamp("us")), np.zeros(len(column), dtype=bool)
    given = pc.utf8_trim_whitespace(text(column))
    parsed = _parse_iso8601(given)
    unparsed = pc.and_(pc.not_equal(given, ""), parsed.is_null())
    return parsed.cast(pa.timestamp("us")), unparsed.to_numpy(zero_copy_only=False)


def _parse_iso8601(text: pa.Array) -> pa.Array:
    """Each value parsed on its own by Arrow's ISO 8601 cast, which refuses an impossible date
    or time (2026-02-30, 25:00) rather than rolling it over; a value with a zone offset is
    converted to UTC, one without is taken as UTC. Digits beyond microseconds are cut."""
    text = pc.replace_substring_regex(text, r"(\.\d{6})\d+", r"\1")
    # a value that does not start with a date cannot parse; null now, it costs no failing cast
    text = pc.if_else(pc.match_substring_regex(text, r"^\d{4}-\d\d-\d\d"), text, None)
    zoned = pc.match_substring_regex(text, _ZONED)
    naive = pc.assume_timezone(_cast_each(pc.if_else(zoned, None, text), pa.timestamp("us")), "UTC")
    return pc.if_else(zoned, _cast_each(pc.if_else(zoned, text, None), _UTC), naive)


def _cast_each(text: pa.Array, to: pa.DataType) -> pa.Array:
    """The cast of each value, null where it fails. One bad value fails the cast of a whole
    array, so a failing array is cast in halves, down to the bad values alone: the rest keep
    the cast's speed, and a value's result never depends on its neighbours."""
    try:
        return text.cast(to)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        if len(text) == 1:
            return pa.nulls(1, to)
    middle = len(text) // 2
    return pa.concat_arrays([_cast_each(text[:middle], to), _cast_each(text[middle:], to)])


def standardize(
    path: Path, batch: pa.RecordBatch, first_record: int, extra: dict[str, pa.DataType]
) -> tuple[pa.RecordBatch, np.ndarray]:
    """The six base columns as text, with the contract's defaults (``crawled_at`` as a UTC
    timestamp, null where the input has none or it does not parse), the extra columns (null
    where this file lacks one), ``source_file`` and ``input_row`` (numbered from
    ``first_record`` unless the reader numbered its rows); and which rows have a ``crawled_at``
    that does not parse."""
    # doc_id as it is, byte for byte: " a " and "a" are two ids
    arrays = base_columns(path, batch)
    arrays["title"], arrays["body"] = _nfc(arrays["title"]), _nfc(arrays["body"])
    arrays["crawled_at"], unparsed = _timestamps(arrays["crawled_at"])
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
    standard = pa.RecordBatch.from_arrays(
        [arrays[name] for name in BASE_COLUMNS] + extras + [files, records],
        names=BASE_COLUMNS + list(extra) + ["source_file", "input_row"],
    )
    return standard, unparsed
