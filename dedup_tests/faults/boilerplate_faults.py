"""Boilerplate: pages that share one long footer fill LSH buckets far past max_bucket_size. By
default the run is refused, naming the bucket and the way out (``hot_buckets: skip``); with skip
it runs, leaving those buckets out of the join, lists them in the release, and still accounts
for every page."""

from __future__ import annotations

import csv
import json
import random
import re

from dedup_assets.core.settings.model import Settings

from .hostile_input import read_and_rejected
from .outcome import Outcome, Work, account, library_release, library_run
from .writers import bodies, csv_lines, rows_of, words, write_csv

PAGES, WITH_FOOTER, MAX_BUCKET_SIZE = 300, 60, 20
# long beside a page's own 60 words (rows_of's): most bands of a footer page then hash only
# footer shingles, so most of the 60 pages share each band's bucket
FOOTER_WORDS = 1_500
BUCKET = re.compile(r"LSH bucket (\S+) holds ([\d,]+) different texts")


def footer_pages(work: Work) -> tuple[list[dict], list[str]]:
    """The pages (every fifth with the footer after its own words), written to ``pages.csv``, and
    the ids of those with the footer. Seeded apart from the matrix's draws, so both cases see the
    same pages."""
    rng = random.Random(5)
    footer = words(rng, FOOTER_WORDS)
    rows = rows_of(rng, PAGES, prefix="page")
    footed = rows[:: PAGES // WITH_FOOTER]
    for row in footed:
        row["body"] += " " + footer
    write_csv(work.folder / "pages.csv", csv_lines(rows))
    return rows, [row["doc_id"] for row in footed]


def injected(hot_buckets: str) -> str:
    return (
        f"{PAGES} pages, {WITH_FOOTER} of them with one {FOOTER_WORDS:,}-word footer; "
        f"max_bucket_size {MAX_BUCKET_SIZE}, hot_buckets {hot_buckets}"
    )


def hot_bucket_refused(work: Work) -> Outcome:
    footer_pages(work)
    settings = Settings(max_bucket_size=MAX_BUCKET_SIZE)
    run = library_run(work.folder, work.folder / "pages.csv", settings)
    message = str(run.failure or "")
    named = BUCKET.search(message)
    outcome = Outcome(injected("refuse (the default)"))
    outcome.expect(named is not None, f"not refused naming the bucket: {run.error}")
    outcome.expect("hot_buckets: skip" in message, "the refusal does not name hot_buckets: skip")
    outcome.expect(not (work.folder / "out").exists(), "a release was written")
    outcome.release = library_release(run)[0]
    # the message's head (which bucket) and the way out it names; the middle is advice
    way_out = " … or set hot_buckets: skip …" if "hot_buckets: skip" in message else ""
    outcome.observed = f"refused: {message.split(': every')[0]}{way_out}" if named else (
        read_and_rejected(run)
    )
    return outcome


def hot_bucket_skipped(work: Work) -> Outcome:
    rows, footed = footer_pages(work)
    settings = Settings(max_bucket_size=MAX_BUCKET_SIZE, hot_buckets="skip")
    run = library_run(work.folder, work.folder / "pages.csv", settings)
    outcome = Outcome(injected("skip"))
    account(outcome, bodies(rows), run)
    outcome.release, outcome.release_whole = library_release(run)
    outcome.expect(run.error is None, f"failed: {run.error}")
    if run.error is not None:
        outcome.observed = run.error
        return outcome
    release = work.folder / "out"
    with (release / "hot_buckets.csv").open(newline="", encoding="utf-8") as handle:
        listed = list(csv.DictReader(handle))
    with (release / "clusters.csv").open(newline="", encoding="utf-8") as handle:
        clustered = {row["doc_id"] for row in csv.DictReader(handle)}
    examples = [json.loads(row["example_doc_ids"]) for row in listed]
    counted = json.loads((release / "manifest.json").read_text())["counts"]["hot_buckets_skipped"]
    unclustered = sorted({row["doc_id"] for row in rows} - clustered)
    outcome.expect(listed, "hot_buckets.csv lists no bucket")
    outcome.expect(
        all(ids and set(ids) <= set(footed) for ids in examples),
        f"example doc_ids not of footer pages: {examples[:3]}",
    )
    outcome.expect(not unclustered, f"pages not in clusters.csv: {unclustered[:5]}")
    outcome.expect(
        counted == len(listed), f"manifest: {counted} skipped, the CSV lists {len(listed)}"
    )
    outcome.observed = (
        f"{len(run.documents)} documents; hot_buckets.csv lists {len(listed)} buckets (the "
        f"largest {max((int(row['texts']) for row in listed), default=0)} texts, e.g. "
        f"{', '.join(examples[0]) if examples else '—'}); manifest hot_buckets_skipped "
        f"{counted}; {len(clustered & {row['doc_id'] for row in rows})} of {PAGES} pages in "
        "clusters.csv"
    )
    return outcome
