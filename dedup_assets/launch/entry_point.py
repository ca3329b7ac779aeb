"""The command a run was started with (its entry point), and a fix written for it: a change of
settings as the command that makes it once, and as the ``dedup.yaml`` lines that keep it; or the
assets to materialize again, as that entry point selects them. It imports nothing of ours but the
names of the variables, so the CLI, the settings resource and the Dagster layer all can.

The library raises a :class:`~dedup_assets.core.util.errors.DedupError` whose message names no command;
``user_messages.user_errors`` adds :func:`how_to_fix` of its ``fix`` and ``select``."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from .environment import INPUT

# set by the Makefile's run target ("make"), and by dedup run itself when make did not
ENTRY = "DEDUP_ENTRY"
MAKE, DEDUP, DAGSTER, DG, UI, PYTHON = "make", "dedup", "dagster", "dg", "ui", "python"
RESOURCE_KEY = "dedup"  # the settings resource's key in the definitions and in the run config
SETTINGS_FILE = "dedup.yaml"


def dedup_program() -> str:
    """This ``dedup`` as a shell can call it from the working directory: the script beside this
    Python (relative when it is below the working directory), else the module run by this Python."""
    script = Path(sys.executable).with_name("dedup")
    if not script.is_file():
        return f"{shlex.quote(sys.executable)} -m dedup_assets.cli"
    try:
        return shlex.quote(str(script.relative_to(Path.cwd())))
    except ValueError:
        return shlex.quote(str(script))


def entry_point(argv: Sequence[str] | None = None) -> str:
    """Which command runs this process's steps: ``make`` and ``dedup`` say so in ``DEDUP_ENTRY``;
    ``dagster asset materialize``/``job execute`` and ``dg launch`` run them in their own process;
    a run of the UI (or of a sensor) runs in a process the code server starts, whose arguments
    are the code server's (``dagster api grpc``, ``dagster code-server``); anything else is Python
    code calling Dagster."""
    named = os.environ.get(ENTRY)
    if named:
        return named
    argv = sys.argv if argv is None else argv
    program = Path(argv[0]).name if argv else ""
    if program == "__main__.py":  # python -m dagster …
        program = Path(argv[0]).parent.name
    if program == "dg":
        return DG if argv[1:2] == ["launch"] else UI
    if program == "dagster":
        return DAGSTER if argv[1:2] in (["asset"], ["job"]) else UI
    return PYTHON


def run_config(settings: Mapping[str, object]) -> dict:
    return {"resources": {RESOURCE_KEY: {"config": dict(settings)}}}


def _yaml(value: object) -> str:
    """``value`` as YAML lines indented by two spaces (valid as they are, or dedented)."""
    text = yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True)
    return "\n".join(f"  {line}" for line in text.splitlines())


def _given_config(arguments: list[str]) -> tuple[dict, list[str]]:
    """The run config of ``--config-json`` in ``arguments``, and the arguments without it."""
    config, rest, at = {}, [], 0
    while at < len(arguments):
        argument = arguments[at]
        if argument == "--config-json" and at + 1 < len(arguments):
            config, at = json.loads(arguments[at + 1]), at + 2
            continue
        if argument.startswith("--config-json="):
            config = json.loads(argument.split("=", 1)[1])
        else:
            rest.append(argument)
        at += 1
    return config, rest


def _merged(config: dict, settings: Mapping[str, object]) -> dict:
    """``config`` with ``settings`` set in the dedup resource's config, every other value kept."""
    resources = dict(config.get("resources") or {})
    resource = dict(resources.get(RESOURCE_KEY) or {})
    resource["config"] = {**(resource.get("config") or {}), **settings}
    return {**config, "resources": {**resources, RESOURCE_KEY: resource}}


def _without_option(arguments: list[str], *names: str) -> list[str]:
    """``arguments`` without the options ``names`` and their values."""
    rest, skip = [], False
    for argument in arguments:
        if skip:
            skip = False
        elif argument in names:
            skip = True
        elif not argument.startswith(tuple(f"{name}=" for name in names)):
            rest.append(argument)
    return rest


def _option(arguments: list[str], name: str) -> list[str]:
    """The option ``name`` with its value as ``arguments`` give it (``name value`` or
    ``name=value``); none when they do not."""
    for at, argument in enumerate(arguments):
        if argument == name and at + 1 < len(arguments):
            return [name, arguments[at + 1]]
        if argument.startswith(f"{name}="):
            return [argument]
    return []


def _command(entry: str, argv: Sequence[str], settings: Mapping[str, object], select: str | None) -> str:
    """The command of ``entry`` that runs again as ``argv`` did, with ``settings`` added to its run
    config, and, given ``select``, those assets instead of the ones it ran."""
    config, arguments = _given_config(list(argv[1:]))
    given = ((config.get("resources") or {}).get(RESOURCE_KEY) or {}).get("config") or {}
    named = any(argument == "--input" or argument.startswith("--input=") for argument in arguments)
    if os.environ.get(INPUT.name) and not named and "input_path" not in given:
        # an input named by a variable (DEDUP_INPUT=… before the command) goes with the command
        settings = {"input_path": os.environ[INPUT.name], **settings}
    if entry == DEDUP:
        program = dedup_program()
        if select:  # dedup run runs the whole graph, which rebuilds every asset
            arguments = _without_option(arguments, "--job")
    else:
        program = entry
        if select and entry == DG:
            arguments = ["launch", *_without_option(arguments[1:], "--assets", "--job"), "--assets", select]
        elif select:  # a batch's run selects its partition again
            partition = _option(arguments, "--partition")
            arguments = ["asset", "materialize", "-m", "dedup_assets.definitions", "--select", select, *partition]
    config = _merged(config, settings) if settings else config
    options = ["--config-json", json.dumps(config)] if config else []
    return " ".join([program, *map(shlex.quote, [*arguments, *options])])


def how_to_fix(
    settings: Mapping[str, object] | None = None,
    select: str | None = None,
    entry: str | None = None,
    argv: Sequence[str] | None = None,
    partition: str | None = None,
) -> str:
    """What to do, written for ``entry`` (this process's entry point when None; ``argv``, its
    arguments, when None). ``settings`` alone (the dedup resource's fields -> values): the command
    that runs once with them (the launchpad's run config for the UI), then the ``dedup.yaml``
    lines that keep them for every run. With ``select``: the command that materializes those
    assets with the run's own config and ``settings`` (the run's own settings, which need no
    keeping), and, in the UI and Python, ``partition`` (a command keeps its own --partition)."""
    entry = entry or entry_point()
    argv = sys.argv if argv is None else argv
    settings = dict(settings or {})
    if entry == MAKE:
        if select or not settings:
            return "Run the same make command again: make run materializes every asset."
        return f"Add to {SETTINGS_FILE} beside the Makefile, then run the same make command again:\n{_yaml(settings)}"
    if select and entry in (UI, PYTHON):
        config = "launchpad config" if entry == UI else "run config"
        return f"Materialize {select}{f' for partition {partition}' if partition else ''} with the same {config}."
    if select:
        return f"Run: {_command(entry, argv, settings, select)}"
    lasting = f"To keep it for every run, add to {SETTINGS_FILE} in the folder you run from:\n{_yaml(settings)}"
    if entry == UI:
        return f"In the launchpad, add to the run config (it lasts that run):\n{_yaml(run_config(settings))}\n{lasting}"
    if entry == PYTHON:
        return f"Add to the run config (it lasts that run): {json.dumps(run_config(settings))}\n{lasting}"
    return f"For this run only: {_command(entry, argv, settings, select)}\n{lasting}"
