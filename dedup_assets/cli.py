"""The ``dedup`` command line: parses the subcommand and runs it; the quiet run is ``run.py``."""

from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import version
from pathlib import Path

DISTRIBUTION = "dedup-assets"  # pyproject.toml's project name
COMMANDS = {
    "run": "run the deduplication graph quietly, with a summary at the end (what make run runs)",
    "verify-release": "check a release folder against its manifest.json",
    "register-batches": "add the batch folder's files as partitions of the Dagster instance",
    "forget-batches": "take a batch and every later one out of the incremental index",
    "cdx-targets": "write a targets file of a crawl's HTML captures of URL patterns, from a CDX API",
    "cluster": "bring a local Ray cluster of several nodes up or down, for engine ray",
}
USAGE = "usage: dedup [--help] [--version] {" + ",".join(COMMANDS) + "} ..."
HELP = "\n".join([
    USAGE,
    "",
    "Near-duplicate removal for web text, on Dagster and DuckDB.",
    "",
    "commands:",
    *(f"  {name:<17} {text}" for name, text in COMMANDS.items()),
    "",
    "options:",
    "  -h, --help        show this help and exit",
    "  --version         show the version and exit",
    "",
    "Each command has its own help: dedup COMMAND --help.",
])


def verify_release_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="dedup verify-release",
        description="Check every file of a release folder against its manifest.json: present, "
        "listed, same rows and sha256.",
    )
    parser.add_argument("folder", type=Path)
    folder = parser.parse_args(argv).folder
    # imported here so that the command answers without loading Dagster
    from .core.release.files import verify_release

    if not folder.is_dir():
        print(f"Error: {folder}: no such folder. Give the release folder (DEDUP_OUTPUT_DIR).", file=sys.stderr)
        return 2
    problems = verify_release(folder)
    if problems:
        print(f"{folder}: the release does not match its manifest.json:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        print(
            "A release is checked whole: write the release again (the same input and settings give the same files) "
            "or copy the whole folder again, and move away what its manifest.json does not list.",
            file=sys.stderr,
        )
        return 1
    print(f"{folder}: every file matches manifest.json.")
    return 0


def register_batches_command(argv: list[str]) -> int:
    argparse.ArgumentParser(
        prog="dedup register-batches",
        description="Add each batch of the batch folder (DEDUP_BATCHES, default batches) as a "
        "partition of the Dagster instance of DAGSTER_HOME, so that `dagster asset materialize "
        "--select 'group:incremental' --partition KEY` finds it. Under `make dev` the new_batches "
        "sensor does this every 30 seconds.",
    ).parse_args(argv)
    if not os.environ.get("DAGSTER_HOME"):
        print(
            "Error: DAGSTER_HOME is not set, so there is no instance to keep the partitions in. "
            "Run `. ./env.sh` first (it sets DAGSTER_HOME), or set it to a folder.",
            file=sys.stderr,
        )
        return 2
    from dagster import DagsterInstance

    from .batch_runs.batch_partitions import partition_keys, register_folder_batches
    from .core.util.errors import DedupError
    from .core.incremental.batch_order import batch_command

    try:
        with DagsterInstance.get() as instance:
            folder, added = register_folder_batches(instance)
    except DedupError as error:
        print(f"Error: {error}", file=sys.stderr)
        return 2
    keys = partition_keys(folder)
    if not keys:
        print(f"{folder.folder} holds no batch; nothing to register.")
        return 0
    print(
        f"{folder.folder}: {len(keys)} batch(es), {len(added)} newly registered as partitions"
        + (f" ({', '.join(added)})" if added else "")
        + f". Add them in key order, each with: {batch_command('KEY')}"
    )
    return 0


