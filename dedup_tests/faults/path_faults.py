"""Literal paths: file names and batch keys with ``*``, ``?`` or ``[`` in them, two batch files
that differ only in case, and an output folder inside the input folder. A name is read as
itself, once; only an input path that names no file is a pattern. A batch key's release is its
own folder; keys one file system would take for one are refused by name; and what the
pipeline wrote is not read back as input."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dedup_assets.core.read.batches import find_batches, key_path_name
from dedup_assets.core.pipeline.library import run_batch, run_library

from .hostile_input import read_and_rejected
from .outcome import (
    LibraryRun,
    Outcome,
    Work,
    account,
    check_release,
    describe_error,
    library_release,
    library_run,
    read_library_run,
)
from .writers import bodies, csv_lines, rows_of, write_csv


def write_named(folder: Path, name: str, work: Work) -> list[dict]:
    """Three rows in ``<name>.parquet`` or ``.csv`` (by the name's suffix), their doc_ids
    ``<stem>#1`` …, so each document tells which file it came from."""
    path = folder / name
    stem = path.name.removesuffix(path.suffix)
    rows = rows_of(work.rng, 3, prefix=f"{stem}#")
    if path.suffix == ".parquet":
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        write_csv(path, csv_lines(rows))
    return rows


def misfiled(run: LibraryRun) -> list[str]:
    """Documents whose source_file is not the file their doc_id names."""
    return [
        f"{document['doc_id']} from {Path(document['source_file']).name}"
        for document in run.documents
        if not Path(document["source_file"]).name.startswith(document["doc_id"].split("#")[0] + ".")
    ]


def read_as_named(work: Work, names: list[str], read: str | None = None) -> Outcome:
    """The files ``names`` in one folder, the folder (or the file ``read``) run: each file read
    must come out once, each row under its own source_file, and no other."""
    folder = work.folder / "in"
    written = {name: write_named(folder, name, work) for name in names}
    source = folder / read if read else folder
    run = library_run(work.folder, source)
    outcome = Outcome(
        f"{', '.join(f'`{name}`' for name in names)} in the input folder"
        + (f"; the input path names `{read}`" if read else "")
    )
    known = bodies([row for name in ([read] if read else names) for row in written[name]])
    account(outcome, known, run)
    ids = [document["doc_id"] for document in run.documents]
    outcome.expect(run.error is None and sorted(ids) == sorted(known), f"documents: {ids}")
    outcome.expect(not run.rejects, f"rejects: {read_and_rejected(run)}")
    outcome.expect(not misfiled(run), f"under another file: {misfiled(run)}")
    files = sorted({Path(document["source_file"]).name for document in run.documents})
    outcome.release, outcome.release_whole = library_release(run)
    outcome.observed = read_and_rejected(run) + f"; from {', '.join(files) or 'no file'}"
    return outcome


def bracketed_file_name(work: Work) -> Outcome:
    return read_as_named(work, ["a1.parquet", "a[1].parquet"])


def starred_file_name(work: Work) -> Outcome:
    return read_as_named(work, ["b1.parquet", "b2.parquet", "b*.parquet"])


def bracketed_input_path(work: Work) -> Outcome:
    return read_as_named(work, ["x1.csv", "x[1].csv"], read="x[1].csv")


def released_ids(release: Path, name: str) -> list[str]:
    with (release / name).open(newline="", encoding="utf-8") as handle:
        return [row["doc_id"] for row in csv.DictReader(handle)]


def pattern_batch_keys(work: Work) -> Outcome:
    keys = ["k*", "k?", "k[1]"]
    folder, output = work.folder / "batches", work.folder / "out"
    written = {key: write_named(folder, f"{key}.csv", work) for key in keys}
    batches = find_batches(folder)
    ran, failed = [], []
    for key in batches.keys():  # key order, as the sensor adds them
        try:
            run_batch(batches, key, str(work.folder / "index.duckdb"), str(output))
            ran.append(key)
        except Exception as error:  # the failure is the observation
            failed.append(f"{key}: {describe_error(error)}")
    outcome = Outcome(
        f"batch files {', '.join(f'`{key}.csv`' for key in keys)}, each added in key order "
        "(run_batch)"
    )
    outcome.expect(ran == sorted(keys), f"ran {ran}; failed: {failed}")
    outcome.lost, seen, verdicts = 0, [], []
    for key in ran:
        release = output / "batches" / key_path_name(key)
        own = {row["doc_id"] for row in written[key]}
        clustered = released_ids(release, "clusters.csv")
        rejected = released_ids(release, "rejected_documents.csv")
        outcome.lost += len(own - set(clustered)) - len(rejected)
        outcome.altered += len(set(clustered) - own)
        batch = json.loads((release / "manifest.json").read_text())["batch"]
        outcome.expect(batch == key, f"{release.name} is the release of batch {batch!r}")
        said, whole = check_release(release)
        outcome.release_whole &= whole
        verdicts.append(f"{release.name} {said}")
        seen.append(
            f"{release.relative_to(output)}: {len(clustered)} doc_ids, "
            f"{len(set(clustered) & own)} of them its own"
        )
    outcome.expect(not outcome.altered, f"{outcome.altered} doc_ids in another key's release")
    outcome.release = "; ".join(verdicts) or "none"
    outcome.observed = f"{len(ran)} of {len(keys)} batches ran; " + "; ".join(seen + failed)
    return outcome


def case_twin_batch_keys(work: Work) -> Outcome:
    folder, output = work.folder / "batches", work.folder / "out"
    for key in ("Week1", "week1"):
        write_named(folder, f"{key}.csv", work)
    batches = find_batches(folder)
    refusals = {}
    for key in batches.blocked():
        try:
            run_batch(batches, key, str(work.folder / "index.duckdb"), str(output))
        except Exception as error:  # the refusal is the observation
            refusals[key] = str(error)
    outcome = Outcome("batch files `Week1.csv` and `week1.csv` in one batch folder")
    outcome.expect(batches.keys() == [], f"runnable keys: {batches.keys()}")
    outcome.expect(sorted(refusals) == ["Week1", "week1"], f"refused: {sorted(refusals)}")
    for key, message in refusals.items():
        outcome.expect(
            "Week1.csv and week1.csv" in message and "Rename" in message,
            f"{key}: refused without naming both files and a rename: {message}",
        )
    outcome.expect(not output.exists(), "a release was written")
    outcome.release = "none (refused)" if not output.exists() else "a release was written"
    # both keys are refused with one message
    outcome.observed = (
        f"{' and '.join(refusals)} refused: {' / '.join(sorted(set(refusals.values())))}"
        if refusals
        else "nothing refused"
    )
    return outcome


def output_inside_input(work: Work) -> Outcome:
    folder = work.folder / "in"
    rows = rows_of(work.rng, 20)
    write_csv(folder / "docs.csv", csv_lines(rows))
    database, output = work.folder / "db.duckdb", folder / "out"
    logs: list[list[str]] = [[], []]
    counts = [
        run_library(str(folder), str(database), str(output), log=log.append)["counts"]
        for log in logs
    ]
    run = read_library_run(database, output, None)
    outcome = Outcome("output_dir `in/out` inside the input folder `in`, the run made twice")
    account(outcome, bodies(rows), run)
    differ = sorted(name for name in counts[0] if counts[0][name] != counts[1].get(name))
    outcome.expect(not differ, f"counts differ: {differ}")
    said = [line for line in logs[1] if line.startswith("documents: not read")]
    outcome.expect(
        len(said) == 1 and str(output) in said[0],
        "the second run did not say it left out the output",
    )
    outcome.release, outcome.release_whole = check_release(output)
    outcome.observed = (
        f"second run: {counts[1]['document_rows']} documents, "
        f"{counts[1]['rejected_document_rows']} rejected, counts "
        f"{'as the first run' if not differ else 'unlike the first run'}; "
        f"logged: {said[0] if said else 'nothing left out'}"
    )
    return outcome
