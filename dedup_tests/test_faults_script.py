"""The fault matrix (``python -m dedup_tests.faults``) on a few of its quick, library-level
cases: the table and totals it prints, and an exit status that follows them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import PROJECT_ROOT
from .faults import matrix
from .faults.outcome import Outcome

pytestmark = pytest.mark.faults

# run with cwd=PROJECT_ROOT: the tests are not installed, and python -m finds them there
COMMAND = [sys.executable, "-m", "dedup_tests.faults"]
CASES = [
    "csv_unclosed_quote",
    "csv_short_row",
    "crawled_at_values",
    "missing_input",
    # hostile input (faults/hostile_input.py), some 15 s together
    "jsonl_lone_surrogate",
    "jsonl_gz_huge_line",
    "csv_row_too_large",
    "cp1252_csv",
    "csv_replaced_characters",
    "parquet_int_body",
    "jsonl_number_text",
    "doc_id_control_characters",
    "padded_doc_ids",
    # literal paths, fetches from a loopback server, hot buckets: some 30 s together (the CLI
    # run stopped in a fetch is left out: test_fetch_bounds runs it)
    "bracketed_file_name",
    "starred_file_name",
    "bracketed_input_path",
    "pattern_batch_keys",
    "case_twin_batch_keys",
    "output_inside_input",
    "fetch_trickled_headers",
    "fetch_dot_segment_filename",
    "fetch_redirect_other_port",
    "hot_bucket_refused",
    "hot_bucket_skipped",
    # full disks (faults/disk_faults.py), some 12 s together; dedup_run_full_database
    # runs the CLI twice (13 s) and test_disk_full does already
    "database_full_before_batch",
    "database_full_before_payload",
    "killed_run_temporary_payload",
    "cdx_targets_full_disk",
]


def test_the_fault_matrix_prints_one_row_per_case_and_the_totals():
    result = subprocess.run(
        [*COMMAND, "--quick", "--only", ",".join(CASES)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=600,  # about 90 s here; the bound only tells a hang
    )
    lines = result.stdout.splitlines()
    header = "| case | injected | observed | records lost | release | as expected |"
    assert lines[0] == header, result.stderr
    rows = [line for line in lines[2:] if line.startswith("| ")]
    assert [row.split(" | ")[0].removeprefix("| ") for row in rows] == CASES
    assert all(row.count(" | ") == 5 for row in rows)  # a | inside a cell is escaped
    lost, mixed, unexpected = (
        int(re.search(rf"^{label}: (\d+)", result.stdout, re.M).group(1))
        for label in (
            "records lost or altered without a reject",
            "mixed or corrupt releases",
            "cases not as expected",
        )
    )
    # these faults are handled: nothing lost, no bad release, every case as expected
    assert (lost, mixed, unexpected, result.returncode) == (0, 0, 0, 0), result.stdout
    work_folder = re.search(r"work folder (\S+),", result.stderr).group(1)
    assert not Path(work_folder).exists()  # deleted without --keep


def test_an_unknown_case_is_refused():
    result = subprocess.run(
        [*COMMAND, "--only", "no_such_case"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "no such case: no_such_case" in result.stderr


def test_a_case_not_as_expected_fails_the_matrix(monkeypatch, capsys):
    def wrong(work):
        outcome = Outcome("nothing", "something else", lost=0)
        outcome.expect(False, "it should have been nothing")
        return outcome

    monkeypatch.setattr(matrix, "CASES", [("wrong_case", wrong)])
    assert matrix.main(["--only", "wrong_case"]) == 1
    printed = capsys.readouterr().out
    row = "| wrong_case | nothing | something else | 0 | — | NO: it should have been nothing |"
    assert row in printed.splitlines()
    assert "cases not as expected: 1 (wrong_case)" in printed
