"""Every problem a user can fix is a DedupError, and reaches them as its message alone, with its
fix written for the command the user ran."""

import json
import shlex

import pyarrow as pa
import pytest
import yaml
from dagster import DagsterEventType, DagsterInstance, Failure, StaticPartitionsDefinition, asset, materialize

from dedup_assets.core.read.batches import BatchError
from dedup_assets.core.util.errors import DedupError, InconsistentTables
from dedup_assets.core.incremental.batch_order import BatchOrderError
from dedup_assets.core.lsh.candidates import PairBudgetExceeded
from dedup_assets.core.incremental.payloads import PayloadError
from dedup_assets.core.release.publish import ReleaseError
from dedup_assets.core.read import InputError
from dedup_assets.core.settings.model import SettingsError
from dedup_assets.core.sketch.fingerprints import list_matrix
from dedup_assets.core.storage.store import DuckDBUnavailable
from dedup_assets.core.verify.pairs import MemoryBudgetExceeded
from dedup_assets.launch.entry_point import ENTRY, entry_point, how_to_fix
from dedup_assets.launch.user_messages import refusal_text, user_errors
from dedup_assets.stored_tables.lineage import StaleUpstream

# each with the builtin base it had before DedupError, which callers may still catch
USER_ERRORS = {
    InputError: ValueError,
    SettingsError: ValueError,
    BatchError: ValueError,
    InconsistentTables: ValueError,
    PairBudgetExceeded: RuntimeError,
    MemoryBudgetExceeded: RuntimeError,
    StaleUpstream: RuntimeError,
    DuckDBUnavailable: RuntimeError,
    ReleaseError: RuntimeError,
    BatchOrderError: RuntimeError,
    PayloadError: RuntimeError,
}


@pytest.mark.parametrize("error", USER_ERRORS)
def test_a_user_error_becomes_a_failure_with_its_message_only(error):
    assert issubclass(error, USER_ERRORS[error])
    with pytest.raises(Failure) as raised, user_errors():
        raise error("Do this to fix it.")
    assert raised.value.description == "Do this to fix it."
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_any_other_error_keeps_its_traceback():
    with pytest.raises(KeyError), user_errors():
        raise KeyError("a bug")


def test_tables_that_disagree_say_what_to_materialize_again():
    ragged = pa.chunked_array([pa.array([[1, 2], [3]], type=pa.list_(pa.uint64()))])
    with pytest.raises(Failure, match="fingerprint lists of different lengths: re-materialize fingerprinted"), user_errors():
        list_matrix(ragged)


@pytest.fixture(autouse=True)
def _a_shell_without_our_variables(monkeypatch):
    # what a fix prints depends on them, and a developer's shell may set them
    monkeypatch.delenv(ENTRY, raising=False)
    monkeypatch.delenv("DEDUP_INPUT", raising=False)


# the fix for an input whose columns are id and text, written for each entry point
FIELDS = {"fields": {"doc_id": "id", "body": "text"}}
YAML_LINES = "  fields:\n    doc_id: id\n    body: text"
LASTING = f"To keep it for every run, add to dedup.yaml in the folder you run from:\n{YAML_LINES}"


def _config(command: str) -> dict:
    arguments = shlex.split(command)
    return json.loads(arguments[arguments.index("--config-json") + 1])


@pytest.mark.parametrize(
    "argv, entry",
    [
        (["/p/.venv/bin/dagster", "asset", "materialize", "--select", "x"], "dagster"),
        (["/p/.venv/bin/dagster", "job", "execute", "-j", "dedup_all"], "dagster"),
        (["/p/.venv/bin/dg", "launch", "--assets", "x"], "dg"),
        # a run of the UI: the code server's process, started as python -m dagster api grpc
        (["/p/.venv/lib/python3.11/site-packages/dagster/__main__.py", "api", "grpc"], "ui"),
        (["/p/.venv/bin/dagster", "dev"], "ui"),
        (["/p/.venv/bin/pytest"], "python"),
    ],
)
def test_the_entry_point_is_told_by_the_command_line(argv, entry, monkeypatch):
    assert entry_point(argv) == entry
    monkeypatch.setenv(ENTRY, "make")  # make run says so, whatever the process's arguments
    assert entry_point(argv) == "make"


