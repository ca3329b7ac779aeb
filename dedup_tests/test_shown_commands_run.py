"""Issue 37: every command we print runs.

Every shell command of the README and docs/*.md (``shown_commands``) is run as shown, in a
project folder of its own under tmp_path, or is in ``EXCEPTIONS`` with the reason it cannot run
here; and the commands our refusals and errors print are run as a user pastes them, after
triggering each message. A listed exception the docs no longer show fails too, so the list
cannot rot.
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from .conftest import FIXTURE, PROJECT_ROOT, fixture_as_a_dump
from .shown_commands import Shown, block_commands, shown_commands
from .warc_fixtures import write_pages

# Commands the docs show that no test can run here, each with why (keyed as Shown.key says).
EXCEPTIONS = {
    "make test": "runs the fast test tier, this suite itself",
    "make dev": "serves the UI until stopped, on port 3000, which every worktree's tests share; "
    "dagster dev is run by test_dagster_dev.py",
    "dg dev": "serves the UI until stopped, as make dev",
    "make setup-ray": "installs the ray extra from the package index",
    ".venv/bin/dedup cluster up --nodes 2": "needs the ray extra; test_local_cluster.py (ray tier) runs it",
    ".venv/bin/dedup run --config-json "
    '{"resources": {"dedup": {"config": {"engine": "ray"}}}}': "needs the ray extra; test_local_cluster.py (ray tier) runs it on the cluster",
    "DEDUP_INPUT=data/documents.csv dagster asset materialize -m dedup_assets.definitions --select "
    'group:deduplication --config-json {"resources": {"dedup": {"config": {"engine": "ray"}}}}':
    "needs the ray extra (make setup-ray), which make setup leaves out; the ray tier runs this graph",
    ".venv/bin/python benchmarks/benchmark.py --docs 1000000 --both-engines --peers fastsketch-pre "
    "--skip-library --workdir /work/b1m": "a benchmark of 1M documents (minutes to hours, the ray extra)",
    ".venv/bin/python benchmarks/benchmark.py --docs 1000000 --both-engines --ray-nodes 2 --skip-library --runs 1 "
    "--workdir /work/b1m": "a benchmark of 1M documents on a local two-node Ray cluster (the ray extra, about 6 minutes "
    "here); its 100,000-document form on the same page runs",
    **{
        f".venv/bin/python benchmarks/benchmark.py --docs 1000000 --engine ray --ray-nodes {nodes} --skip-library "
        "--runs 1 --workdir /work/b1m": "a benchmark of 1M documents on a local Ray cluster of that many nodes (the ray "
        "extra, about 7 minutes here)"
        for nodes in (1, 4)
    },
    ".venv/bin/python benchmarks/benchmark.py --docs 5000000 --engine ray --ray-nodes 2 "
    "--ray-object-store-mb 2048 --skip-library --workdir /work/b5m": "a benchmark of 5M documents on Ray (an hour)",
    "make bench DOCS=100000 PERM=128": "the benchmark against the peers: the bench extra and many minutes",
    ".venv/bin/python benchmarks/benchmark.py --docs 100000 --web --runs 3 --peers rensa,fastsketch-pre "
    "--skip-library": "the web-length benchmark against the peers: the bench extra and half an hour here",
    ".venv/bin/python benchmarks/benchmark.py --corpus c1m.parquet --perm 128 --peers rensa,fastsketch-pre":
    "a 1M-document corpus and the peers' libraries (the bench extra)",
    ".venv/bin/python benchmarks/benchmark.py --corpus c1m.parquet --skip-dagster --skip-library --recall-seeds 10":
    "a 1M-document corpus and the peers' libraries (the bench extra)",
    "dedup cdx-targets --acknowledge-common-crawl-terms --crawl CC-MAIN-2024-10 --out targets.csv "
    "example.com/* docs.example.org/*": "asks index.commoncrawl.org: the test machines have no internet",
    "DEDUP_INPUT=targets.csv DEDUP_CACHE=~/.cache/dedup-warc dagster asset materialize -m "
    "dedup_assets.definitions --select group:deduplication --config-json "
    '{"resources": {"dedup": {"config": {"acknowledge_common_crawl_terms": true}}}}':
    "fetches from data.commoncrawl.org (no internet here); test_warc_ranges.py runs it against a loopback server",
    # docs/fault-matrix.md: issue 49's four untried cases, measured at full size. Each input only
    # feeds its run below; test_untried_cases.py makes untried_cases.py's inputs small
    ".venv/bin/python -m dedup_tests.faults.untried_cases one-word cases/one_word.parquet":
    "2M documents for fault-matrix.md's case 1, whose run is excepted below",
    ".venv/bin/python -m dedup_tests.faults.untried_cases footer cases/footer.parquet":
    "200k web-length pages for fault-matrix.md's case 2a, whose run is excepted below",
    ".venv/bin/python -m dedup_tests.faults.untried_cases footer cases/footer_short.parquet --words 20 60":
    "200k pages for fault-matrix.md's case 2b, whose run is excepted below",
    ".venv/bin/python -m dedup_bench.corpus 100000 cases/corpus.parquet":
    "100k documents for fault-matrix.md's case 3, whose run is excepted below",
    ".venv/bin/python -m dedup_tests.faults.untried_cases small-files cases/small_files":
    "5,000 files for fault-matrix.md's case 4, whose run is excepted below",
    "DEDUP_INPUT=cases/one_word.parquet DEDUP_DATABASE=cases/1.duckdb DEDUP_OUTPUT_DIR=cases/1-out .venv/bin/dedup run":
    "2M documents: three minutes and 2.7 GB",
    "DEDUP_INPUT=cases/footer.parquet DEDUP_DATABASE=cases/2a.duckdb DEDUP_OUTPUT_DIR=cases/2a-out .venv/bin/dedup run "
    '--config-json {"resources": {"dedup": {"config": {"hot_buckets": "skip"}}}}': "200k web-length pages: a minute and 1.4 GB",
    "DEDUP_INPUT=cases/footer_short.parquet DEDUP_DATABASE=cases/2b.duckdb DEDUP_OUTPUT_DIR=cases/2b-out .venv/bin/dedup run "
    '--config-json {"resources": {"dedup": {"config": {"hot_buckets": "skip"}}}}':
    "the case fault-matrix.md reports as not finishing: 30 minutes and 11 GB before it was stopped",
    "DEDUP_INPUT=cases/corpus.parquet DEDUP_DATABASE=cases/3.duckdb DEDUP_OUTPUT_DIR=cases/3-out DEDUP_DUCKDB_MEMORY=64MB "
    ".venv/bin/dedup run": "refused, as fault-matrix.md shows (exit 1); test_store.py tests its message on a real out-of-memory",
    "DEDUP_INPUT=cases/small_files DEDUP_DATABASE=cases/4.duckdb DEDUP_OUTPUT_DIR=cases/4-out .venv/bin/dedup run":
    "5,000 files: a minute and a half",
}

# one command's bound: far above a loaded machine's minute, so only a hang reaches it
COMMAND_SECONDS = 900
DAGSTER = str(Path(sys.executable).with_name("dagster"))
DEDUP = str(Path(sys.executable).with_name("dedup"))
DG = str(Path(sys.executable).with_name("dg"))
MODULE = "-m dedup_assets.definitions"


def test_the_parser_reads_continuations_open_quotes_loops_prompts_and_comments():
    lines = [
        "# a comment line is no command",
        "$ make run   # a prompt and a trailing comment",
        "dagster asset materialize --select 'x*' \\",
        "  --config-json '{\"a\":",
        "  1}'",
        "",
        "for key in a b; do",
        "  echo $key",
        "done",
    ]
    commands = block_commands(list(enumerate(lines, start=1)))
    assert [start for start, _ in commands] == [2, 3, 7]
    assert commands[0][1] == "make run   # a prompt and a trailing comment"
    assert Shown("p", 1, 3, commands[1][1]).key == "dagster asset materialize --select x* --config-json {\"a\": 1}"
    assert commands[2][1].splitlines() == ["for key in a b; do", "  echo $key", "done"]


def test_every_shown_command_is_run_or_excepted_and_every_exception_is_still_shown():
    shown = shown_commands()
    keys = {command.key for command in shown}
    # the README's and the docs' own: a parser that found none would pass everything below
    assert {"make run", ". ./env.sh", "dedup register-batches", "dg check defs"} <= keys
    assert len({command.page for command in shown}) >= 10
    stale = sorted(set(EXCEPTIONS) - keys)
    assert not stale, f"excepted commands the docs no longer show (remove them from EXCEPTIONS): {stale}"
    assert all(reason.strip() for reason in EXCEPTIONS.values())
    # every other command is run: test_every_shown_command_runs has a case for each block that
    # shows one, and runs the block's commands that are not excepted, in order
    assert sum(len(commands) for commands in BLOCKS.values()) == sum(command.key not in EXCEPTIONS for command in shown)


def _blocks(shown: list[Shown]) -> dict[str, list[Shown]]:
    blocks: dict[str, list[Shown]] = {}
    for command in shown:
        blocks.setdefault(f"{command.page}:{command.block}", []).append(command)
    return blocks


# The files a block's own words presume (README: "~/pages.csv has the columns: id, text, …";
# input-formats.md: a folder of Common Crawl WARC files, a JSONL dump with other names).
def _home(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    fixture_as_a_dump(home / "pages.csv")
    (home / "crawls").mkdir(exist_ok=True)
    write_pages(home / "crawls" / "CC-MAIN-1.warc.gz", 6)
    write_pages(home / "crawls" / "CC-MAIN-2.warc.gz", 4)
    fixture = pd.read_csv(FIXTURE, dtype=str, keep_default_na=False)
    with gzip.open(home / "dump.jsonl.gz", "wt", encoding="utf-8") as dump:
        for row in fixture.itertuples():
            dump.write(json.dumps({"key": row.doc_id, "content": row.body, "fetched": row.crawled_at}) + "\n")


def _project(folder: Path) -> Path:
    """A project folder as a checkout is: the code, Makefile, env.sh and venv linked (make sees
    their times, so its setup is up to date), data/ and benchmarks/ copies (the benchmark writes
    var/bench beside its own folder), so nothing writes into the repo."""
    folder.mkdir(parents=True)
    for name in (".venv", "dedup_assets", "Makefile", "pyproject.toml", "setup.cfg", "workspace.yaml", "env.sh"):
        (folder / name).symlink_to(PROJECT_ROOT / name)
    for name in ("data", "benchmarks"):
        shutil.copytree(PROJECT_ROOT / name, folder / name, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def _environment(home: Path) -> dict:
    # a user's shell: nothing of ours set but HOME, the project's venv on PATH as after make setup
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DEDUP_", "DAGSTER_"))}
    return {**env, "HOME": str(home), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"}


def _run(command: str, where: str, cwd: Path, env: dict, prelude: str = "") -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", f"{prelude}\n{command}"], cwd=cwd, env=env,
            capture_output=True, text=True, timeout=COMMAND_SECONDS,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{where}: `{command}` did not end in {COMMAND_SECONDS} s")


def _assert_ran(result: subprocess.CompletedProcess, where: str, command: str) -> None:
    assert result.returncode == 0, (
        f"{where}: `{command}` exited {result.returncode}:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    )


@pytest.fixture(scope="module")
def made_project(tmp_path_factory):
    """A project in which the README's first command, `make run`, has run: where every other
    block starts (a copy of it, at one path, since tables remember their input's path)."""
    root = tmp_path_factory.mktemp("shown")
    home = root / "home"
    _home(home)
    project = _project(root / "project")
    first = next(command for command in shown_commands() if command.key == "make run")
    _assert_ran(_run(first.text, first.where(), project, _environment(home)), first.where(), first.text)
    snapshot = root / "snapshot"
    shutil.copytree(project, snapshot, symlinks=True)
    return project, snapshot, home


# the blocks with a command to run (a block of excepted commands only has nothing to run)
BLOCKS = {
    block: runnable for block, commands in _blocks(shown_commands()).items()
    if (runnable := [command for command in commands if command.key not in EXCEPTIONS])
}


@pytest.mark.slow
@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_every_shown_command_runs(block, made_project):
    project, snapshot, home = made_project
    commands = BLOCKS[block]
    shutil.rmtree(project)
    shutil.copytree(snapshot, project, symlinks=True)
    page = (PROJECT_ROOT / commands[0].page).read_text(encoding="utf-8")
    # a page that tells its reader to `. ./env.sh` first ("after", "assume", "first") gets it
    prelude = [". ./env.sh"] if "`. ./env.sh`" in page else []
    for command in commands:
        _assert_ran(_run(command.text, command.where(), project, _environment(home), "\n".join(prelude)), command.where(), command.text)
        if command.key.startswith((". ", "source ", "export ")):
            prelude.append(command.text)  # what it sets lasts for the block's later commands


def _printed(result: subprocess.CompletedProcess, pattern: str) -> str:
    """The command a message printed: ``pattern``'s group 1, from the first line it matches, to
    the line's end (what a user selects to paste; no period may follow it)."""
    output = result.stdout + result.stderr
    found = re.search(pattern, output, flags=re.M)
    assert found, f"no message matching {pattern!r} in:\n{output[-4000:]}"
    return found.group(1)


# how a fix's command and its dedup.yaml lines are introduced (launch/entry_point.py)
ONCE = r"^For this run only: (.+)$"
LASTING = "To keep it for every run, add to dedup.yaml in the folder you run from:"
BY_MAKE = "Add to dedup.yaml beside the Makefile, then run the same make command again:"
SETTINGS = "dedup.yaml"


def _settings_lines(result: subprocess.CompletedProcess, heading: str) -> str:
    """The dedup.yaml lines a message gives after ``heading``: the indented lines that follow it,
    as a user pastes them into the file."""
    lines = (result.stdout + result.stderr).splitlines()
    at = next((number for number, line in enumerate(lines) if line.endswith(heading)), None)
    assert at is not None, f"no {heading!r} in:\n{(result.stdout + result.stderr)[-4000:]}"
    block = list(itertools.takewhile(lambda line: line.startswith("  "), lines[at + 1:]))
    assert block, f"no lines after {heading!r}"
    return "\n".join(block) + "\n"


def _legacy_encodings(folder: Path) -> None:
    """A CSV and a gzipped JSONL file in Windows-1252, every row with an accent (files that are
    mostly not UTF-8), and a UTF-16 CSV: the readers refuse each, naming how to convert it."""
    rows = [{"id": f"page-{n}", "text": f"café crème numéro {n} déjà vu à la carte"} for n in range(40)]
    pd.DataFrame(rows).rename(columns={"id": "doc_id", "text": "body"}).to_csv(folder / "legacy.csv", index=False, encoding="cp1252")
    with gzip.open(folder / "legacy.jsonl.gz", "wb") as packed:
        packed.write("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("cp1252"))
    (folder / "wide.csv").write_bytes((folder / "legacy.csv").read_text(encoding="cp1252").encode("utf-16"))


@pytest.mark.slow
def test_every_command_a_refusal_or_error_prints_runs(tmp_path):
    """Each message that gives a command is triggered with the real CLI, and the command it
    printed is run as pasted; where it is a fix, the refused command then runs. A fix of the
    settings is run through the entry point that gave it: its command for this run, then its
    dedup.yaml lines, pasted into dedup.yaml, with the refused command again. (The bands
    warning's `dedup run` command is run by test_quiet_cli.py's light-edits test.)"""
    home = tmp_path / "home"
    home.mkdir()
    project = _project(tmp_path / "project")
    env = {**_environment(home), "DAGSTER_HOME": str(home / ".dagster")}
    (home / ".dagster").mkdir()
    (home / ".dagster" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")

    def fails(command: str) -> subprocess.CompletedProcess:
        result = _run(command, "setup", project, env)
        assert result.returncode != 0, f"`{command}` was meant to be refused:\n{result.stderr[-3000:]}"
        return result

    def runs(command: str, why: str) -> None:
        _assert_ran(_run(command, why, project, env), why, command)

    def keeps(lines: str, command: str, why: str) -> None:
        """The dedup.yaml lines a fix gives, pasted into dedup.yaml: ``command`` then runs."""
        (project / SETTINGS).write_text(lines)
        try:
            runs(command, why)
        finally:
            (project / SETTINGS).unlink()

    # a fresh database: one asset names the command that builds it with its upstream
    single = f"{DAGSTER} asset materialize {MODULE} --select clusters"
    refused = fails(single)
    assert "Stack Trace" not in refused.stderr and "Traceback" not in refused.stderr
    runs(_printed(refused, r"^Run: (dagster .+)$"), "missing upstream table")
    runs(single, "the refused command, after the fix")

    # another threshold than the stored tables': the rebuild command, carrying the run's settings
    stale = single + """ --config-json '{"resources": {"dedup": {"config": {"jaccard_threshold": 0.9}}}}'"""
    refused = fails(stale)
    assert "Stack Trace" not in refused.stderr and "Traceback" not in refused.stderr
    runs(_printed(refused, r"^Run: (dagster .+)$"), "stale upstream settings")
    runs(stale, "the refused command, after the rebuild")

    # a file with its own column names, on each entry point: the command that runs once with the
    # fields mapping, then the dedup.yaml lines that keep it, with the refused command again
    fixture_as_a_dump(project / "pages.csv")
    own_names = f"{DEDUP} run --input pages.csv"
    refused = fails(own_names)
    runs(_printed(refused, ONCE), "missing required columns under dedup run: once")
    keeps(_settings_lines(refused, LASTING), own_names, "missing required columns under dedup run: dedup.yaml")
    by_make = "DEDUP_INPUT=pages.csv make run"
    refused = fails(by_make)
    assert "--config-json" not in refused.stdout + refused.stderr  # make run takes no options
    keeps(_settings_lines(refused, BY_MAKE), by_make, "missing required columns under make run: dedup.yaml")
    for command in (
        f"DEDUP_INPUT=pages.csv {DAGSTER} asset materialize {MODULE} --select documents",
        f"DEDUP_INPUT=pages.csv {DG} launch --assets documents",
    ):
        refused = fails(command)
        assert "Stack Trace" not in refused.stderr and "Traceback" not in refused.stderr
        once = _printed(refused, ONCE)
        assert once.startswith(command.split()[1].rsplit("/", 1)[1] + " ")  # dagster's or dg's own command
        runs(once, f"missing required columns under {once.split()[0]}: once")
        keeps(_settings_lines(refused, LASTING), command, f"missing required columns under {once.split()[0]}: dedup.yaml")
    # a release (make run's, above) fed back in: its cluster_id and cluster_size are renamed by
    # the fields it gives
    shutil.copy(project / "output" / "deduped_documents" / "part-00000.parquet", project / "kept.parquet")
    fed_back = f"{DEDUP} run --input kept.parquet"
    refused = fails(fed_back)
    runs(_printed(refused, ONCE), "reserved column names: once")
    keeps(_settings_lines(refused, LASTING), fed_back, "reserved column names: dedup.yaml")

    # Windows-1252 files, plain and gzipped, and UTF-16: the iconv command, then a run on what it wrote
    _legacy_encodings(project)
    for name, converted in (
        ("legacy.csv", "legacy.utf8.csv"), ("legacy.jsonl.gz", "legacy.utf8.jsonl.gz"), ("wide.csv", "wide.utf8.csv")
    ):
        refused = fails(f"{DEDUP} run --input {name}")
        runs(_printed(refused, r"Re-encode it as UTF-8.*, e\.g\. (.+)$"), f"iconv for {name}")
        runs(f"{DEDUP} run --input {converted}", f"the input iconv wrote for {name}")

    # incremental batches out of order: the command that adds the missing batch, then the
    # forget-batches command and the first batch's command that rebuild from an earlier batch
    (project / "batches").mkdir()
    fixture = pd.read_csv(FIXTURE, dtype=str, keep_default_na=False)
    for part, key in enumerate(("2026-11-01", "2026-11-02", "2026-11-03")):
        fixture.iloc[8 * part: 8 * part + 8].to_csv(project / "batches" / f"{key}.csv", index=False)
    runs(f"{DEDUP} register-batches", "registering the batches")
    batch = f"{DAGSTER} asset materialize {MODULE} --select 'group:incremental' --partition"
    runs(_printed(fails(f"{batch} 2026-11-02"), r"add it first: (.+)$"), "a batch before the one ahead of it")
    runs(f"{batch} 2026-11-02", "the refused batch, after the one ahead of it")
    again = fails(f"{batch} 2026-11-01")
    runs(_printed(again, r"out of the index with `(dedup forget-batches [^`]+)`"), "re-adding an earlier batch: forget")
    runs(_printed(again, r"in key order, starting with: (.+)$"), "re-adding an earlier batch: the first batch")
