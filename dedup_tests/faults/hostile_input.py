"""Hostile input: records made to break a reader. A lone surrogate, a line or row far above
max_body_bytes (the line in a small .jsonl.gz, a decompression bomb), a file in another
encoding, a few corrupt bytes, a column or field of the wrong type, control characters and
padding in ids. Each must stop only itself, by name, in bounded memory (or refuse the whole file
with how to fix it), and whatever is read must be as written or counted."""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from dedup_assets.core.release.files import MANIFEST_FILE
from dedup_assets.core.settings.model import Settings

from .fault_runs import library_run_in_child
from .outcome import (
    TABLES_QUERY,
    LibraryRun,
    Outcome,
    Work,
    account,
    library_release,
    library_run,
    reasons,
)
from .writers import HEADER, MALFORMED, bodies, csv_lines, jsonl_lines, rows_of, write_csv

# the bytes a reader must not let into a release, which they could break or hide in
CONTROL_BYTES = (b"\x00", b"\x1b", b"\x7f")


def read_and_rejected(run: LibraryRun) -> str:
    """The documents read and the rejects, with the first reject's detail."""
    return run.error or (
        f"{len(run.documents)} documents; rejects: {reasons(run)}"
        + (f" ({run.rejects[0]['detail']})" if run.rejects else "")
    )


def rejected_rows(run: LibraryRun) -> list[tuple[int, str]]:
    return [(reject["input_row"], reject["reason"]) for reject in run.rejects]


def ids(run: LibraryRun) -> list[str]:
    return [document["doc_id"] for document in run.documents]


def documents_written(folder: Path) -> int:
    """The rows of the documents table a run left in the case's database (0 without one)."""
    database = folder / "db.duckdb"
    if not database.exists():
        return 0
    with duckdb.connect(str(database), read_only=True) as connection:
        tables = connection.execute(TABLES_QUERY).fetchall()
        if ("documents",) not in tables:
            return 0
        return connection.execute("select count(*) from dedup.documents").fetchone()[0]


def jsonl_lone_surrogate(work: Work) -> Outcome:
    rows = rows_of(work.rng, 9)
    rows[4]["body"] += " \ud800 end"
    path = work.folder / "dump.jsonl"
    lines = jsonl_lines(rows)
    path.write_text("".join(lines), encoding="utf-8")  # json.dumps wrote it as the escape \ud800
    run = library_run(work.folder, path)
    outcome = Outcome(
        f'line 5 of {len(lines)} of a JSONL file has the escape "\\ud800" in its text'
    )
    account(outcome, {**bodies(rows), "d5": {"body": MALFORMED}}, run)
    detail = run.rejects[0]["detail"] if run.rejects else ""
    outcome.expect(
        run.error is None and rejected_rows(run) == [(5, "decode_error")],
        f"rejects: {rejected_rows(run)}",
    )
    outcome.expect(detail.startswith("line 5"), f"the reject does not name line 5: {detail}")
    expected_ids = [row["doc_id"] for row in rows if row["doc_id"] != "d5"]
    outcome.expect(ids(run) == expected_ids, f"documents: {ids(run)}")
    outcome.release, outcome.release_whole = library_release(run)
    outcome.observed = read_and_rejected(run)
    if run.error is None:
        documents, rejected = len(run.documents), len(run.rejects)
        outcome.observed += f"; {len(lines)} lines in = {documents} documents + {rejected} rejected"
    return outcome


def jsonl_gz_huge_line(work: Work) -> Outcome:
    rows = rows_of(work.rng, 6)
    lines = jsonl_lines(rows)
    path = work.folder / "bomb.jsonl.gz"
    piece = "all work and no play " * 50_000  # ~1 MB
    pieces = (100 if work.quick else 512) * 2**20 // len(piece)
    start = '{"id": "huge", "timestamp": "2026-01-31T12:00:00Z", "text": "'
    # written piece by piece, so the line is never held here either
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.writelines(lines[:3])
        handle.write(start)
        for _ in range(pieces):
            handle.write(piece)
        handle.write('"}\n')
        handle.writelines(lines[3:])
    line_bytes = len(start) + pieces * len(piece) + 2
    outcome = Outcome(
        f"line 4 of {len(lines) + 1} has {line_bytes / 2**20:,.0f} MiB of text, in a "
        f"{path.stat().st_size / 2**20:.1f} MiB .jsonl.gz (max_body_bytes 10,000,000)"
    )
    try:
        run, child = library_run_in_child(work.folder, path, release=True, timeout=600)
    except subprocess.TimeoutExpired:
        outcome.expect(False, "did not end within 600 s")
        outcome.observed = "did not end within 600 s"
        return outcome
    account(outcome, {**bodies(rows), "huge": {"body": MALFORMED}}, run)
    outcome.expect(
        run.error is None and rejected_rows(run) == [(4, "too_large")],
        f"rejects: {rejected_rows(run)}",
    )
    detail = run.rejects[0]["detail"] if run.rejects else ""
    # "line 4 has N bytes" is the line skipped to its newline; a body's size means it was parsed
    outcome.expect(detail.startswith("line 4 has"), f"not skipped unread: {detail}")
    outcome.expect(ids(run) == [row["doc_id"] for row in rows], f"documents: {ids(run)}")
    peak = child.get("peak_rss_mb", 0)
    # the imports and DuckDB alone take some 400 MB; holding the line would take several times it
    outcome.expect(peak < 1024, f"peak RSS {peak:,.0f} MB")
    outcome.release, outcome.release_whole = library_release(run)
    outcome.observed = read_and_rejected(run)
    if "seconds" in child:
        outcome.observed += f"; child run {child['seconds']:.1f} s, peak RSS {peak:,.0f} MB"
    return outcome


