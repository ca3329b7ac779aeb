"""The settings file (dedup.yaml, or DEDUP_SETTINGS): read when a run sets the dedup resource up,
checked like run config, the run config winning over it, and manifest.json saying where each
value came from. Real `dedup run` and `dagster asset materialize` subprocesses in a project folder,
and `dagster.materialize` with run config, as the launchpad gives it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
from pathlib import Path

import duckdb
import pytest
from dagster import asset, materialize

from dedup_assets.settings_resource import DedupSettings
from dedup_assets.launch.settings_file import SettingsFileError, read_settings_file

from .conftest import PROJECT_ROOT
from .test_dagster_dev import STARTUP_SECONDS, _free_port, _graphql, _reset_signals, materialize_through_ui

BIN = Path(sys.executable).parent
KEYS = DedupSettings.model_fields


@pytest.fixture
def project(tmp_path) -> Path:
    """A project folder as a user has one: the fixture under data/, a DAGSTER_HOME, no dedup.yaml."""
    folder = tmp_path / "project"
    (folder / "data").mkdir(parents=True)
    for name in ("data/documents.csv", "data/documents.expected.json"):
        (folder / name).write_bytes((PROJECT_ROOT / name).read_bytes())
    (folder / ".dagster_home").mkdir()
    (folder / ".dagster_home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return folder


def _env(project: Path) -> dict:
    # nothing of the developer's: the paths default to the project folder's, no DEDUP_SETTINGS
    env = {name: value for name, value in os.environ.items() if not name.startswith(("DEDUP_", "DAGSTER_"))}
    return {**env, "DAGSTER_HOME": str(project / ".dagster_home"), "DEDUP_DUCKDB_MEMORY": "1GB"}


def _run(command: list[str], project: Path, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        command, cwd=project, env={**_env(project), **env}, capture_output=True, text=True, timeout=900
    )


def _documents(project: Path) -> int:
    with duckdb.connect(str(project / "var" / "dedup_assets.duckdb"), read_only=True) as connection:
        return connection.execute("select count(*) from dedup.documents").fetchone()[0]


@pytest.mark.slow
def test_dedup_yaml_changes_a_run_without_config_json_and_the_manifest_says_so(project):
    (project / "dedup.yaml").write_text("# our corpus\njaccard_threshold: 0.9\n")
    result = _run([str(BIN / "dedup"), "run"], project)
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads((project / "output" / "manifest.json").read_text())
    assert manifest["settings"]["jaccard_threshold"] == 0.9
    sources = manifest["settings_sources"]
    assert sources["jaccard_threshold"] == str(project / "dedup.yaml")
    assert {source for name, source in sources.items() if name != "jaccard_threshold"} == {"default"}
    assert list(sources) == [*manifest["settings"], "input_path", "output_dir", "labels_path"]
    # the fixture's contract is written for 0.7: the run says it did not compare
    assert "is for other settings: jaccard_threshold=0.9 (contract: 0.7)" in result.stderr


def test_run_config_wins_over_the_file_even_at_the_default_value(project):
    """dagster asset materialize --config-json: 18 of the fixture's 24 bodies are longer than the
    file's max_body_bytes; the run config's value, the default itself, wins over it."""
    (project / "dedup.yaml").write_text("max_body_bytes: 500\n")
    command = [str(BIN / "dagster"), "asset", "materialize", "-m", "dedup_assets.definitions", "--select", "documents"]
    from_file = _run(command, project)
    assert from_file.returncode == 0, from_file.stderr[-3000:]
    assert _documents(project) == 6
    config = {"resources": {"dedup": {"config": {"max_body_bytes": 10_000_000}}}}
    overridden = _run([*command, "--config-json", json.dumps(config)], project)
    assert overridden.returncode == 0, overridden.stderr[-3000:]
    assert _documents(project) == 24


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("jacard_threshold: 0.9\n", "unknown key 'jacard_threshold' (did you mean jaccard_threshold?)"),
        ("shingle_unit: byte\n", "shingle_unit: Input should be 'word' or 'char'"),
        ("jaccard_threshold: 1.5\n", "jaccard_threshold must be in (0, 1], got 1.5"),
    ],
)
def test_a_bad_key_or_value_fails_the_run_with_one_message_naming_the_file_and_key(project, text, message):
    (project / "dedup.yaml").write_text(text)
    result = _run([str(BIN / "dedup"), "run"], project)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and errors[0].startswith(f"Error: {project / 'dedup.yaml'}: {message}"), result.stderr
    assert "Fix or remove it there" in errors[0] and "Traceback" not in result.stderr
    assert not (project / "var" / "dedup_assets.duckdb").exists()  # no step ran


def test_dagster_asset_materialize_reads_the_file_dedup_settings_names_and_refuses_a_bad_one(project):
    named = project / "conf" / "ours.yaml"
    named.parent.mkdir()
    named.write_text("fields: [doc_id]\n")
    result = _run(
        [str(BIN / "dagster"), "asset", "materialize", "-m", "dedup_assets.definitions", "--select", "documents"],
        project, DEDUP_SETTINGS="conf/ours.yaml",
    )
    assert result.returncode != 0
    assert f"{named}: fields: Input should be a valid dictionary" in result.stderr
    assert "Started execution of step" not in result.stderr


def _sources_in_a_run(run_config: dict, resource: DedupSettings) -> dict:
    """The dedup resource a run's asset gets, through dagster.materialize (the launchpad's way in)."""
    seen = {}

    @asset
    def probe(dedup: DedupSettings) -> None:
        seen.update(
            sources=dedup.settings_sources(), threshold=dedup.jaccard_threshold,
            input=dedup.input_file(), output=dedup.output_folder(),
        )

    assert materialize([probe], resources={"dedup": resource}, run_config=run_config).success
    return seen


def test_the_launchpads_run_config_wins_over_the_file_and_code_over_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEDUP_SETTINGS")
    (tmp_path / "dedup.yaml").write_text("jaccard_threshold: 0.9\nnum_perm: 128\nmax_cluster_size: 50\n")
    config = {"resources": {"dedup": {"config": {"jaccard_threshold": 0.7}}}}  # the default, given
    seen = _sources_in_a_run(config, DedupSettings())
    assert seen["threshold"] == 0.7
    assert {name: source for name, source in seen["sources"].items() if source != "default"} == {
        "jaccard_threshold": "run config", "num_perm": str(tmp_path / "dedup.yaml"),
        "max_cluster_size": str(tmp_path / "dedup.yaml"),
    }
    # a value given in Python, other than its default, wins over the file (with run config for the
    # resource, Dagster makes it from the run config alone, so this is without it)
    seen = _sources_in_a_run({}, DedupSettings(max_cluster_size=20))
    assert seen["threshold"] == 0.9
    assert seen["sources"]["max_cluster_size"] == "code" and seen["sources"]["num_perm"] == str(tmp_path / "dedup.yaml")


def test_a_path_variable_set_wins_over_the_files_path_as_dedup_run_input_sets_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEDUP_SETTINGS")
    (tmp_path / "dedup.yaml").write_text("input_path: from_file.csv\noutput_dir: from_file\n")
    monkeypatch.setenv("DEDUP_INPUT", "from_flag.csv")
    seen = _sources_in_a_run({}, DedupSettings())
    assert seen["input"] == tmp_path / "from_flag.csv"
    assert (seen["sources"]["input_path"], seen["sources"]["output_dir"]) == ("default", str(tmp_path / "dedup.yaml"))
    assert seen["output"] == Path("from_file")  # the file's output_dir, which no variable sets


def test_no_file_leaves_every_value_at_its_source(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEDUP_SETTINGS")
    assert read_settings_file(KEYS) is None
    seen = _sources_in_a_run({}, DedupSettings())
    assert set(seen["sources"].values()) == {"default"} and seen["threshold"] == 0.7


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("jaccard_threshold 0.9\n", "holds a str, not settings"),  # the colon forgotten
        ("- jaccard_threshold: 0.9\n", "holds a list, not settings"),
        ("jaccard_threshold: [0.9\n", "not valid YAML at line 2"),
    ],
)
def test_a_file_that_is_not_settings_is_refused_naming_it(tmp_path, monkeypatch, text, message):
    (tmp_path / "s.yaml").write_text(text)
    monkeypatch.setenv("DEDUP_SETTINGS", str(tmp_path / "s.yaml"))
    with pytest.raises(SettingsFileError) as raised:
        read_settings_file(KEYS)
    assert str(raised.value).startswith(f"{tmp_path / 's.yaml'}: ") and message in str(raised.value)


def test_dedup_settings_naming_no_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEDUP_SETTINGS", "nowhere.yaml")
    with pytest.raises(SettingsFileError, match="DEDUP_SETTINGS=nowhere.yaml: no such file"):
        read_settings_file(KEYS)


@pytest.mark.slow
def test_dagster_dev_started_in_the_project_folder_reads_its_dedup_yaml(project):
    """A run launched as the UI's Materialize button does: 18 of the 24 bodies are over the file's limit."""
    (project / "workspace.yaml").write_bytes((PROJECT_ROOT / "workspace.yaml").read_bytes())
    (project / "dedup.yaml").write_text("max_body_bytes: 500\n")
    port = _free_port()
    with (project / "dagster_dev.log").open("w") as log:
        process = subprocess.Popen(
            [str(BIN / "dagster"), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)], cwd=project,
            env=_env(project), stdout=log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_reset_signals,
        )
        try:
            deadline = time.monotonic() + STARTUP_SECONDS
            while not _serves_assets(port):
                assert process.poll() is None and time.monotonic() < deadline, "dagster dev did not serve its assets"
                time.sleep(1)
            materialize_through_ui(port, project, "dedup_assets", ["documents"])
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=60)
    assert _documents(project) == 6


def _serves_assets(port: int) -> bool:
    try:
        return bool(_graphql(port, "{ assetNodes { assetKey { path } } }")["assetNodes"])
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False
