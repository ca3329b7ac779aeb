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



def _example(page: str, marker: str, language: str = "bash") -> str:
    """The code block after ``<!-- marker -->`` in ``page`` (relative to the project)."""
    text = (PROJECT_ROOT / page).read_text(encoding="utf-8")
    found = re.search(rf"<!-- {marker} -->\n```{language}\n(.*?)```", text, flags=re.S)
    assert found, f"{page}'s example (after <!-- {marker} -->) is missing"
    return found.group(1)


def test_the_readme_own_data_example_deduplicates_a_csv_of_only_id_text_url_date_headline(tmp_path):
    """The input contract's figure: the fixture without source and domain (a url instead) and
    under other names gives the fixture's results, its fixture_contract check included."""
    example = _example("README.md", "own-data")
    # the example names the columns it expects; the file below has exactly those
    assert "id, text, url, date, headline" in example
    home = tmp_path / "home"
    home.mkdir()
    fixture_as_a_dump(home / "pages.csv")
    (home / "pages.expected.json").write_bytes(FIXTURE.with_name("documents.expected.json").read_bytes())
    (home / ".dagster").mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "DAGSTER_HOME": str(home / ".dagster"),
        "DEDUP_DATABASE": str(tmp_path / "own.duckdb"),
        "DEDUP_OUTPUT_DIR": str(tmp_path / "release"),
    }
    (home / ".dagster" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    result = subprocess.run(
        ["bash", "-e", "-c", example], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Asset check 'fixture_contract' on 'manifest' passed" in result.stderr
    counts = json.loads((tmp_path / "release" / "manifest.json").read_text())["counts"]
    assert (counts["document_rows"], counts["duplicate_pair_rows"], counts["representative_rows"]) == (24, 18, 12)
    with duckdb.connect(str(tmp_path / "own.duckdb"), read_only=True) as connection:
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


def test_the_readme_own_asset_receives_the_kept_documents_in_a_project_of_its_own(tmp_path):
    """The README's definitions.py, in a folder of its own with only the input at the default
    path: no .env, no DEDUP_* variable, the real CLI."""
    project, home = tmp_path / "project", tmp_path / "dagster_home"
    (project / "data").mkdir(parents=True)
    (project / "data" / "documents.csv").write_bytes(FIXTURE.read_bytes())
    (project / "definitions.py").write_text(_example("README.md", "own-assets", "python"))
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DEDUP_", "DAGSTER_"))}
    command = re.search(r"`(dagster asset materialize -m definitions .*?)`", PROJECT_ROOT.joinpath("README.md").read_text())
    assert command, "the README says how to run the own-assets example"
    result = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), *shlex.split(command.group(1))[1:]],
        cwd=project, env={**env, "DAGSTER_HOME": str(home)}, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    with duckdb.connect(str(project / "var" / "dedup_assets.duckdb"), read_only=True) as connection:
        kept = [row[0] for row in connection.execute("select doc_id from dedup.deduped_documents").fetchall()]
    received = pq.read_table(project / "training_set.parquet")
    assert received.column_names == ["doc_id", "body"]
    assert received.column("doc_id").to_pylist() == kept
    assert len(kept) == 12