def csv_row_too_large(work: Work) -> Outcome:
    max_body_bytes = 100_000
    # what the issue allows a row: a body within the limit with every quote doubled, and 1 MiB
    allowed = 2 * max_body_bytes + 2**20
    rows = rows_of(work.rng, 5)
    rows[1]["body"] = "lorem " * ((allowed + 2**20) // 6)
    path = write_csv(work.folder / "wide_row.csv", csv_lines(rows))
    run = library_run(work.folder, path, Settings(max_body_bytes=max_body_bytes))
    outcome = Outcome(
        f"row 2 of 5 (line 3) has a body of {len(rows[1]['body']):,} bytes, so the row is above "
        f"the {allowed:,} a row may have with max_body_bytes {max_body_bytes:,}"
    )
    account(outcome, {**bodies(rows), "d2": {"body": MALFORMED}}, run)
    detail = run.rejects[0]["detail"] if run.rejects else ""
    outcome.expect(
        run.error is None and rejected_rows(run) == [(2, "too_large")],
        f"rejects: {rejected_rows(run)}",
    )
    # "the row has N bytes" is the scan's, which rejects the row before splitting it into fields
    outcome.expect(
        detail.startswith("line 3: the row has"), f"not rejected unparsed at line 3: {detail}"
    )
    outcome.expect(ids(run) == ["d1", "d3", "d4", "d5"], f"documents: {ids(run)}")
    outcome.release, outcome.release_whole = library_release(run)
    outcome.observed = read_and_rejected(run)
    return outcome


def cp1252_csv(work: Work) -> Outcome:
    rows = rows_of(work.rng, 100)
    accented = rows[::8]  # 13 of 100 rows: at least 10, and more than 1 in 100
    for row in accented:
        row["title"] = f"Café {row['title']}"
        row["body"] = f"crème brûlée, “quoted” – {row['body']}"
    path = write_csv(work.folder / "legacy.csv", csv_lines(rows), encoding="cp1252")
    hint = "iconv -f CP1252 -t UTF-8"
    run = library_run(work.folder, path)
    written = documents_written(work.folder)
    outcome = Outcome(
        f"a Windows-1252 CSV: {len(accented)} of {len(rows)} rows have accents and curly quotes"
    )
    # in the whole message: the table's is cut short, and the hint comes after the file's path
    outcome.expect(hint in str(run.failure), f"not refused with `{hint} …`: {run.error}")
    outcome.expect(written == 0, f"{written} rows written as documents")
    outcome.expect(not (work.folder / "out").exists(), "a release was written")
    outcome.release = library_release(run)[0]
    outcome.observed = (run.error or f"accepted: {len(run.documents)} documents") + (
        f"; documents written: {written}"
    )
    return outcome


def csv_replaced_characters(work: Work) -> Outcome:
    rows = rows_of(work.rng, 30)
    path = write_csv(work.folder / "mostly.csv", csv_lines(rows))
    data = path.read_bytes()
    # 3 bytes that are not UTF-8 in 2 rows: damage, too little to take the file for another
    # encoding; each must be read as U+FFFD and counted
    garbage = {"d7": b"\xff", "d19": b"\xe9\xe9"}
    known = bodies(rows)
    for doc_id, bad in garbage.items():
        body = known[doc_id]["body"].encode()
        damaged = body[:10] + bad + body[10:]
        data = data.replace(body, damaged, 1)
        known[doc_id] = {"body": damaged.decode("utf-8", errors="replace")}
    path.write_bytes(data)
    run = library_run(work.folder, path)
    outcome = Outcome(
        "a UTF-8 CSV of 30 rows, 3 bytes that are not UTF-8 in 2 of them (\\xff; \\xe9\\xe9)"
    )
    account(outcome, known, run)
    counts = {}
    if run.error is None:
        counts = json.loads((work.folder / "out" / MANIFEST_FILE).read_text())["counts"]
    counted = (counts.get("replaced_character_rows"), counts.get("replaced_characters"))
    outcome.expect(run.error is None and not run.rejects, read_and_rejected(run))
    outcome.expect(counted == (2, 3), f"manifest counts {counted}")
    outcome.release, outcome.release_whole = library_release(run)
    outcome.observed = read_and_rejected(run) + (
        f"; the manifest counts replaced_character_rows {counted[0]}, replaced_characters "
        f"{counted[1]}"
    )
    return outcome


def parquet_int_body(work: Work) -> Outcome:
    rows = rows_of(work.rng, 3)
    path = work.folder / "typed.parquet"
    columns = {name: [row[name] for row in rows] for name in HEADER}
    pq.write_table(pa.table({**columns, "body": pa.array([1, 2, 3], pa.int64())}), path)
    run = library_run(work.folder, path)
    outcome = Outcome("a Parquet file whose `body` column is int64", run.error or "accepted")
    outcome.expect(
        run.error is not None and "column body is int64, not text" in run.error,
        "not refused naming the column and its type",
    )
    # as reserved_columns: no documents table, so the refusal came before any row was read
    outcome.expect("documents" not in run.tables, "refused after the documents were read")
    outcome.release = library_release(run)[0]
    return outcome


def jsonl_number_text(work: Work) -> Outcome:
    rows = rows_of(work.rng, 5)
    lines = jsonl_lines(rows)
    lines[2] = json.dumps({"id": "d3", "text": 12345, "timestamp": rows[2]["crawled_at"]}) + "\n"
    path = work.folder / "dump.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    run = library_run(work.folder, path)
    outcome = Outcome('line 3 of 5 of a JSONL file has `"text": 12345`, a number')
    account(outcome, {**bodies(rows), "d3": {"body": MALFORMED}}, run)
    detail = run.rejects[0]["detail"] if run.rejects else ""
    outcome.expect(
        run.error is None and rejected_rows(run) == [(3, "invalid_field_type")],
        f"rejects: {rejected_rows(run)}",
    )
    outcome.expect('field "text"' in detail, f"the reject does not name the field: {detail}")
    outcome.expect(ids(run) == ["d1", "d2", "d4", "d5"], f"documents: {ids(run)}")
    outcome.release, outcome.release_whole = library_release(run)
    outcome.observed = read_and_rejected(run)
    return outcome


def doc_id_control_characters(work: Work) -> Outcome:
    rows = rows_of(work.rng, 6)
    controlled = {"d2": "d2\x00nul", "d3": "d3\x1besc", "d4": "d4\x7fdel"}
    for row in rows:
        row["doc_id"] = controlled.get(row["doc_id"], row["doc_id"])
    path = write_csv(work.folder / "ids.csv", csv_lines(rows))
    run = library_run(work.folder, path)
    outcome = Outcome("rows 2–4 of 6 of a CSV have doc_ids with a raw NUL, ESC and DEL byte")
    account(outcome, {**bodies(rows), **{i: {"body": MALFORMED} for i in controlled.values()}}, run)
    outcome.expect(
        run.error is None and rejected_rows(run) == [(n, "invalid_doc_id") for n in (2, 3, 4)],
        f"rejects: {rejected_rows(run)}",
    )
    shown = [reject["doc_id"] for reject in run.rejects]
    outcome.expect(
        not any(byte.decode() in doc_id for doc_id in shown for byte in CONTROL_BYTES),
        f"a reject shows its doc_id raw: {shown!r}",
    )
    raw = sorted(
        f"{written.name} has {byte!r}"
        for written in (work.folder / "out").glob("*.csv")
        for byte in CONTROL_BYTES
        if byte in written.read_bytes()
    )
    outcome.expect(run.error is None and not raw, "; ".join(raw))
    outcome.release, outcome.release_whole = library_release(run)
    outcome.observed = read_and_rejected(run) + (
        f"; rejects show {', '.join(shown)}; release CSVs with a raw control byte: "
        f"{', '.join(raw) or 'none'}"
    )
    return outcome


def padded_doc_ids(work: Work) -> Outcome:
    rows = rows_of(work.rng, 3)
    rows[0]["doc_id"], rows[1]["doc_id"] = " padded ", "padded"
    path = write_csv(work.folder / "padded.csv", csv_lines(rows))
    run = library_run(work.folder, path)
    outcome = Outcome("doc_ids `' padded '` and `'padded'` (and one more) in a CSV")
    account(outcome, bodies(rows), run)
    outcome.expect(
        run.error is None and sorted(ids(run)) == [" padded ", "d3", "padded"],
        f"documents: {ids(run)!r}",
    )
    outcome.expect(not run.rejects, f"rejects: {reasons(run)}")
    outcome.release, outcome.release_whole = library_release(run)
    outcome.observed = read_and_rejected(run) + f"; doc_ids {', '.join(map(repr, ids(run)))}"
    return outcome
