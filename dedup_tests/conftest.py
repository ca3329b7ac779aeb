"""Shared test helpers: the project's fixtures and a real-DuckDB materialization on tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from dagster import materialize

from dedup_assets.assets import PIPELINE_ASSETS
from dedup_assets.checks import PIPELINE_CHECKS
from dedup_assets.settings import DedupSettings
from dedup_assets.warehouse import DuckDBWarehouse

PROJECT_ROOT = Path(__file__).resolve().parent.parent
FIXTURE = PROJECT_ROOT / "data" / "documents.csv"
HARD_FIXTURE = PROJECT_ROOT / "data" / "hard_cases.csv"
# the fixture's columns under other names, as a user's own file might have them
THEIR_NAMES = {"doc_id": "id", "source": "origin", "domain": "site", "crawled_at": "fetched", "title": "headline", "body": "text"}


class GraphRunner:
    """Materializes (part of) the asset graph into one DuckDB file under ``tmp_path``."""

    def __init__(self, tmp_path: Path):
        self.database = tmp_path / "db" / "pipeline.duckdb"
        self.output_dir = tmp_path / "release"

    def run(self, input_path: Path, selection: str | list[str] = "*", raise_on_error=True, instance=None, **settings):
        return materialize(
            [*PIPELINE_ASSETS, *PIPELINE_CHECKS],
            selection=selection,
            instance=instance,
            resources={
                "warehouse": DuckDBWarehouse(database=str(self.database), memory_limit="1GB"),
                "dedup": DedupSettings(
                    input_path=str(input_path), output_dir=str(self.output_dir), **settings
                ),
            },
            raise_on_error=raise_on_error,
        )

    def table(self, name: str) -> pd.DataFrame:
        with duckdb.connect(str(self.database), read_only=True) as connection:
            return connection.execute(f"select * from dedup.{name}").fetchdf()

    def lineage(self, name: str) -> dict:
        with duckdb.connect(str(self.database), read_only=True) as connection:
            row = connection.execute(
                "select lineage from dedup.asset_lineage where table_name = ?", [name]
            ).fetchall()
        return json.loads(row[0][0])

    def manifest(self) -> dict:
        return json.loads((self.output_dir / "manifest.json").read_text(encoding="utf-8"))


def fixture_with_a_wrong_contract(folder: Path) -> Path:
    """The fixture beside a contract that expects 13 clusters where the run makes 12."""
    fixture = folder / "documents.csv"
    fixture.write_bytes(FIXTURE.read_bytes())
    contract = json.loads(FIXTURE.with_name("documents.expected.json").read_text())
    contract["counts"]["cluster_count"] = 13
    fixture.with_name("documents.expected.json").write_text(json.dumps(contract))
    return fixture


@pytest.fixture
def runner(tmp_path: Path) -> GraphRunner:
    return GraphRunner(tmp_path)


def write_csv(path: Path, rows: list[dict], columns: list[str] | None = None) -> Path:
    frame = pd.DataFrame(rows, columns=columns)
    frame.to_csv(path, index=False)
    return path


def document(doc_id: str, body: str, domain: str = "example.com", crawled_at: str = "2026-01-01", **extra) -> dict:
    return {
        "doc_id": doc_id,
        "source": "test",
        "domain": domain,
        "crawled_at": crawled_at,
        "title": doc_id,
        "body": body,
        **extra,
    }
