"""The README's own-data example, run as a new user would: its command, in a shell, on a CSV with
the column names it describes; and docs/incremental.md's example, run in a project folder of its
own."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from .conftest import FIXTURE, PROJECT_ROOT, THEIR_NAMES



def _own_data_example() -> str:
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- own-data -->\n```bash\n(.*?)```", readme, flags=re.S)
    assert found, "the README's own-data example (after <!-- own-data -->) is missing"
    return found.group(1)


def test_the_readme_own_data_example_deduplicates_a_csv_with_other_column_names(tmp_path):
    example = _own_data_example()
    # the example names the columns it expects; the file below has exactly those
    assert "id, origin, site, fetched, headline, text" in example
    home = tmp_path / "home"
    home.mkdir()
    pd.read_csv(FIXTURE).rename(columns=THEIR_NAMES).to_csv(home / "pages.csv", index=False)
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
    counts = json.loads((tmp_path / "release" / "manifest.json").read_text())["counts"]
    assert (counts["document_rows"], counts["duplicate_pair_rows"], counts["representative_rows"]) == (24, 18, 12)


def _incremental_example() -> str:
    page = (PROJECT_ROOT / "docs" / "incremental.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- incremental -->\n```bash\n(.*?)```", page, flags=re.S)
    assert found, "docs/incremental.md's example (after <!-- incremental -->) is missing"
    return found.group(1)


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
        ["bash", "-e", "-c", _incremental_example()], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
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
