"""Global candidate generation: a DuckDB self-join on LSH band keys, guarded by a pair budget."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd

_SQL_DIR = Path(__file__).parent
CANDIDATE_COLUMNS = ["left_doc_id", "right_doc_id", "left_domain", "right_domain", "shared_bands"]


class PairBudgetExceeded(RuntimeError):
    """The band buckets would create more self-join rows than the configured budget allows."""


@dataclass(frozen=True)
class BucketPressure:
    pair_slots: int
    largest_bucket_size: int
    largest_bucket_key: str | None
    bucket_count: int


def _sql(name: str) -> str:
    return (_SQL_DIR / name).read_text(encoding="utf-8")


def _connect(band_memberships: pd.DataFrame) -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect(":memory:")
    connection.register("band_memberships", band_memberships)
    return connection


def bucket_pressure(band_memberships: pd.DataFrame) -> BucketPressure:
    with _connect(band_memberships) as connection:
        row = connection.execute(_sql("bucket_pressure.sql")).fetchone()
    return BucketPressure(int(row[0]), int(row[1]), row[2], int(row[3]))


def ensure_within_budget(pressure: BucketPressure, max_pair_slots: int) -> None:
    if pressure.pair_slots > max_pair_slots:
        raise PairBudgetExceeded(
            f"LSH buckets would create {pressure.pair_slots:,} band-level pair slots, above "
            f"max_pair_slots={max_pair_slots:,}. The worst bucket is {pressure.largest_bucket_key} "
            f"with {pressure.largest_bucket_size:,} documents (likely shared boilerplate or many "
            "empty-ish pages). Strip that boilerplate, raise rows_per_band to make buckets "
            "stricter, or raise max_pair_slots if you have the memory."
        )


def candidate_pairs(band_memberships: pd.DataFrame) -> pd.DataFrame:
    """All pairs sharing a band, with the number of shared bands, ordered by (left, right)."""
    with _connect(band_memberships) as connection:
        frame = connection.execute(_sql("candidate_pairs.sql")).fetchdf()
    return frame.astype({"shared_bands": "int32"})[CANDIDATE_COLUMNS]