def forget_batches_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="dedup forget-batches",
        description="Take batch KEY and every later batch out of the incremental index (in "
        "DEDUP_DATABASE), in one transaction, so they can be added again in key order. Their "
        "release folders are left as they are until the batches are added again.",
    )
    parser.add_argument("key", help="the first batch to take out (every later one goes too)")
    from .launch.environment import DATABASE, DUCKDB_MEMORY

    parser.add_argument("--database", default=DATABASE.value(), help=f"default: env {DATABASE.name}, else {DATABASE.default}")
    arguments = parser.parse_args(argv)
    from .core.incremental.index_changes import forget_batches
    from .core.incremental.index_tables import IndexTables
    from .core.util.errors import DedupError
    from .core.storage.store import open_database

    if not Path(arguments.database).expanduser().is_file():
        print(f"Error: {arguments.database}: no such database file. Check DEDUP_DATABASE.", file=sys.stderr)
        return 2
    tables = IndexTables.in_schema()
    try:
        with open_database(arguments.database, DUCKDB_MEMORY.value()) as connection:
            removed = forget_batches(connection, tables, arguments.key)
    except DedupError as error:
        print(f"Error: {error}", file=sys.stderr)
        return 2
    if not removed:
        print(f"{arguments.database}: no batch from {arguments.key} on is in the incremental index; nothing to do.")
        return 0
    print(
        f"{arguments.database}: took {len(removed)} batch(es) out of the incremental index: {', '.join(removed)}. "
        "Their release folders (DEDUP_OUTPUT_DIR/batches/KEY) stay as they are until the batches are added again."
    )
    return 0


def cdx_targets_command(argv: list[str]) -> int:
    from .core.util.errors import DedupError
    from .core.read.http_fetch import refuse_unacknowledged_terms
    from .core.settings.input import COMMON_CRAWL_CDX_API_URL, FetchSettings

    parser = argparse.ArgumentParser(
        prog="dedup cdx-targets",
        description="Write a targets file (CSV: url, filename, offset, length, digest, timestamp, "
        "mime, status) of the captures of URL patterns in one crawl that answered 200 with "
        "text/html, from a CDX API. Read it with source_format warc_ranges (or leave that unset).",
    )
    parser.add_argument("patterns", nargs="+", help="URL patterns, such as example.com/* or *.example.com")
    parser.add_argument("--crawl", required=True, help="the crawl id, such as CC-MAIN-2024-10")
    parser.add_argument("--out", required=True, type=Path, help="the targets CSV to write")
    parser.add_argument("--cdx-api-url", default=COMMON_CRAWL_CDX_API_URL, help=f"default: {COMMON_CRAWL_CDX_API_URL}")
    parser.add_argument("--acknowledge-common-crawl-terms", action="store_true")
    parser.add_argument(
        "--timeout-s", type=float, default=FetchSettings.timeout_s,
        help=f"seconds each request may take in all (default: {FetchSettings.timeout_s:g})",
    )
    arguments = parser.parse_args(argv)
    from .core.read.cdx import write_targets

    try:
        refuse_unacknowledged_terms(
            arguments.cdx_api_url, arguments.acknowledge_common_crawl_terms, "--cdx-api-url",
            "pass --acknowledge-common-crawl-terms, or --cdx-api-url of another index",
        )
        rows = write_targets(arguments.cdx_api_url, arguments.crawl, arguments.patterns, arguments.out, arguments.timeout_s)
    except DedupError as error:
        print(f"Error: {error}", file=sys.stderr)
        return 2
    print(f"{arguments.out}: {rows:,} targets.")
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return _command(sys.argv[1:] if argv is None else argv)
    except BrokenPipeError:
        # a reader that stopped early (dedup --help | head): what it left unread is no error;
        # stdout goes nowhere so that Python's flush at exit does not raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _command(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(HELP)
        return 0
    if argv[:1] == ["--version"]:
        print(f"dedup {version(DISTRIBUTION)}")
        return 0
    if not argv or argv[0] not in COMMANDS:
        problem = f"unknown command {argv[0]!r}" if argv else "a command is needed"
        print(f"{USAGE}\ndedup: error: {problem}; dedup --help lists them.", file=sys.stderr)
        return 2
    if argv[0] == "verify-release":
        return verify_release_command(argv[1:])
    if argv[0] == "register-batches":
        return register_batches_command(argv[1:])
    if argv[0] == "forget-batches":
        return forget_batches_command(argv[1:])
    if argv[0] == "cdx-targets":
        return cdx_targets_command(argv[1:])
    if argv[0] == "cluster":
        from .launch.local_cluster import command

        return command(argv[1:])
    # imported here, so that the other commands answer without loading Dagster and the definitions;
    # the options are parsed before the run's module loads them, so --help answers at once too
    from .launch.run_arguments import run_arguments

    arguments = run_arguments(argv[1:])
    from .run import main as run

    return run(*arguments)


if __name__ == "__main__":
    sys.exit(main())
