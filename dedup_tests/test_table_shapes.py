"""Every stored table's columns, pinned to the table layout that writes them: a change of shape
without a new ``TABLE_LAYOUT`` would let this version read a database an older one wrote and fail
on it with DuckDB's raw binder error, where a new layout refuses the old tables with the command
that rebuilds them (``stored_tables/lineage.py``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb

from dedup_assets.core.storage.tables import TABLE_LAYOUT

from .conftest import FIXTURE

SHAPES = Path(__file__).with_name("table_shapes.json")
REWRITE = "DEDUP_WRITE_TABLE_SHAPES"


def _shapes(database: Path) -> dict[str, list[str]]:
    with duckdb.connect(str(database), read_only=True) as connection:
        rows = connection.execute(
            "select table_name, column_name, data_type from information_schema.columns "
            "where table_schema = 'dedup' order by table_name, ordinal_position"
        ).fetchall()
    shapes: dict[str, list[str]] = {}
    for table, column, data_type in rows:
        shapes.setdefault(table, []).append(f"{column} {data_type}")
    return shapes


def test_a_table_changes_shape_only_with_a_new_table_layout(runner):
    assert runner.run(FIXTURE).success
    found = {"table_layout": TABLE_LAYOUT, "tables": _shapes(runner.database)}
    if os.environ.get(REWRITE):
        SHAPES.write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")
    pinned = json.loads(SHAPES.read_text(encoding="utf-8"))
    changed = sorted(
        name for name in {*found["tables"], *pinned["tables"]}
        if found["tables"].get(name) != pinned["tables"].get(name)
    )
    assert not (changed and TABLE_LAYOUT == pinned["table_layout"]), (
        f"tables changed shape at table layout {TABLE_LAYOUT}: {', '.join(changed)}. Raise TABLE_LAYOUT in "
        f"core/storage/tables.py (saying what changed), then write {SHAPES.name} anew: {REWRITE}=1 pytest {Path(__file__).name}"
    )
    assert found == pinned, (
        f"TABLE_LAYOUT is {TABLE_LAYOUT}, {SHAPES.name} pins layout {pinned['table_layout']}: write it anew with "
        f"{REWRITE}=1 pytest {Path(__file__).name}"
    )
