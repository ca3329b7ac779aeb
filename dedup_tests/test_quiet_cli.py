"""`dedup run` as a newcomer meets it: its help, and its --input."""

from __future__ import annotations

import sys
from pathlib import Path

from .test_cli import cli_env, run_command  # noqa: F401 (a fixture)

DEDUP = str(Path(sys.executable).with_name("dedup"))


def test_dedup_run_help_is_whole_and_names_every_option():
    result = run_command([DEDUP, "run", "--help"], {})
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "Run the deduplication graph in this process" in text and text.rstrip().endswith("(docs/settings.md)")
    assert "--input PATH input file, folder or glob" in text and "default: env DEDUP_INPUT" in text
    assert "dedup_all: Every asset of the deduplication graph" in text and "rescore: Score the stored" in text


def test_input_sets_the_input_over_dedup_input(cli_env, tmp_path):
    # the environment names the fixture; --input, a file that is not there, wins
    result = run_command([DEDUP, "run", "--input", str(tmp_path / "nowhere.csv")], cli_env)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-2] == (
        f"Error: {tmp_path / 'nowhere.csv'}: no such file. Set DEDUP_INPUT to an input file, folder or glob."
    )
