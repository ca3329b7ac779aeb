"""The ray engine's tables as Daft dataframes, for the steps that run on Daft's Ray runner
(``ray_candidates.py``, ``ray_verify.py``, the cluster's components in ``components.py``): read
from and written to the same Parquet folders (``datasets.py``) that the Ray Data steps read and
write, which is how the two engines hand tables to each other."""

from __future__ import annotations

import re
from pathlib import Path

import daft
import pyarrow as pa

from .datasets import replace_table, table_folder


def frame(root: Path, table: str, columns: list[str] | None = None) -> daft.DataFrame:
    """``table`` of the folder ``root`` as a Daft dataframe."""
    # Daft reads every path as a glob: each mark in the folder's name alone in brackets matches itself
    folder = re.sub(r"([][*?{}\\])", r"[\1]", str(table_folder(root, table)))
    read = daft.read_parquet(f"{folder}/*.parquet")
    return read.select(*columns) if columns else read


def write_frames(root: Path, table: str, frames: list[daft.DataFrame], schema: pa.Schema) -> None:
    """Write Daft dataframes, one after the other, as ``table`` with ``schema``'s columns and
    types (strings as Daft's large strings, which DuckDB and Ray Data read alike). Daft names and
    orders its files as it likes: for tables whose view sorts (the pair tables) or whose order
    no one reads (first_copies)."""

    def write(folder: Path) -> None:
        for written in frames:
            typed = written.select(*[daft.col(field.name).cast(daft.DataType.from_arrow_type(field.type)) for field in schema])
            typed.write_parquet(str(folder), write_mode="append")

    replace_table(root, table, write, schema)
