"""Inputs that are whole but awkward, and settings out of range: a glob over a symlink loop,
reserved column names, crawled_at values, a UTF-16 file, a missing input, cells a spreadsheet
would run as formulas, bad settings. Each must be read, rejected or refused by name, before any
work where it is refused."""

from __future__ import annotations

import csv
import json
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dedup_assets.core.settings.model import Settings, SettingsError

from .fault_runs import library_run_in_child, run_cli
from .outcome import Outcome, Work, account, library_release, library_run, reasons
from .writers import HEADER, bodies, csv_lines, rows_of, write_csv

FORMULA = "=cmd|' /C calc'!A0"
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet runs as a formula


def glob_symlink_loop(work: Work) -> Outcome:
    root = work.folder / "tree"
    rows = rows_of(work.rng, 6)
    write_csv(root / "a.csv", csv_lines(rows[:3]))
    write_csv(root / "sub" / "b.csv", csv_lines(rows[3:]))
    (root / "sub" / "loop").symlink_to(root, target_is_directory=True)
    (root / "again").symlink_to(root / "sub", target_is_directory=True)
    (root / "link.csv").symlink_to(root / "a.csv")
    outcome = Outcome(
        "glob `**/*.csv` over a folder with a symlink loop, a linked folder and a linked file"
    )
    started = time.monotonic()
    try:
        run, _ = library_run_in_child(work.folder, root / "**" / "*.csv", timeout=120)
    except subprocess.TimeoutExpired:
        outcome.expect(False, "did not end within 120 s")
        outcome.observed = "did not end within 120 s"
        return outcome
    seconds = time.monotonic() - started
    account(outcome, bodies(rows), run)
    # a file reached by several paths is named by its first in sorted order, so compare real paths
    files = sorted(
        {Path(document["source_file"]).relative_to(root).as_posix() for document in run.documents}
    )
    real = sorted(
        {
            Path(document["source_file"]).resolve().relative_to(root).as_posix()
            for document in run.documents
        }
    )
    outcome.expect(
        run.error is None and real == ["a.csv", "sub/b.csv"] and not run.rejects,
        f"files read: {files}, rejects: {reasons(run)}",
    )
    outcome.observed = run.error or (
        f"ended in {seconds:.1f} s; read {', '.join(files)} (really "
        f"{', '.join(real)}); rejects: {reasons(run)}"
    )
    return outcome


def reserved_columns(work: Work) -> Outcome:
    rows = rows_of(work.rng, 2)
    with_cluster = work.folder / "cluster" / "input.csv"
    write_csv(
        with_cluster, [line + ",c1" for line in csv_lines(rows)], header=[*HEADER, "cluster_id"]
    )
    with_source = work.folder / "source" / "input.parquet"
    with_source.parent.mkdir()
    pq.write_table(
        pa.Table.from_pylist([{**row, "source_file": "elsewhere.csv"} for row in rows]), with_source
    )
    outcome = Outcome(
        "a CSV with a `cluster_id` column; a Parquet file with a `source_file` column"
    )
    seen = []
    for name, path in (("cluster_id", with_cluster), ("source_file", with_source)):
        run = library_run(path.parent, path)
        before_work = run.error is not None and "documents" not in run.tables
        outcome.expect(
            before_work and name in run.error, f"{name}: not refused before any work: {run.error}"
        )
        seen.append(run.error or f"{name}: accepted, {len(run.documents)} documents")
    outcome.release = "none (refused)" if outcome.expected else "—"
    outcome.observed = " / ".join(seen)
    return outcome


def crawled_at_values(work: Work) -> Outcome:
    values = {
        "d1": ("2026-02-30", None),
        "d2": ("2026-01-31T12:00:00.123456Z", datetime(2026, 1, 31, 12, 0, 0, 123456)),
        "d3": ("2026-01-31 12:00:00.000001", datetime(2026, 1, 31, 12, 0, 0, 1)),
        "d4": ("2026-01-31T12:00:00.5+02:00", datetime(2026, 1, 31, 10, 0, 0, 500000)),
    }
    rows = rows_of(work.rng, 4)
    for row in rows:
        row["crawled_at"] = values[row["doc_id"]][0]
    path = write_csv(work.folder / "dates.csv", csv_lines(rows))
    known = {
        row["doc_id"]: {"body": row["body"], "crawled_at": values[row["doc_id"]][1]} for row in rows
    }
    outcome = Outcome(
        "crawled_at `2026-02-30` beside three values with microseconds; batch_size 1 and 4096"
    )
    tables, releases = {}, []
    for batch_size in (1, 4096):
        run = library_run(
            work.folder / f"batch-{batch_size}", path, Settings(batch_size=batch_size)
        )
        account(outcome, known, run)
        tables[batch_size] = (
            [(d["doc_id"], d["crawled_at"]) for d in run.documents],
            [(r["input_row"], r["reason"]) for r in run.rejects],
        )
        outcome.expect(run.error is None, f"batch_size {batch_size}: {run.error}")
        said, whole = library_release(run)
        outcome.release_whole &= whole
        releases.append(f"batch {batch_size}: {said}")
    outcome.expect(tables[1] == tables[4096], "batch sizes 1 and 4096 give different tables")
    outcome.expect(
        tables[4096][1] == [(1, "invalid_crawled_at")], "2026-02-30 is not the one reject"
    )
    shown = {
        size: ", ".join(
            f"{doc}={stamp.isoformat(timespec='microseconds') if stamp else None}"
            for doc, stamp in documents
        )
        for size, (documents, _) in tables.items()
    }
    outcome.observed = (
        f"batch 1: {shown[1]}; "
        + ("batch 4096 the same" if tables[1] == tables[4096] else f"batch 4096: {shown[4096]}")
        + f"; rejects: {tables[4096][1]}"
    )
    outcome.release = "; ".join(releases)
    return outcome


