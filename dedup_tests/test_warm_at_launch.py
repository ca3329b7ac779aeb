"""A plain `pip install` has no compiled kernels: the run launchers compile them before the first
step, say so, and no step compiles (issue 35). A fresh copy of the package, with an empty numba
cache, run through each launcher."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dedup_assets.launch.warm import COMPILE_LINE

from .conftest import FIXTURE, PROJECT_ROOT

DAGSTER = str(Path(sys.executable).parent / "dagster")
LAUNCHERS = {
    "dedup run": [sys.executable, "-m", "dedup_assets.cli", "run"],
    "dagster asset materialize": [
        DAGSTER, "asset", "materialize", "-m", "dedup_assets.definitions", "--select", "group:deduplication",
    ],
}
# numba's own line for every compiled signature it writes to its cache (NUMBA_DEBUG_CACHE)
SAVED = "[cache] data saved to"
STEP_MARKS = ("Started execution of step", "  documents (")


@pytest.mark.slow
@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_fresh_install_compiles_before_the_first_step_and_says_so(tmp_path, launcher):
    package = tmp_path / "site"
    shutil.copytree(PROJECT_ROOT / "dedup_assets", package / "dedup_assets", ignore=shutil.ignore_patterns("__pycache__"))
    home = tmp_path / "dagster_home"
    home.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(package),  # ahead of the editable install's finder
        "PYTHONUNBUFFERED": "1",  # numba's lines (stdout) and the run's (stderr) in the order written
        "NUMBA_CACHE_DIR": str(tmp_path / "numba"),
        "NUMBA_DEBUG_CACHE": "1",
        "DAGSTER_HOME": str(home),
        "DEDUP_SETTINGS": os.devnull,
        "DEDUP_INPUT": str(FIXTURE),
        "DEDUP_DATABASE": str(tmp_path / "run.duckdb"),
        "DEDUP_OUTPUT_DIR": str(tmp_path / "out"),
    }
    run = subprocess.run(
        LAUNCHERS[launcher], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=900,
    )
    assert run.returncode == 0, run.stdout[-3000:]
    lines = run.stdout.splitlines()
    # numba names a cache folder by the SHA-1 of the kernels' source folder: the copy's, not the project's
    copy_kernels = hashlib.sha1(str(package / "dedup_assets" / "core" / "sketch").encode()).hexdigest()
    assert any(copy_kernels in line for line in lines if SAVED in line), "the copy's kernels were not the ones cached"
    first_step = next(index for index, line in enumerate(lines) if any(mark in line for mark in STEP_MARKS))
    said = [index for index, line in enumerate(lines) if COMPILE_LINE in line]
    saved = [index for index, line in enumerate(lines) if SAVED in line]
    assert len(said) == 1 and said[0] < first_step, lines[: first_step + 1]
    # (one small kernel compiles at import, core/verify/jaccard.py's seeds, before anything is said)
    assert any(index > said[0] for index in saved), "nothing compiled after the line"
    assert max(saved) < first_step, [lines[index] for index in saved if index > first_step]
    assert "inside the step" not in run.stdout
