"""The ray engine's tables: each a folder of Parquet files (``datasets.py``), read and written as
Daft dataframes (``daft_tables.py``) and handed to DuckDB as a view in the DuckDB engine's row
order; their schemas."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ..storage.store import TableBuild
from .datasets import POSITION, view_build

PAIR_SCHEMA = pa.schema(
    [
        ("left_doc_id", pa.string()),
        ("right_doc_id", pa.string()),
        ("left_domain", pa.string()),
        ("right_domain", pa.string()),
        ("shared_bands", pa.int32()),
        ("found_by", pa.string()),
    ]
)
SCORED_SCHEMA = PAIR_SCHEMA.append(pa.field("jaccard", pa.float64())).append(
    pa.field("signature_overlap", pa.float64())
).append(pa.field("is_exact", pa.bool_())).append(pa.field("is_duplicate", pa.bool_())).append(
    pa.field("reason", pa.string())
)
# the tables ordered by pair, and by input position
PAIR_TABLES = ("candidate_pairs", "scored_pairs", "duplicate_pairs")
POSITION_TABLES = ("documents", "fingerprinted", "clusters")
FIRST_COPIES_SCHEMA = pa.schema([("doc_id", pa.string()), ("first_copy_doc_id", pa.string())])
CLUSTER_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("source_file", pa.string()),
        ("input_row", pa.int64()),
        ("cluster_id", pa.string()),
        ("cluster_size", pa.int64()),
        ("crawled_at", pa.timestamp("us")),
        ("token_count", pa.int32()),
        ("representative_rank", pa.int64()),
        ("representative_doc_id", pa.string()),
        ("decision", pa.string()),
        ("jaccard_to_representative", pa.float64()),
        ("chained", pa.bool_()),
        ("keep_reason", pa.string()),
        (POSITION, pa.int64()),
    ]
)


@dataclass(frozen=True)
class RayTables:
    """The folder of every table the ray engine writes, and how many partitions the clusters
    step's ranking spreads its components over."""

    root: Path
    partitions: int

    def view(self, table: str, **casts: str) -> TableBuild:
        """The table's DuckDB view, in the DuckDB engine's row order."""
        order = ("left_doc_id", "right_doc_id") if table in PAIR_TABLES else (POSITION,) if table in POSITION_TABLES else ()
        return view_build(self.root, table, order, casts)


def ordered_pairs(left: pa.ChunkedArray, right: pa.ChunkedArray) -> tuple[pa.Array, pa.Array]:
    swap = pc.greater(left, right)
    return pc.if_else(swap, right, left), pc.if_else(swap, left, right)
