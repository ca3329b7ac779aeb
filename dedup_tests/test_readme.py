"""The README's own-data example, run as a new user would: its command, in a shell, on a CSV with
the column names it describes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd

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