def test_a_settings_fix_under_make_is_the_dedup_yaml_lines_alone():
    text = how_to_fix(FIELDS, entry="make", argv=["dedup", "run"])
    assert text == f"Add to dedup.yaml beside the Makefile, then run the same make command again:\n{YAML_LINES}"
    assert "--config-json" not in text  # make run takes no options
    assert yaml.safe_load(text.split(":\n", 1)[1]) == FIELDS


def test_a_settings_fix_under_dedup_run_keeps_the_users_command_and_config():
    given = {"resources": {"dedup": {"config": {"cluster_mode": "star"}}}}
    argv = ["/p/.venv/bin/dedup", "run", "--input", "my pages.csv", "--config-json", json.dumps(given)]
    once, *lasting = how_to_fix(FIELDS, entry="dedup", argv=argv).split("\n")
    command = once.removeprefix("For this run only: ")
    assert shlex.split(command)[1:4] == ["run", "--input", "my pages.csv"]
    assert _config(command) == {"resources": {"dedup": {"config": {"cluster_mode": "star", **FIELDS}}}}
    assert "\n".join(lasting) == LASTING
    assert yaml.safe_load("\n".join(lasting[1:])) == FIELDS


def test_a_settings_fix_under_the_dagster_cli_and_dg_is_their_own_command():
    argv = ["/p/.venv/bin/dagster", "asset", "materialize", "-m", "dedup_assets.definitions", "--select", "documents"]
    assert how_to_fix(FIELDS, entry="dagster", argv=argv) == (
        "For this run only: dagster asset materialize -m dedup_assets.definitions --select documents --config-json "
        """'{"resources": {"dedup": {"config": {"fields": {"doc_id": "id", "body": "text"}}}}}'\n""" + LASTING
    )
    launched = how_to_fix(FIELDS, entry="dg", argv=["/p/.venv/bin/dg", "launch", "--job", "dedup_all"])
    assert launched.startswith("For this run only: dg launch --job dedup_all --config-json '")


def test_a_settings_fix_in_the_ui_is_the_launchpads_yaml():
    text = how_to_fix(FIELDS, entry="ui", argv=[])
    once, lasting = text.split("\nTo keep it", 1)
    assert once.startswith("In the launchpad, add to the run config (it lasts that run):\n")
    assert yaml.safe_load(once.split(":\n", 1)[1]) == {"resources": {"dedup": {"config": FIELDS}}}
    assert "To keep it" + lasting == LASTING


def test_a_rebuild_selects_the_assets_for_each_entry_point_with_the_runs_config():
    run = {"input_path": "/in.csv"}
    dagster = ["/p/.venv/bin/dagster", "asset", "materialize", "--select", "clusters", "--config-json", '{"a": 1}']
    assert how_to_fix(run, "scored_pairs*", entry="dagster", argv=dagster) == (
        "Run: dagster asset materialize -m dedup_assets.definitions --select 'scored_pairs*' --config-json "
        """'{"a": 1, "resources": {"dedup": {"config": {"input_path": "/in.csv"}}}}'"""
    )
    dg = how_to_fix({}, "scored_pairs*", entry="dg", argv=["/p/.venv/bin/dg", "launch", "--job", "rescore"])
    assert dg == "Run: dg launch --assets 'scored_pairs*'"
    dedup = how_to_fix({}, "scored_pairs*", entry="dedup", argv=["/p/.venv/bin/dedup", "run", "--job", "rescore"])
    assert dedup.startswith("Run: ") and dedup.endswith(" run")  # the whole graph: every asset again
    assert how_to_fix(run, "scored_pairs*", entry="make") == "Run the same make command again: make run materializes every asset."
    assert how_to_fix(run, "scored_pairs*", entry="ui") == "Materialize scored_pairs* with the same launchpad config."


@pytest.mark.parametrize("partition", [["--partition", "2026-11-02"], ["--partition=2026-11-02"]])
def test_a_rebuild_of_a_batch_selects_its_partition_again(partition):
    batch = ["/p/.venv/bin/dagster", "asset", "materialize", "-m", "dedup_assets.definitions", "--select", "group:incremental"]
    text = how_to_fix({}, "batch_fingerprints*", entry="dagster", argv=[*batch, *partition])
    assert text == f"Run: dagster asset materialize -m dedup_assets.definitions --select 'batch_fingerprints*' {' '.join(partition)}"
    dg = how_to_fix({}, "batch_fingerprints*", entry="dg", argv=["/p/.venv/bin/dg", "launch", "--assets", "x", *partition])
    assert dg == f"Run: dg launch {' '.join(partition)} --assets 'batch_fingerprints*'"


