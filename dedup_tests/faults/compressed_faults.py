"""Damaged compressed inputs: a byte inverted inside a .jsonl.gz, a .warc.gz cut short or with
bytes inverted inside one record's gzip member. Each damaged record must be rejected (or the file
refused with a clear error), and every intact record read."""

from __future__ import annotations

import gzip

from .outcome import Outcome, Work, account, library_release, library_run, reasons
from .writers import bodies, jsonl_lines, rows_of, write_warc


def jsonl_gz_flipped_byte(work: Work) -> Outcome:
    rows = rows_of(work.rng, 2_000)
    lines = jsonl_lines(rows)
    outcome = Outcome(
        "2,000-line .jsonl.gz, one byte inverted in the middle of a gzip member's data: "
        "in a file of 20 members (100 lines each), and in a file of one member"
    )
    seen, releases = [], []
    for per_member in (100, 2_000):
        members = [
            gzip.compress("".join(lines[start : start + per_member]).encode(), mtime=0)
            for start in range(0, len(lines), per_member)
        ]
        hit = len(members) // 2
        data = bytearray(b"".join(members))
        data[sum(map(len, members[:hit])) + len(members[hit]) // 2] ^= 0xFF
        path = work.folder / f"members-{len(members)}" / "lines.jsonl.gz"
        path.parent.mkdir()
        path.write_bytes(bytes(data))
        run = library_run(path.parent, path)
        label = f"{len(members)} members" if len(members) > 1 else "one member"
        damaged = {row["doc_id"] for row in rows[hit * per_member : (hit + 1) * per_member]}
        account(outcome, bodies(rows), run, damaged)
        seen.append(
            f"{label}: " + (run.error or f"{len(run.documents):,} read, rejects {reasons(run)}")
        )
        outcome.expect(
            run.error is None or run.error.startswith("InputError"),
            f"{label}: not a clear error: {run.error}",
        )
        outcome.expect(
            len(run.documents) == len(rows) - len(damaged) or run.error is not None,
            f"{label}: {len(run.documents):,} of the "
            f"{len(rows) - len(damaged):,} intact lines read",
        )
        said, whole = library_release(run)
        outcome.release_whole &= whole
        releases.append(f"{label}: {said}")
    outcome.observed, outcome.release = "; ".join(seen), "; ".join(releases)
    return outcome


def warc_cut_in_last_record(work: Work) -> Outcome:
    path = work.folder / "crawl.warc.gz"
    offsets = write_warc(path, 20, work.rng)
    intact = library_run(work.folder / "intact", path, release=False)
    path.write_bytes(path.read_bytes()[: offsets[-1] + 38])
    run = library_run(work.folder / "cut", path)
    outcome = Outcome("20-record .warc.gz cut 38 bytes into its last record")
    outcome.expect(
        len(intact.documents) == 20, f"the intact file gave {len(intact.documents)} documents"
    )
    account(outcome, bodies(intact.documents), run, {intact.documents[-1]["doc_id"]})
    last = run.rejects[-1] if run.rejects else {}
    outcome.expect(
        run.error is None
        and len(run.documents) == 19
        and last.get("reason") == "truncated"
        and last.get("input_row") == 20,
        "record 20 is not one truncated reject beside 19 documents",
    )
    outcome.release, outcome.release_whole = library_release(run)
    outcome.observed = run.error or (
        f"{len(run.documents)} documents; rejects: {reasons(run)}"
        + (f" (record {last['input_row']}: {last['detail']})" if last else "")
    )
    return outcome


def warc_corrupt_member(work: Work) -> Outcome:
    path = work.folder / "crawl.warc.gz"
    offsets = write_warc(path, 200, work.rng)
    intact = library_run(work.folder / "intact", path, release=False)
    data = bytearray(path.read_bytes())
    middle = (offsets[99] + offsets[100]) // 2
    for position in range(middle, middle + 8):
        data[position] ^= 0xFF
    path.write_bytes(bytes(data))
    run = library_run(work.folder / "damaged", path)
    outcome = Outcome("200-record .warc.gz, 8 bytes inverted inside record 100's gzip member")
    outcome.expect(
        len(intact.documents) == 200, f"the intact file gave {len(intact.documents)} documents"
    )
    account(outcome, bodies(intact.documents), run, {intact.documents[99]["doc_id"]})
    after = sum(document["input_row"] > 100 for document in run.documents)
    damaged = [reject for reject in run.rejects if reject["input_row"] == 100]
    outcome.expect(run.error is None and after == 100, f"{after} of the 100 records after it read")
    outcome.expect(
        bool(damaged) and damaged[0]["reason"] == "decode_error", "record 100 is not a decode_error"
    )
    outcome.release, outcome.release_whole = library_release(run)
    outcome.observed = run.error or (
        f"{len(run.documents)} documents, {after} of them after the damage; rejects: "
        f"{reasons(run)}" + (f" ({run.rejects[0]['detail']})" if run.rejects else "")
    )
    return outcome

