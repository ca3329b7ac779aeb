"""The one-shot run as a new user wants it: ``dedup run`` (what ``make run`` calls). One line per
step, the counts at the end, and a problem said once, without a traceback.

It runs a named job (``dedup_all`` unless told otherwise) from the same definitions, in this
process, on the Dagster instance of ``DAGSTER_HOME``, so the run, its full event log and any
stack trace are in the UI's run history (``make dev``). ``dagster asset materialize`` and ``dg
launch`` keep printing Dagster's own detailed log.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import sys
import time
import warnings
from contextlib import ExitStack
from pathlib import Path

# warnings about Dagster's own APIs, which a user of this project cannot act on; set before
# Dagster is imported, since some are raised at import
warnings.filterwarnings("ignore", category=Warning, module=r"dagster(\.|$)")

from dagster import AssetCheckSeverity, DagsterInstance, DagsterInvalidConfigError, logger  # noqa: E402
from dotenv import load_dotenv  # noqa: E402

from .assets.metadata import percent_fewer  # noqa: E402
from .core.release.files import MANIFEST_FILE  # noqa: E402
from .core.util.shell import python_command, sql_literal  # noqa: E402
from .definitions import defs  # noqa: E402
from .launch.entry_point import DEDUP, ENTRY, dedup_program  # noqa: E402
from .launch.history_files import held_open, history_files  # noqa: E402
from .launch.user_messages import last_sentence, refused, user_message  # noqa: E402
from .launch.run_health import fail_dead_runs, new_run  # noqa: E402
from .launch.warm import CompileWatch, step_compiled, warm_if_needed  # noqa: E402

QUIET_LOGGER = "dedup_console"
_INSTANCE_ATTEMPTS = 3
# how a step ends when the run is stopped (SIGTERM, Ctrl-C): Dagster's error, DuckDB's when a
# query was running (an InterruptException, or a RuntimeError from a result being streamed), or
# ours from a stream given up in another thread (RunStopped); Dagster then records the run's end
INTERRUPTED = ("DagsterExecutionInterruptedError", "InterruptException", "RunStopped")
INTERRUPTED_QUERY = "Query interrupted"
STOPPED = (
    "the run was stopped (SIGTERM or Ctrl-C). The steps that finished are kept in the database and "
    "the release folder holds the last whole release; run again to finish."
)


# checks that compare the run with something else, and pass only when they could compare
COMPARISONS = ("fixture_contract", "same_as_incremental")
RECALL_CHECK = "recall_reaches_min_recall"


class _Console(logging.Handler):
    """Prints a line per finished asset, the assets' own messages and failed checks; keeps each
    step's error for the end."""

    def __init__(self, assets: set[str]) -> None:
        super().__init__(logging.DEBUG)
        self.assets, self.started = assets, set()
        self.errors: list[str] = []
        self.bugs: list = []  # errors that are not refusals: their stack trace is worth keeping
        self.checks_passed = 0
        self.more_recall: dict | None = None  # the recall check's shortfalls and fix, for the summary
        self.said: set[str] = set()  # steps' messages, so that a check saying the same is not repeated
        self.compiles = CompileWatch()

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "dagster_meta", None) or {}
        event = meta.get("dagster_event")
        kind = event.event_type_value if event is not None else None
        step = meta.get("step_key")
        data = event.event_specific_data if event is not None else None
        if kind == "STEP_START":
            self.started.add(step)
        elif kind == "STEP_SUCCESS" and step in self.assets:
            _say(f"{step} ({data.duration_ms / 1000:.1f} s)")
        elif kind == "ASSET_CHECK_EVALUATION":
            if not _compared(data):
                pass  # nothing to compare with or measure: no news, and no check that passed
            elif data.passed:
                self.checks_passed += 1
                if data.check_name in COMPARISONS:  # what it compared with is news to the user
                    _say(f"{data.check_name}: {data.description}")
            elif data.severity == AssetCheckSeverity.WARN:  # a warning, said now; the run goes on
                if data.check_name == RECALL_CHECK:
                    self.more_recall = {name: entry.value for name, entry in data.metadata.items()}
                said = " (said above)" if data.description in self.said else f": {data.description}"
                _say(f"warning: check {data.check_name} on {data.asset_key.path[-1]}{said}")
            else:
                asset = data.asset_key.path[-1]
                self.errors.append(f"check {data.check_name} on {asset} failed: {data.description}")
        elif kind in ("STEP_FAILURE", "RUN_FAILURE", "RESOURCE_INIT_FAILURE") and getattr(data, "error", None):
            # a failed blocking check was already kept, in its own words
            if _interrupted(data.error):
                self.errors.append(STOPPED)
            elif data.error.cls_name != "DagsterAssetCheckFailedError":
                self.errors.append(user_message(data.error))
                if not refused(data.error):
                    self.bugs.append(data.error)
        elif kind is None and record.levelno >= logging.INFO and step in self.started:
            message = meta.get("orig_message", record.getMessage())
            self.said.add(message)
            _say(message)
        if kind in ("STEP_SUCCESS", "STEP_FAILURE") and (compiled := self.compiles.new()):
            _say(f"warning: {step_compiled(step, compiled)}")


