"""End-to-end runs of the real `dagster asset materialize` CLI in a subprocess."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import duckdb
import pytest
from dagster import AssetKey, DagsterInstance

from .conftest import FIXTURE, PROJECT_ROOT, document, write_csv, fixture_with_a_wrong_contract

DAGSTER = str(Path(sys.executable).parent / "dagster")
DG = str(Path(sys.executable).parent / "dg")
DEDUP = str(Path(sys.executable).parent / "dedup")
MODULE = ["-m", "dedup_assets.definitions"]


@pytest.fixture
def cli_env(tmp_path) -> dict:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "DEDUP_INPUT": str(FIXTURE),
        "DEDUP_DATABASE": str(tmp_path / "var" / "cli.duckdb"),
        "DEDUP_OUTPUT_DIR": str(tmp_path / "out"),
        "DEDUP_DUCKDB_MEMORY": "1GB",
    }


def run_command(command: list[str], env: dict, cwd: Path = PROJECT_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def materialize(env: dict, *args: str, cwd: Path = PROJECT_ROOT) -> subprocess.CompletedProcess:
    return run_command([DAGSTER, "asset", "materialize", *args], env, cwd)


@pytest.mark.slow  # a whole graph through the dagster CLI, twice: 16-18 s of the fast tier's 5 min
def test_full_run_then_single_asset_rerun(cli_env):
    full = materialize(cli_env, *MODULE, "--select", "group:deduplication")
    assert full.returncode == 0, full.stderr[-3000:]
    manifest = json.loads((Path(cli_env["DEDUP_OUTPUT_DIR"]) / "manifest.json").read_text())
    counts = manifest["counts"]
    assert (
        counts["document_rows"],
        counts["possible_pair_rows"],
        counts["candidate_pair_rows"],
        counts["duplicate_pair_rows"],
        counts["exact_duplicate_pair_rows"],
        counts["near_duplicate_pair_rows"],
        counts["cluster_count"],
        counts["representative_rows"],
    ) == (24, 276, 18, 18, 6, 12, 12, 12)
    assert "Asset check 'fixture_contract' on 'manifest' passed" in full.stderr
    assert {o["file"] for o in manifest["outputs"]} == {
        "fingerprinted.parquet",
        "candidate_summary.csv",
        "scored_pairs.parquet",
        "duplicate_pairs.csv",
        "clusters.csv",
        "cluster_inspection.csv",
        "deduped_documents/part-00000.parquet",
        "rejected_documents.csv",
        "missed_pairs.csv",
        "recall_audit.json",
        "collision_buckets.csv",
        "domain_summary.csv",
        "duplicate_summary.csv",
        "evaluation.json",
        "evaluation_errors.csv",
        "scurve.png",
        "jaccard_histogram.png",
        "cluster_sizes.png",
        "boilerplate.csv",
        "template_clusters.csv",
        "boilerplate.png",
        "reference_matches.csv",
    }
    with duckdb.connect(cli_env["DEDUP_DATABASE"], read_only=True) as connection:
        assert connection.execute("select count(*) from dedup.deduped_documents").fetchone()[0] == 12

    # As a user types it after `. ./env.sh`: no -m, the module comes from the environment.
    rerun = materialize(
        {**cli_env, "DAGSTER_CLI_ASSET_MATERIALIZE_MODULE_NAME": "dedup_assets.definitions"},
        "--select",
        "deduped_documents",
    )
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert 'STEP_START - Started execution of step "deduped_documents"' in rerun.stderr
    assert 'Started execution of step "fingerprinted"' not in rerun.stderr


def _rows(env: dict, table: str) -> int:
    with duckdb.connect(env["DEDUP_DATABASE"], read_only=True) as connection:
        return connection.execute(f"select count(*) from dedup.{table}").fetchone()[0]


def _refusal_without_traceback(result: subprocess.CompletedProcess, message: str) -> None:
    """A refused run of the Dagster CLI: ``message`` said by the step's failure and again by the
    run's, last before the CLI's own line, and no stack trace."""
    assert result.returncode != 0
    lines = result.stderr.splitlines()
    said = [at for at, line in enumerate(lines) if message in line]
    assert len(said) == 2, result.stderr[-3000:]
    assert lines[-1] == "Error: Materialization failed." and " - RUN_FAILURE - " in lines[said[-1] - 2]
    assert "Stack Trace" not in result.stderr and "Traceback" not in result.stderr


THRESHOLD_09 = '{"resources": {"dedup": {"config": {"jaccard_threshold": 0.9}}}}'


def _printed_run(result: subprocess.CompletedProcess) -> list[str]:
    """The command a refusal gives (``Run: …``), as the shell splits it."""
    return shlex.split(re.search(r"^Run: (dagster .*)$", result.stderr, flags=re.M).group(1))


@pytest.mark.slow  # a whole graph through the dagster CLI, twice: 16-18 s of the fast tier's 5 min
def test_fresh_database_single_asset_says_how_to_build_upstream_and_that_command_runs(cli_env):
    result = materialize(cli_env, *MODULE, "--select", "deduped_documents")
    _refusal_without_traceback(result, "has not been materialized into this database")
    # the command as printed, run as a user would paste it (it selects documents but not
    # rejected_documents, so the documents step runs as a subset of its multi-asset); the input,
    # named by DEDUP_INPUT, goes with it
    printed = _printed_run(result)
    assert printed[:7] == ["dagster", "asset", "materialize", "-m", "dedup_assets.definitions", "--select", "*deduped_documents"]
    assert json.loads(printed[-1]) == {"resources": {"dedup": {"config": {"input_path": cli_env["DEDUP_INPUT"]}}}}
    built = run_command([DAGSTER, *printed[1:]], cli_env)
    assert built.returncode == 0, built.stderr[-3000:]
    assert (_rows(cli_env, "documents"), _rows(cli_env, "deduped_documents")) == (24, 12)
    # other settings than the stored tables': refused the same way, with the rebuild that carries them
    stale = materialize(cli_env, *MODULE, "--select", "deduped_documents", "--config-json", THRESHOLD_09)
    _refusal_without_traceback(stale, "Cannot build deduped_documents from tables made with other settings")
    rebuild = _printed_run(stale)
    assert rebuild[5:7] == ["--select", "scored_pairs*"]
    config = {"input_path": cli_env["DEDUP_INPUT"], "jaccard_threshold": 0.9}
    assert json.loads(rebuild[-1]) == {"resources": {"dedup": {"config": config}}}


def test_documents_alone_writes_and_records_rejected_documents_too(cli_env):
    """Either table of the one read may be selected alone; both are written, and Dagster is told
    of both, so neither is older than the other."""
    result = materialize(cli_env, *MODULE, "--select", "documents")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (_rows(cli_env, "documents"), _rows(cli_env, "rejected_documents")) == (24, 0)
    with DagsterInstance.from_config(cli_env["DAGSTER_HOME"]) as instance:
        events = {name: instance.get_latest_materialization_event(AssetKey(name)) for name in ("documents", "rejected_documents")}
    assert events["documents"].run_id == events["rejected_documents"].run_id
    assert events["rejected_documents"].asset_materialization.description.startswith("Written from the same read")


@pytest.mark.slow
@pytest.mark.parametrize(
    "command, selection, built",
    [
        (DAGSTER, "rejected_documents", "rejected_documents"),
        (DAGSTER, "documents*", "deduped_documents"),
        (DG, "*deduped_documents", "deduped_documents"),
        # docs/tuning.md's selection of the one-shot graph and the sweep
        (DAGSTER, "group:deduplication or group:tuning", "parameter_sweep"),
    ],
)
def test_selections_the_docs_give_run_on_a_fresh_database(cli_env, command, selection, built):
    args = ["launch", "--assets", selection] if command == DG else ["asset", "materialize", *MODULE, "--select", selection]
    result = run_command([command, *args], cli_env)
    assert result.returncode == 0, result.stderr[-3000:]
    with DagsterInstance.from_config(cli_env["DAGSTER_HOME"]) as instance:
        assert instance.get_latest_materialization_event(AssetKey(built)) is not None
    assert _rows(cli_env, "rejected_documents") == 0 and _rows(cli_env, "documents") == 24


def test_bad_input_reports_file_and_row(cli_env, tmp_path):
    bad = write_csv(tmp_path / "bad.csv", [document("a", "x"), document("b", "y", crawled_at="31/12/2026")])
    env = {**cli_env, "DEDUP_INPUT": str(bad)}
    lenient = materialize(env, *MODULE, "--select", "documents,rejected_documents")
    assert lenient.returncode == 0, lenient.stderr[-3000:]
    assert "1 of 2 input rows rejected: invalid_crawled_at 1 (see rejected_documents)" in lenient.stderr
    strict = '{"resources": {"dedup": {"config": {"fail_on_reject": true}}}}'
    result = materialize(env, *MODULE, "--select", "documents,rejected_documents", "--config-json", strict)
    assert result.returncode != 0
    assert f"{bad}: column crawled_at cannot be parsed at row 2 (doc_id 'b')" in result.stderr


@pytest.mark.slow
def test_the_warehouse_needs_no_environment_variable_and_a_dotenv_file_overrides_its_default(cli_env, tmp_path):
    """Started from a folder without a .env and with neither DEDUP_DATABASE nor
    DEDUP_DUCKDB_MEMORY set, the run uses the defaults (var/dedup_assets.duckdb there); a .env
    in the folder that sets the database wins over the default (the other CLI tests show that a
    value set in the environment does)."""
    folder = tmp_path / "project"
    folder.mkdir()
    env = {key: value for key, value in cli_env.items() if key not in ("DEDUP_DATABASE", "DEDUP_DUCKDB_MEMORY")}
    selection = ("--select", "documents,rejected_documents")
    for dotenv, database in ((None, "var/dedup_assets.duckdb"), ("DEDUP_DATABASE=var/other.duckdb\n", "var/other.duckdb")):
        if dotenv:
            (folder / ".env").write_text(dotenv)
        result = materialize(env, *MODULE, *selection, cwd=folder)
        assert result.returncode == 0, result.stderr[-3000:]
        with duckdb.connect(str(folder / database), read_only=True) as connection:
            assert connection.execute("select count(*) from dedup.documents").fetchone()[0] == 24


@pytest.mark.slow
def test_dg_checks_the_definitions_and_launches_the_named_job(cli_env):
    checked = run_command([DG, "check", "defs"], cli_env)
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert "All definitions loaded successfully." in checked.stdout + checked.stderr
    launched = run_command([DG, "launch", "--job", "dedup_all"], cli_env)
    assert launched.returncode == 0, launched.stderr[-3000:]
    assert 'Finished execution of run for "dedup_all"' in launched.stderr
    manifest = json.loads((Path(cli_env["DEDUP_OUTPUT_DIR"]) / "manifest.json").read_text())
    assert manifest["counts"]["representative_rows"] == 12


FIXTURE_RUN = """
import sys, tempfile
from dedup_assets.core.pipeline.library import run_library
from dedup_assets.launch.warm import compiled_here
folder = tempfile.mkdtemp()
run_library(sys.argv[1], folder + "/db.duckdb", folder + "/out")
print(compiled_here())
"""


@pytest.mark.slow
def test_warm_up_leaves_every_kernel_a_run_needs_cached(tmp_path):
    """From an empty kernel cache: the warm-up compiles, a second one loads, and a run on the
    fixture then compiles nothing (its buffers differ from the warm-up's made-up documents)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba_cache")}
    runs = [run_command([sys.executable, "-m", "dedup_assets.launch.warm"], env) for _ in range(2)]
    assert all(run.returncode == 0 for run in runs), [run.stderr[-2000:] for run in runs]
    assert runs[0].stdout.startswith("Compiled "), runs[0].stdout
    assert runs[1].stdout.startswith("Kernels already compiled and cached"), runs[1].stdout
    fixture = run_command([sys.executable, "-c", FIXTURE_RUN, str(FIXTURE)], env)
    assert fixture.returncode == 0, fixture.stderr[-2000:]
    assert fixture.stdout.strip() == "0"


def test_a_bad_setting_fails_before_any_step_runs(cli_env):
    bad = '{"resources": {"dedup": {"config": {"jaccard_threshold": 1.5}}}}'
    result = materialize(cli_env, *MODULE, "--select", "group:deduplication", "--config-json", bad)
    assert result.returncode != 0
    assert "jaccard_threshold must be in (0, 1], got 1.5" in result.stderr
    assert "Started execution of step" not in result.stderr
    assert not Path(cli_env["DEDUP_DATABASE"]).exists()


def _quiet_run(env: dict, *args: str) -> subprocess.CompletedProcess:
    return run_command([sys.executable, "-m", "dedup_assets.cli", "run", *args], env)


@pytest.mark.slow
def test_the_quiet_run_prints_a_line_per_asset_and_the_counts(cli_env):
    result = _quiet_run(cli_env)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = (result.stdout + result.stderr).splitlines()
    assert len(lines) <= 40, lines
    assert any(line.startswith("  fingerprinted (") for line in lines)
    assert "  candidate pairs        18 of 276 possible (93.48% fewer)" in lines
    assert "  duplicate edges        18 (6 exact, 12 near)" in lines
    assert "  checks passed: 13" in lines  # engine_matches_duckdb compares nothing on duckdb: not counted
    # the published 8 x 8 bands, whose audit measures recall 1.0: nothing is said of them
    assert not [line for line in lines if line.startswith("  warning:") or "bands" in line], lines
    # the default sample holds all 24 documents of the fixture; its 18 true pairs count the 6 of
    # exact copies, which the near-copy figure leaves out
    assert "  recall, audited        1.0 (18 of 18 true pairs of 24 sampled documents; 95% interval 0.8241–1.0)" in lines
    assert "  recall, near copies    1.0 (12 of 12 pairs with Jaccard < 1; 95% interval 0.7575–1.0)" in lines
    assert not [line for line in lines if line.startswith("  against your labels")]  # no labels given
    assert not [line for line in lines if "DEBUG" in line or "Warning" in line]


@pytest.mark.slow
def test_a_check_that_warns_is_said_and_the_quiet_run_still_succeeds(cli_env):
    # 2 bands of 32 rows miss most near duplicates: the recall audit's check warns
    config = '{"resources": {"dedup": {"config": {"num_perm": 64, "rows_per_band": 32, "audit_sample_size": 0}}}}'
    result = _quiet_run(cli_env, "--config-json", config)
    assert result.returncode == 0, result.stderr[-3000:]
    warnings = [line for line in result.stderr.splitlines() if line.startswith("  warning: check recall_reaches_min_recall")]
    assert len(warnings) == 1 and "below min_recall=0.9" in warnings[0], result.stderr[-3000:]
    assert "Release files in" in result.stdout


def test_the_quiet_run_says_a_user_error_once_without_a_trace(cli_env, tmp_path):
    missing = _quiet_run({**cli_env, "DEDUP_INPUT": str(tmp_path / "nowhere.csv")})
    assert missing.returncode == 1
    output = missing.stdout + missing.stderr
    assert output.count("no such file. Set input_path") == 1
    assert "Traceback" not in output and "Stack Trace" not in output
    assert output.splitlines()[-1] == f"Error: {tmp_path / 'nowhere.csv'}: no such file. Set input_path (in dedup.yaml or the launchpad), dedup run --input, or DEDUP_INPUT to an input file, folder or glob."
    bad = _quiet_run(cli_env, "--config-json", '{"resources": {"dedup": {"config": {"num_perm": 60}}}}')
    assert bad.returncode == 1
    assert "Error: num_perm (60) must be a positive multiple of rows_per_band (8)" in bad.stderr
    assert "Stack Trace" not in bad.stderr


@pytest.mark.slow
def test_the_quiet_run_ends_on_a_failed_check_in_its_own_words(cli_env, tmp_path):
    result = _quiet_run({**cli_env, "DEDUP_INPUT": str(fixture_with_a_wrong_contract(tmp_path))})
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[-1] == "Error: check fixture_contract on manifest failed: cluster_count: expected 13, got 12"
    assert "Stack Trace" not in result.stderr


def test_dedup_help_is_plain_text_on_stdout_and_version_prints_the_version():
    helped = run_command([DEDUP, "--help"], {})
    assert helped.returncode == 0 and helped.stderr == ""
    assert helped.stdout.startswith("usage: dedup [--help] [--version] {run,verify-release,")
    assert "\n  run               run the deduplication graph quietly" in helped.stdout and "``" not in helped.stdout
    for command in ("run", "verify-release", "register-batches", "forget-batches", "cdx-targets"):
        sub = run_command([DEDUP, command, "--help"], {})
        assert sub.returncode == 0 and sub.stdout.startswith(f"usage: dedup {command}") and "``" not in sub.stdout
    shown = run_command([DEDUP, "--version"], {})
    assert (shown.returncode, shown.stdout, shown.stderr) == (0, f"dedup {version('dedup-assets')}\n", "")
    bare = run_command([DEDUP], {})
    assert bare.returncode == 2 and bare.stdout == "" and bare.stderr.startswith("usage: dedup ")


def test_dedup_help_into_a_reader_that_stops_early_says_no_error():
    """`dedup --help | head`, when the reader has gone before the help is written: the rest is
    left unread, without Python's BrokenPipeError traceback. The reader here closes its end at
    once, long before Python has started, so the writer finds the pipe broken."""
    piped = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"{shlex.quote(DEDUP)} --help | (exec 0<&-)"],
        capture_output=True, text=True, timeout=60,
    )
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
