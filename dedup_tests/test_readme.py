"""The README's own-data example, run as a new user would: its command, in a shell, on a CSV with
the column names it describes; and docs/incremental.md's example, run in a project folder of its
own."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest

from .conftest import FIXTURE, PROJECT_ROOT, fixture_as_a_dump
from .test_shown_commands_run import _project



def _example(page: str, marker: str, language: str = "bash", nth: int = 0) -> str:
    """The ``nth`` code block in ``language`` after ``<!-- marker -->`` in ``page`` (relative to
    the project)."""
    text = (PROJECT_ROOT / page).read_text(encoding="utf-8")
    start = text.find(f"<!-- {marker} -->")
    assert start >= 0, f"{page}'s example (after <!-- {marker} -->) is missing"
    blocks = re.findall(rf"^```{language}\n(.*?)^```", text[start:], flags=re.S | re.M)
    assert len(blocks) > nth, f"{page}: no {language} block {nth} after <!-- {marker} -->"
    return blocks[nth]


def _user_home(tmp_path: Path) -> Path:
    """A user's home with the README's ~/pages.csv (the fixture under other column names) and
    beside it the fixture's contract, so the run compares itself with it."""
    home = tmp_path / "home"
    home.mkdir()
    fixture_as_a_dump(home / "pages.csv")
    (home / "pages.expected.json").write_bytes(FIXTURE.with_name("documents.expected.json").read_bytes())
    return home


def _user_shell(home: Path) -> dict:
    # nothing of ours set (DEDUP_SETTINGS included: the run reads dedup.yaml where it runs)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DEDUP_", "DAGSTER_"))}
    return {**env, "HOME": str(home)}


@pytest.mark.slow
def test_the_readme_own_data_example_is_dedup_yaml_and_dedup_run(tmp_path):
    """The README's own data, as a new user follows it: its dedup.yaml written in the project
    folder, then its commands; the fixture without source and domain (a url instead) and under
    other names gives the fixture's results, its contract included."""
    settings = _example("README.md", "own-data", "yaml")
    commands = _example("README.md", "own-data", "bash")
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    # the example names the columns it expects; the file below has exactly those
    assert "`~/pages.csv` with the columns id, text, url, date, headline" in readme
    assert commands.splitlines()[-1] == "dedup run"
    home = _user_home(tmp_path)
    project = _project(tmp_path / "project")
    (project / "dedup.yaml").write_text(settings, encoding="utf-8")
    result = subprocess.run(
        ["bash", "-e", "-c", commands], cwd=project, env=_user_shell(home), capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"fixture_contract: run matches {home / 'pages.expected.json'}" in result.stderr
    counts = json.loads((project / "output" / "manifest.json").read_text())["counts"]
    assert (counts["document_rows"], counts["duplicate_pair_rows"], counts["representative_rows"]) == (24, 18, 12)
    assert result.stdout.splitlines()[-3].startswith("Release files in output/ (manifest.json lists them")
    with duckdb.connect(str(project / "var" / "dedup_assets.duckdb"), read_only=True) as connection:
        filled = connection.execute("select source, domain from dedup.documents order by input_row").fetchall()
    domains = pd.read_csv(FIXTURE, dtype=str)["domain"].tolist()
    assert filled == [("pages.csv", domain) for domain in domains]  # the file's name; the url's host


@pytest.mark.slow
def test_the_readme_incremental_example_splits_runs_batches_and_matches_the_one_shot_run(tmp_path):
    # a project folder of its own (the example writes batches/, output/ and var/ where it runs),
    # with the project's env.sh, fixture and virtualenv
    (tmp_path / "env.sh").write_bytes((PROJECT_ROOT / "env.sh").read_bytes())
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "documents.csv").write_bytes(FIXTURE.read_bytes())
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DEDUP_", "DAGSTER_"))}
    result = subprocess.run(
        ["bash", "-e", "-c", _example("docs/incremental.md", "incremental")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (
        "same_as_incremental: The incremental index's batches (3) found the same 18 edges and the same "
        "clusters as this one-shot run." in result.stderr
    )
    edges = 0
    for key in ("2026-11-01", "2026-11-02", "2026-11-03"):
        manifest = json.loads((tmp_path / "output" / "batches" / key / "manifest.json").read_text())
        assert manifest["batch"] == key and manifest["counts"]["document_rows"] == 8
        edges += manifest["counts"]["duplicate_pairs_within_batch"] + manifest["counts"]["duplicate_pairs_with_earlier"]
    one_shot = json.loads((tmp_path / "output" / "manifest.json").read_text())["counts"]
    assert edges == one_shot["duplicate_pair_rows"] == 18


@pytest.mark.slow
def test_the_readme_own_asset_runs_in_an_empty_folder_and_leaves_only_what_it_announces(tmp_path):
    """The README's definitions.py, in an empty folder of the user's beside the own-data example's
    dedup.yaml, run as the README says, with the project's env.sh sourced; afterwards the folder
    holds only what the README says the run writes."""
    home = _user_home(tmp_path)
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "dedup.yaml").write_text(_example("README.md", "own-data", "yaml"), encoding="utf-8")
    (folder / "definitions.py").write_text(_example("README.md", "own-assets", "python"), encoding="utf-8")
    readme = PROJECT_ROOT.joinpath("README.md").read_text(encoding="utf-8")
    command = re.search(r"`(dagster asset materialize -m definitions .*?)`", readme)
    assert command, "the README says how to run the own-assets example"
    assert "(`. /path/to/dedup-assets/env.sh`)" in readme
    result = subprocess.run(
        ["bash", "-e", "-c", f". {shlex.quote(str(PROJECT_ROOT / 'env.sh'))}\n{command.group(1)}"],
        cwd=folder, env=_user_shell(home), capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    with duckdb.connect(str(folder / "var" / "dedup_assets.duckdb"), read_only=True) as connection:
        kept = [row[0] for row in connection.execute("select doc_id from dedup.deduped_documents").fetchall()]
    received = pq.read_table(folder / "training_set.parquet")
    assert received.column_names == ["doc_id", "body"]
    assert received.column("doc_id").to_pylist() == kept
    assert len(kept) == 12
    announced = (
        "In that folder it writes the tables (`var/dedup_assets.duckdb`; `DEDUP_DATABASE` puts them elsewhere) "
        "and your `training_set.parquet`, and Python may leave its `__pycache__/`"
    )
    assert announced in " ".join(readme.split())
    left = {path.name for path in folder.iterdir()} - {"__pycache__"}  # announced as Python's, if any
    assert left == {"dedup.yaml", "definitions.py", "training_set.parquet", "var"}
    assert [path.name for path in (folder / "var").iterdir()] == ["dedup_assets.duckdb"]