def _compared(evaluation) -> bool:
    """Whether a check compared or measured anything (``compared`` false in its metadata: not)."""
    compared = evaluation.metadata.get("compared")
    return compared is None or bool(compared.value)


def _interrupted(error) -> bool:
    """Whether the stop is anywhere in the error's chain: in its causes, or in what it was raised
    while handling (a cursor closed during the stop, mid-query, raises an error of its own)."""
    pending = [error]
    while pending:
        error = pending.pop()
        if error is None:
            continue
        if error.cls_name in INTERRUPTED or error.message.strip().endswith(INTERRUPTED_QUERY):
            return True
        pending += [error.cause, error.context]
    return False


def _say(line: str) -> None:
    print(f"  {line}", file=sys.stderr, flush=True)


def _summary(manifest: dict, output_dir: str, more_recall: dict | None = None) -> str:
    counts, rejected = manifest["counts"], manifest["rejected_by_reason"]
    audit, evaluation = manifest["recall_audit"], manifest["evaluation"]
    rows = [
        ("documents", f"{counts['document_rows']:,}"),
        (
            "candidate pairs",
            f"{counts['candidate_pair_rows']:,} of {counts['possible_pair_rows']:,} possible "
            f"({percent_fewer(counts['possible_pair_rows'], counts['candidate_pair_rows'])} fewer)",
        ),
        (
            "duplicate edges",
            f"{counts['duplicate_pair_rows']:,} ({counts['exact_duplicate_pair_rows']:,} exact, "
            f"{counts['near_duplicate_pair_rows']:,} near)",
        ),
        ("clusters", f"{counts['cluster_count']:,} ({counts['duplicate_cluster_rows']:,} with duplicates)"),
        ("kept", f"{counts['representative_rows']:,}"),
        ("removed as duplicates", f"{counts['removed_document_rows']:,}"),
        (
            "rejected input rows",
            f"{counts['rejected_document_rows']:,}"
            + (" (" + ", ".join(f"{reason} {rows:,}" for reason, rows in rejected.items()) + ")" if rejected else ""),
        ),
    ]
    if audit["true_pairs"]:
        rows.append((
            "recall, audited",
            f"{audit['recall']} ({audit['found_pairs']:,} of {audit['true_pairs']:,} true pairs of "
            f"{audit['sampled_documents']:,} sampled documents; 95% interval {audit['ci_low']}–{audit['ci_high']})",
        ))
    near = audit["near_copies"]
    if near["true_pairs"]:
        rows.append((
            "recall, near copies",
            f"{near['recall']} ({near['found_pairs']:,} of {near['true_pairs']:,} {near['counts']}; "
            f"95% interval {near['ci_low']}–{near['ci_high']})",
        ))
    if more_recall and more_recall["below_min_recall"]:
        below = ", ".join(f"{name} {value}" for name, value in more_recall["below_min_recall"].items())
        fix = more_recall["more_recall"]
        rows.append((
            "recall hint",
            f"{below} below min_recall {manifest['settings']['min_recall']}"
            + (
                "; add to dedup.yaml to find more: " + ", ".join(f"{name}: {json.dumps(value)}" for name, value in fix.items())
                if fix
                else "; no other bands find more (recall_audit lists the missed pairs)"
            ),
        ))
    if evaluation["evaluated"]:
        figures = {name: evaluation[name] for name in ("precision", "recall", "f1", "adjusted_rand_index")}
        rows.append(("against your labels", ", ".join(f"{k} {v}" for k, v in figures.items() if v is not None)))
    width = max(len(name) for name, _ in rows)
    lines = [f"  {name.ljust(width)}  {value}" for name, value in rows]
    return "\n".join(["", *lines, "", *_where(Path(output_dir))])


