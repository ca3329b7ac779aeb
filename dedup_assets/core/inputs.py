"""Reading and validating the document input (CSV or Parquet with the six base columns)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

REQUIRED_COLUMNS = ["doc_id", "source", "domain", "crawled_at", "title", "body"]
SUPPORTED_SUFFIXES = (".csv", ".parquet")
_EXAMPLES_SHOWN = 5


class InputError(ValueError):
    """The input cannot be used as it is; the message says where and what to fix."""


@dataclass(frozen=True)
class InputFile:
    path: str
    byte_size: int
    sha256: str


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def describe_input(path: Path) -> InputFile:
    return InputFile(str(path), path.stat().st_size, file_sha256(path))


def _row_label(path: Path, index: int) -> str:
    # CSV line numbers count the header; Parquet rows are 1-based positions.
    if path.suffix.lower() == ".csv":
        return f"line {index + 2}"
    return f"row {index + 1}"


def _rows_list(path: Path, indexes, limit: int = _EXAMPLES_SHOWN) -> str:
    labels = [_row_label(path, int(i)) for i in list(indexes)[:limit]]
    more = len(indexes) - len(labels)
    return ", ".join(labels) + (f" and {more} more" if more > 0 else "")


def _read_raw(path: Path) -> pd.DataFrame:
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise InputError(
            f"{path}: unsupported file type '{path.suffix or '(none)'}'. Give a .csv or .parquet "
            "file with the columns " + ", ".join(REQUIRED_COLUMNS) + " (set DEDUP_INPUT)."
        )
    if not path.exists():
        raise InputError(f"{path}: no such file. Set DEDUP_INPUT to a CSV or Parquet file.")
    if not path.is_file():
        raise InputError(f"{path}: not a file. Set DEDUP_INPUT to a CSV or Parquet file.")
    if path.stat().st_size == 0:
        raise InputError(
            f"{path}: the file is empty. Expected a header row with the columns "
            + ", ".join(REQUIRED_COLUMNS)
            + " and one row per document."
        )
    try:
        if suffix == ".csv":
            return pd.read_csv(
                path, dtype=str, keep_default_na=False, encoding="utf-8-sig", na_filter=False
            )
        return pq.read_table(path).to_pandas()
    except UnicodeDecodeError as error:
        raise InputError(
            f"{path}: not valid UTF-8 at byte {error.start}. Re-encode the file as UTF-8."
        ) from error
    except (pd.errors.ParserError, pd.errors.EmptyDataError, pa.ArrowInvalid, OSError) as error:
        kind = "CSV" if suffix == ".csv" else "Parquet"
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InputError(f"{path}: cannot be read as {kind}: {first_line}") from error


def _as_text(column: pd.Series) -> pd.Series:
    """Strings, with missing values (None, NaN, NA) as empty text."""
    return column.map(lambda value: "" if pd.isna(value) else str(value))


def read_documents(path: Path) -> pd.DataFrame:
    """Validated documents ordered by ``doc_id``.

    Base columns become text, ``crawled_at`` becomes a UTC timestamp (stored without zone), and any
    extra columns (for example WARC lineage) are carried through unchanged after the base columns.
    Raises :class:`InputError` naming the file, column or rows at fault.
    """
    raw = _read_raw(path)
    missing = [column for column in REQUIRED_COLUMNS if column not in raw.columns]
    if missing:
        raise InputError(
            f"{path}: missing required column(s) {', '.join(missing)}. Found: "
            f"{', '.join(map(str, raw.columns)) or '(none)'}. Every input needs "
            + ", ".join(REQUIRED_COLUMNS)
            + "."
        )
    if raw.empty:
        raise InputError(f"{path}: has a header but no document rows.")

    documents = raw.reset_index(drop=True).copy()
    for column in REQUIRED_COLUMNS:
        documents[column] = _as_text(documents[column])
    documents["doc_id"] = documents["doc_id"].str.strip()

    blank_ids = documents.index[documents["doc_id"] == ""]
    if len(blank_ids):
        raise InputError(
            f"{path}: column doc_id is empty at {_rows_list(path, blank_ids)}. "
            "Every document needs a unique, non-empty doc_id."
        )
    repeated = documents["doc_id"].duplicated(keep=False)
    if repeated.any():
        first = documents.loc[repeated, "doc_id"].iloc[0]
        rows = documents.index[documents["doc_id"] == first]
        count = documents.loc[repeated, "doc_id"].nunique()
        raise InputError(
            f"{path}: column doc_id has {count} repeated value(s); for example '{first}' at "
            f"{_rows_list(path, rows)}. Give each document a unique doc_id."
        )

    crawled = pd.to_datetime(documents["crawled_at"], utc=True, errors="coerce", format="ISO8601")
    bad_dates = documents.index[crawled.isna()]
    if len(bad_dates):
        first = documents.loc[bad_dates[0], "crawled_at"]
        raise InputError(
            f"{path}: column crawled_at cannot be parsed at {_rows_list(path, bad_dates)} "
            f"(first value: '{first}'). Use ISO 8601, for example 2026-01-31 or "
            "2026-01-31T12:00:00Z."
        )
    documents["crawled_at"] = crawled.dt.tz_convert(None).astype("datetime64[us]")

    extra = [column for column in documents.columns if column not in REQUIRED_COLUMNS]
    documents = documents[REQUIRED_COLUMNS + extra]
    return documents.sort_values("doc_id", kind="mergesort", ignore_index=True)