def utf16_csv(work: Work) -> Outcome:
    path = write_csv(work.folder / "wide.csv", csv_lines(rows_of(work.rng, 3)), encoding="utf-16")
    run = library_run(work.folder, path)
    outcome = Outcome(
        "a UTF-16 CSV (with its byte-order mark)",
        run.error or f"accepted: {len(run.documents)} documents",
    )
    outcome.expect(run.error is not None and "UTF-16" in run.error, "no error naming UTF-16")
    outcome.release = library_release(run)[0]
    return outcome


def missing_input(work: Work) -> Outcome:
    run = library_run(work.folder, work.folder / "no-such-folder")
    outcome = Outcome("DEDUP_INPUT is a folder that does not exist", run.error or "accepted")
    outcome.expect(
        run.error is not None
        and any(words_ in run.error for words_ in ("no such", "does not exist")),
        "no clear error",
    )
    outcome.release = library_release(run)[0]
    return outcome


def formula_cells(work: Work) -> Outcome:
    rows = rows_of(work.rng, 6)
    rows[0].update(doc_id=FORMULA, title=FORMULA)
    rows[1].update(doc_id="@SUM(1+1)*" + FORMULA[1:])
    # a duplicate of the one before, so both reach the pair and cluster files
    rows[2].update(doc_id="-2+3+" + FORMULA[1:], body=rows[1]["body"])
    # a reject, for rejected_documents.csv
    rows[3].update(doc_id="+" + FORMULA[1:], crawled_at="2026-02-30")
    run = library_run(work.folder, write_csv(work.folder / "formulas.csv", csv_lines(rows)))
    outcome = Outcome(
        f"doc_ids and a title such as `{FORMULA}` (a singleton, a duplicate pair, a reject)"
    )
    account(outcome, bodies(rows), run)
    outcome.release, outcome.release_whole = library_release(run)
    if run.error is not None:
        outcome.expect(False, run.error)
        outcome.observed = run.error
        return outcome
    out = work.folder / "out"
    raw, quoted = [], 0
    for path in sorted(out.glob("*.csv")):
        with path.open(newline="", encoding="utf-8") as handle:
            for cell in (cell for row in csv.reader(handle) for cell in row if "cmd|" in cell):
                if cell.startswith(FORMULA_STARTS):
                    raw.append(f"{path.name}: {cell}")
                elif cell.startswith("'") and cell[1:].startswith(FORMULA_STARTS):
                    quoted += 1
    parquet_ids = set(
        pq.read_table(out / "fingerprinted.parquet", columns=["doc_id"]).column(0).to_pylist()
    )
    titles = set(
        pq.read_table(out / "deduped_documents", columns=["title"]).column(0).to_pylist()
    )
    raw_in_parquet = {row["doc_id"] for row in rows[:3]} <= parquet_ids and FORMULA in titles
    outcome.expect(not raw and quoted > 0, f"cells a spreadsheet would run: {raw[:3]}")
    outcome.expect(raw_in_parquet, "Parquet does not keep the values as they are")
    outcome.observed = (
        f"{quoted} CSV cells written with a leading ', {len(raw)} raw"
        + (f" ({'; '.join(raw[:2])})" if raw else "")
        + f"; Parquet keeps them raw: {'yes' if raw_in_parquet else 'NO'}"
    )
    return outcome


BAD_SETTINGS = {
    "batch_size": 0,
    "max_body_bytes": -1,
    "max_pair_slots": -1,
    "memory_budget_mb": 0,
    "shingle_size": 100_000,
    "jaccard_threshold": 1.5,
}


def bad_settings(work: Work) -> Outcome:
    through_cli = ["batch_size"] if work.quick else ["batch_size", "jaccard_threshold"]
    outcome = Outcome(
        ", ".join(f"{name} {value}" for name, value in BAD_SETTINGS.items())
        + f" (each alone; {' and '.join(through_cli)} through the CLI too)"
    )
    accepted = []
    for name, value in BAD_SETTINGS.items():
        try:
            Settings(**{name: value})
        except SettingsError:
            continue
        accepted.append(f"{name}={value}")
    outcome.expect(not accepted, f"accepted: {accepted}")
    said = []
    for name in through_cli:
        config = json.dumps({"resources": {"dedup": {"config": {name: BAD_SETTINGS[name]}}}})
        folder = work.folder / name
        folder.mkdir()
        returncode, cli = run_cli(folder, work.corpus_small, args=("--config-json", config))
        outcome.expect(
            returncode == 1 and name in cli.error, f"CLI {name}: exit {returncode}: {cli.error}"
        )
        outcome.expect(
            not cli.database.exists(), f"CLI {name}: the run made its database before refusing"
        )
        said.append(
            f"CLI {name}: exit {returncode}, {cli.error}"
            + ("" if cli.database.exists() else " (no database made)")
        )
    outcome.observed = (
        f"Settings refused {len(BAD_SETTINGS) - len(accepted)} of {len(BAD_SETTINGS)}"
        + (f" (accepted {', '.join(accepted)})" if accepted else "")
        + "; "
        + "; ".join(said)
    )
    outcome.release = "none (refused)" if outcome.expected else "—"
    return outcome
