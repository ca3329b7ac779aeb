"""Shared test helpers: the project's fixtures and a real-DuckDB materialization on tmp_path."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import random
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from dagster import materialize

from dedup_assets.assets import PIPELINE_ASSETS
from dedup_assets.checks import PIPELINE_CHECKS
from dedup_assets.engine_resource import EngineResource
from dedup_assets.settings_resource import DedupSettings
from dedup_assets.stored_tables.tables_io import with_tables_io
from dedup_assets.stored_tables.warehouse import DuckDBWarehouse

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# the tests run from the project folder, where a developer's own dedup.yaml would change every run:
# an empty settings file instead (test_settings_file.py unsets it where it tests the file)
os.environ["DEDUP_SETTINGS"] = os.devnull
FIXTURE = PROJECT_ROOT / "data" / "documents.csv"
HARD_FIXTURE = PROJECT_ROOT / "data" / "hard_cases.csv"
# the fixture's columns under other names, as a user's own file might have them
THEIR_NAMES = {"doc_id": "id", "source": "origin", "domain": "site", "crawled_at": "fetched", "title": "headline", "body": "text"}


class GraphRunner:
    """Materializes (part of) the asset graph into one DuckDB file under ``tmp_path``."""

    def __init__(self, tmp_path: Path):
        self.database = tmp_path / "db" / "pipeline.duckdb"
        self.output_dir = tmp_path / "release"

    def run(
        self, input_path: Path, selection: str | list[str] = "*", raise_on_error=True, instance=None,
        engine_resource=None, **settings,
    ):
        return materialize(
            [*PIPELINE_ASSETS, *PIPELINE_CHECKS],
            selection=selection,
            instance=instance,
            resources=with_tables_io({
                "warehouse": DuckDBWarehouse(database=str(self.database), memory_limit="1GB"),
                "engine": engine_resource or EngineResource(),
                "dedup": DedupSettings(
                    input_path=str(input_path), output_dir=str(self.output_dir), **settings
                ),
            }),
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


def sha256_of_files(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (the deduped documents' parts too) by its path in it: its sha256."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def fixture_as_a_dump(path: Path) -> Path:
    """The fixture with only the columns id, text, url, date, headline, as a user's dump might
    have it: no source, and each domain as the host of a url."""
    fixture = pd.read_csv(FIXTURE, dtype=str, keep_default_na=False)
    pd.DataFrame(
        {
            "id": fixture["doc_id"],
            "text": fixture["body"],
            "url": "https://" + fixture["domain"] + "/pages/" + fixture["doc_id"],
            "date": fixture["crawled_at"],
            "headline": fixture["title"],
        }
    ).to_csv(path, index=False)
    return path


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


def mirror_pages() -> list[dict]:
    """An original and its mirror, crawled a month later with a line more (newer and longer, so
    the keep rule without prefer_domains keeps the mirror), and a page of its own. Jaccard 0.97:
    with rows_per_band 4 they are always candidates."""
    text = " ".join(f"word{n}" for n in range(100))
    return [
        document("original", text, domain="original.com", crawled_at="2026-01-01"),
        document("mirror", text + " mirrored from original", domain="mirror.net", crawled_at="2026-02-01"),
        document("other", " ".join(f"other{n}" for n in range(100)), domain="original.com", crawled_at="2026-01-01"),
    ]


def boilerplate_pages() -> list[dict]:
    """Ten pages that are one shared footer and a few words of their own (near duplicates of
    each other through it), and two unrelated pages that are near duplicates of each other:
    with max_bucket_size 3, the footer's buckets are hot."""
    rng = random.Random(7)
    footer = " ".join(f"footer{n}" for n in range(150))
    rows = [document(f"page{n}", f"{' '.join(f'own{n}x{w}' for w in range(6))} {footer}") for n in range(10)]
    story = " ".join(f"story{rng.randrange(10_000)}" for _ in range(120))
    return rows + [document("story-a", story), document("story-b", story + " one more line at the end")]


TEXT_OF_A_HUNDRED = " ".join(f"word{n}" for n in range(100))
OTHER_OF_A_HUNDRED = " ".join(f"other{n}" for n in range(100))


