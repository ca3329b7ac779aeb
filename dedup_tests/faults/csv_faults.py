"""CSV faults: a quote never closed, a row short of a field, a body far above max_body_bytes.
Each must be the one reject of its row, the other rows read as they are."""

from __future__ import annotations

from .outcome import Outcome, Work, account, library_release, library_run, reasons
from .writers import MALFORMED, bodies, csv_lines, rows_of, write_csv


def csv_unclosed_quote(work: Work) -> Outcome:
    rows = rows_of(work.rng, 3)
    broken = csv_lines(rows[:1])[0].rsplit(",", 1)[0] + ',"' + rows[0]["body"]
    path = write_csv(work.folder / "unclosed.csv", [broken, *csv_lines(rows[1:])])
    run = library_run(work.folder, path)
    outcome = Outcome("row 1 of 3: body opens a quote that is never closed")
    account(outcome, {**bodies(rows), "d1": {"body": MALFORMED}}, run)
    read = sorted(document["doc_id"] for document in run.documents)
    outcome.expect(run.error is None and read == ["d2", "d3"], f"rows read: {read}")
    outcome.release, outcome.release_whole = library_release(run)
    outcome.observed = (
        run.error
        or f"read {', '.join(read) or 'nothing'}; rejects: {reasons(run)}"
        + (f" ({run.rejects[0]['detail']})" if run.rejects else "")
    )
    return outcome


def csv_short_row(work: Work) -> Outcome:
    rows = rows_of(work.rng, 4)
    short = ",".join([rows[1]["doc_id"], "faults", "example.com", "2026-01-31", rows[1]["body"]])
    lines = csv_lines(rows)
    lines[1] = short
    run = library_run(work.folder, write_csv(work.folder / "short.csv", lines))
    outcome = Outcome("row 2 of 4 has 5 fields, the header 6")
    account(outcome, {**bodies(rows), "d2": {"body": MALFORMED}}, run)
    outcome.expect(
        run.error is None and [r["input_row"] for r in run.rejects] == [2],
        "row 2 is not the one reject",
    )
    outcome.release, outcome.release_whole = library_release(run)
    outcome.observed = run.error or f"{len(run.documents)} documents; rejects: {reasons(run)}" + (
        f" ({run.rejects[0]['detail']})" if run.rejects else ""
    )
    return outcome


def csv_huge_body(work: Work) -> Outcome:
    rows = rows_of(work.rng, 3)
    rows[1]["body"] = "lorem " * (50 * 2**20 // 6)
    run = library_run(work.folder, write_csv(work.folder / "huge.csv", csv_lines(rows)))
    outcome = Outcome(
        f"row 2 of 3 has a {len(rows[1]['body']) / 2**20:.0f} MB body (max_body_bytes 10,000,000)"
    )
    account(outcome, bodies(rows), run)
    outcome.expect(
        run.error is None and [r["reason"] for r in run.rejects] == ["too_large"],
        "no too_large reject",
    )
    outcome.release, outcome.release_whole = library_release(run)
    outcome.observed = (
        run.error or f"run succeeded: {len(run.documents)} documents; rejects: {reasons(run)}"
    )
    return outcome