def _where(release: Path) -> list[str]:
    """Where the release is and a command that opens it, as the summary's last lines."""
    release = _below_here(release)
    kept = release / "deduped_documents"
    query = f"select doc_id, cluster_size from read_parquet({sql_literal(f'{kept}/*.parquet')}) limit 10"
    python = shlex.quote(str(_below_here(Path(sys.executable))))
    return [
        f"Release files in {release}/ (manifest.json lists them; {dedup_program()} verify-release "
        f"{shlex.quote(str(release))} checks them).",
        f"  kept documents: {kept}/, e.g. {python_command(f'import duckdb; duckdb.sql({chr(34)}{query}{chr(34)}).show()', python)}",
        f"  why each page was kept or removed: {release / 'clusters.csv'}",
    ]


def _below_here(path: Path) -> Path:
    """``path`` relative to the working directory when it is below it, as a user would type it."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


def _instance() -> DagsterInstance:
    # DAGSTER_HOME (set by make and env.sh) keeps the run in the UI's history; without it the
    # run is kept for this process only
    if not os.environ.get("DAGSTER_HOME"):
        return DagsterInstance.ephemeral()
    for attempt in range(_INSTANCE_ATTEMPTS):
        try:
            return DagsterInstance.get()
        except Exception:  # two runs creating a new DAGSTER_HOME's storage race for its tables
            if attempt == _INSTANCE_ATTEMPTS - 1:
                raise
            time.sleep(1.0)
    raise AssertionError("unreachable")


def main(args: argparse.Namespace, config: dict) -> int:
    """The run of ``dedup run``'s options, as ``launch.run_arguments`` parsed them."""
    os.environ.setdefault(ENTRY, DEDUP)  # a fix is written for dedup run, unless make ran it
    if args.input:  # read where DEDUP_INPUT is, by the resource, in this process
        os.environ["DEDUP_INPUT"] = args.input
    # a .env in the working directory, as dagster asset materialize reads it: a value already set wins
    load_dotenv(Path.cwd() / ".env", override=False)

    print(f"Running {args.job} …", file=sys.stderr, flush=True)
    # execute_in_process runs Dagster's own executor, not the definitions' (executor.py)
    warm_if_needed(_say)
    console = _Console({key.path[-1] for key in defs.resolve_asset_graph().get_all_asset_keys()})

    @logger(description="One line per step; errors kept for the end.")
    def dedup_console(_init_context) -> logging.Logger:
        log = logging.Logger(QUIET_LOGGER, level=logging.DEBUG)
        log.addHandler(console)
        return log

    job = defs.resolve_job_def(args.job).with_logger_defs({QUIET_LOGGER: dedup_console})
    try:
        # the history's files are let go after the instance, which writes to them as it closes
        with ExitStack() as history, _instance() as instance:
            for line in fail_dead_runs(instance):
                _say(line)
            run_id, tags = new_run()
            history.enter_context(held_open(history_files(instance, run_id)))
            result = job.execute_in_process(
                run_config={**config, "loggers": {QUIET_LOGGER: {}}},
                instance=instance,
                raise_on_error=False,
                run_id=run_id,
                tags=tags,
            )
            kept = not instance.is_ephemeral
    except DagsterInvalidConfigError as error:
        # Dagster's own words, without its listing of every field the config could have
        problems = "; ".join(
            last_sentence(str(item.message).split(' Expected: "')[0]).rstrip(".") for item in error.errors
        )
        print(
            f"\nError: the settings are not valid: {problems or error}. Every setting is in docs/settings.md.",
            file=sys.stderr,
        )
        return 1
    if not result.success:
        # a stop can also fail a step that was still writing in another thread, in its own words
        message = STOPPED if STOPPED in console.errors else (console.errors[0] if console.errors else "the run failed")
        print(f"\nError: {message}", file=sys.stderr)
        # a refusal says all there is to say; a bug's stack trace is kept in the run history, or
        # printed when there is none (no DAGSTER_HOME)
        if console.bugs and message != STOPPED:
            where = f"Run {result.run_id}: its full log is in the UI's run history: make dev."
            print(f"({where})" if kept else console.bugs[0].to_string(), file=sys.stderr)
        return 1
    output_dir = result.asset_materializations_for_node("manifest")[-1].metadata["output_dir"].value
    with open(Path(output_dir) / MANIFEST_FILE, encoding="utf-8") as handle:
        manifest = json.load(handle)
    _say(f"checks passed: {console.checks_passed}")
    print(_summary(manifest, output_dir, console.more_recall))
    return 0