def _page(doc_id: str, body: str, quality, crawled_at: str = "2026-01-01") -> dict:
    return {**document(doc_id, body, crawled_at=crawled_at), "quality": quality}


def scored_pages() -> list[dict]:
    """Two clusters and a page of its own. Cluster a: the best quality is neither the newest nor
    the longest; one copy has no score. Cluster b: two copies tie on quality, the newer wins."""
    return [
        _page("a-low", TEXT_OF_A_HUNDRED + " one", 0.42, "2026-05-01"),
        _page("a-best", TEXT_OF_A_HUNDRED, 0.91),
        _page("a-unscored", TEXT_OF_A_HUNDRED + " one two three", None, "2026-06-01"),
        _page("a-mid", TEXT_OF_A_HUNDRED + " two", 0.7),
        _page("b-worst", OTHER_OF_A_HUNDRED + " x", 0.1, "2026-09-01"),
        _page("b-new", OTHER_OF_A_HUNDRED, 0.2, "2026-03-01"),
        _page("b-old", OTHER_OF_A_HUNDRED + " y", 0.2, "2026-02-01"),
        _page("alone", " ".join(f"alone{n}" for n in range(100)), 0.5),
    ]


# Han characters and kana for pages without spaces (chinese_pages)
HAN = [chr(0x4E00 + offset) for offset in range(2_000)]
KANA = [chr(code) for code in range(0x3041, 0x3097)]


def page_without_spaces(rng: random.Random) -> str:
    """150 to 400 characters of Han and kana with full-width punctuation, no spaces."""
    characters = [rng.choice(HAN if rng.random() < 0.7 else KANA) for _ in range(rng.randrange(150, 400))]
    for position in range(rng.randrange(8, 20), len(characters), rng.randrange(9, 25)):
        characters[position] = rng.choice("，。、！？")
    return "".join(characters)


def chinese_pages(pages: int = 120, seed: int = 36) -> list[dict]:
    """Pages without spaces, a near-duplicate of each of half of them (1% to 6% of characters
    replaced, so some fall below the threshold) and a few exact copies, in a seeded order."""
    rng = random.Random(seed)
    rows = [document(f"zh-{index:03d}", page_without_spaces(rng)) for index in range(pages)]
    for row in rows[: pages // 2]:
        characters = list(row["body"])
        for _ in range(max(1, round(rng.uniform(0.01, 0.06) * len(characters)))):
            characters[rng.randrange(len(characters))] = rng.choice(HAN)
        rows.append(document(f"{row['doc_id']}-edit", "".join(characters), crawled_at="2026-02-01"))
    rows += [document(f"{row['doc_id']}-copy", row["body"], crawled_at="2025-12-01") for row in rows[:10]]
    rng.shuffle(rows)
    return rows


def require_ray():
    """Ray and Daft, which runs the steps on it: a skip where the ray extra is not installed, a
    failure where DEDUP_REQUIRE_RAY says it must be (CI)."""
    if os.environ.get("DEDUP_REQUIRE_RAY"):
        importlib.import_module("daft")
        return importlib.import_module("ray")
    pytest.importorskip("daft")
    return pytest.importorskip("ray")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    # the ray tier's tests share a worker, so that `--dist loadgroup` starts one cluster, not one
    # per worker (tryfirst: xdist reads the groups in this same hook)
    for item in items:
        if item.get_closest_marker("ray"):
            item.add_marker(pytest.mark.xdist_group("ray"))


@pytest.fixture(scope="session")
def ray_cluster():
    """A real multi-node Ray cluster on this machine: a head and one more node, one CPU and
    200 MB of object store each, shared by the session's Ray tests and shut down after them."""
    ray = require_ray()
    from ray.cluster_utils import Cluster

    from dedup_assets.core.distributed.session import LOCAL_SYSTEM_CONFIG

    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "object_store_memory": 200 * 2**20,
            "include_dashboard": False,
            "_system_config": LOCAL_SYSTEM_CONFIG,
        },
    )
    try:
        cluster.add_node(num_cpus=1, object_store_memory=200 * 2**20)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