def test_a_batchs_refusal_in_python_or_the_ui_names_its_partition(monkeypatch):
    """A command keeps its own --partition; the UI's and Python's advice has none to keep, so it
    names the failed step's partition (a batch's key)."""
    monkeypatch.setenv(ENTRY, "python")
    batches = StaticPartitionsDefinition(["2026-11-01", "2026-11-02"])

    @asset(partitions_def=batches)
    def batch_step() -> None:
        with user_errors():
            raise DedupError("The cluster stalled.", select="batch_step*")

    @asset
    def one_shot_step() -> None:
        with user_errors():
            raise DedupError("The cluster stalled.", select="one_shot_step*")

    result = materialize([batch_step], partition_key="2026-11-02", raise_on_error=False)
    [failure] = [event for event in result.all_events if event.event_type == DagsterEventType.STEP_FAILURE]
    assert failure.step_failure_data.error.message.rstrip().endswith(
        "The cluster stalled.\nMaterialize batch_step* for partition 2026-11-02 with the same run config."
    )
    with pytest.raises(Failure) as raised:
        materialize([one_shot_step])
    assert raised.value.description == "The cluster stalled.\nMaterialize one_shot_step* with the same run config."
    ui = how_to_fix({}, "batch_fingerprints*", entry="ui", partition="2026-11-02")
    assert ui == "Materialize batch_fingerprints* for partition 2026-11-02 with the same launchpad config."


def test_a_refusal_without_a_fix_is_its_message_and_one_with_a_fix_adds_it(monkeypatch):
    monkeypatch.setenv(ENTRY, "make")
    assert refusal_text(DedupError("Do this.")) == "Do this."
    assert refusal_text(InputError("Map them.", fix=FIELDS)) == (
        f"Map them.\nAdd to dedup.yaml beside the Makefile, then run the same make command again:\n{YAML_LINES}"
    )
    with pytest.raises(Failure) as raised, user_errors():
        raise InputError("Map them.", fix=FIELDS)
    assert raised.value.description == refusal_text(InputError("Map them.", fix=FIELDS))


def test_an_input_named_by_a_variable_goes_with_the_one_run_command(monkeypatch):
    """`DEDUP_INPUT=pages.csv dagster asset materialize …` lasts one command: the command a fix
    prints names the input itself, unless the command or its config already does."""
    monkeypatch.setenv("DEDUP_INPUT", "pages.csv")
    dagster = ["/p/.venv/bin/dagster", "asset", "materialize", "--select", "documents"]
    once = how_to_fix(FIELDS, entry="dagster", argv=dagster).split("\n")[0]
    assert _config(once)["resources"]["dedup"]["config"] == {"input_path": "pages.csv", **FIELDS}
    dedup = ["/p/.venv/bin/dedup", "run", "--input", "pages.csv"]
    assert _config(how_to_fix(FIELDS, entry="dedup", argv=dedup).split("\n")[0]) == {"resources": {"dedup": {"config": FIELDS}}}
    assert "input_path" not in how_to_fix(FIELDS, entry="make")  # the same make command names it again


def test_a_refusal_is_recorded_without_a_stack_trace_and_a_bug_with_one():
    @asset
    def refused() -> None:
        with user_errors():
            raise InputError("Map them.", fix=FIELDS)

    @asset
    def buggy() -> None:
        with user_errors():
            raise KeyError("a bug")

    errors = {}
    with DagsterInstance.ephemeral() as instance:
        for step in (refused, buggy):
            result = materialize([step], instance=instance, raise_on_error=False)
            # as the run's log has it: what the console prints and the UI shows
            [entry] = instance.all_logs(result.run_id, of_type=DagsterEventType.STEP_FAILURE)
            errors[step.key.path[-1]] = entry.dagster_event.step_failure_data.error
    assert errors["refused"].cls_name == "Failure" and errors["refused"].stack == []
    assert errors["refused"].message.split(": ", 1)[1].startswith("Map them.\nAdd to the run config")
    assert errors["buggy"].stack  # a bug keeps the trace that finds it
