"""Scale: N identical documents beside 1,000 distinct ones, each N in a child process of its own.
All must fold into one cluster, and the time must grow no faster than about linearly in N."""

from __future__ import annotations

import math
import random
import shutil
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .fault_runs import library_in_child
from .outcome import Outcome, Work, check_release
from .writers import HEADER, words


def identical_documents(work: Work) -> Outcome:
    sizes = (20_000, 100_000) if work.quick else (100_000, 300_000, 1_000_000)
    outcome = Outcome(
        f"N identical documents + 1,000 distinct ones, N = {', '.join(f'{n:,}' for n in sizes)}"
    )
    measured, releases = [], []
    for copies in sizes:
        folder = work.folder / f"n{copies}"
        folder.mkdir()
        path = write_identical(folder / "input.parquet", copies, work.rng)
        # in a child, so that its time and peak memory are the run's alone
        result = library_in_child(path, folder / "db.duckdb", folder / "out")
        if "error" in result:
            outcome.expect(False, f"N={copies:,}: {result['error']}")
            releases.append(f"N={copies:,}: none (the run failed)")
            break
        counts = result["counts"]
        records = copies + 1_000
        lost = records - counts["document_rows"] - counts["rejected_document_rows"]
        outcome.lost = (outcome.lost or 0) + lost
        outcome.expect(
            counts["representative_rows"] == 1_001,
            f"N={copies:,}: kept {counts['representative_rows']:,}",
        )
        measured.append(
            (copies, result["seconds"], result["peak_rss_mb"], counts["representative_rows"])
        )
        said, whole = check_release(folder / "out")
        outcome.release_whole &= whole
        releases.append(f"N={copies:,}: {said}")
        shutil.rmtree(folder)  # the disk is small
    if len(measured) >= 2:
        (small, small_s, *_), (large, large_s, *_) = measured[0], measured[-1]
        exponent = math.log(large_s / small_s) / math.log(large / small)
        outcome.expect(exponent <= 1.2, f"time grows as N^{exponent:.2f}")
        linear = f"time ~ N^{exponent:.2f}"
    else:
        linear = "too few sizes to tell"
    outcome.observed = (
        "; ".join(
            f"N={copies:,}: {seconds:.1f} s ({seconds / (copies + 1_000) * 1e6:.1f} µs/doc), "
            f"peak RSS {rss:,.0f} MB, kept {kept:,}"
            for copies, seconds, rss, kept in measured
        )
        + f"; {linear}"
    )
    outcome.release = "; ".join(releases)
    return outcome


def write_identical(path: Path, copies: int, rng: random.Random) -> Path:
    """``copies`` documents with one body, then 1,000 with bodies of their own, as Parquet."""
    body = words(rng, 200)
    schema = pa.schema(
        [(name, pa.timestamp("us") if name == "crawled_at" else pa.string()) for name in HEADER]
    )

    def table(ids: list[str], texts: list[str]) -> pa.Table:
        count = len(ids)
        return pa.table(
            {
                "doc_id": ids,
                "source": ["faults"] * count,
                "domain": [f"site{i % 997}.example.com" for i in range(count)],
                "crawled_at": pa.array([datetime(2026, 1, 31, 12)] * count, pa.timestamp("us")),
                "title": ["The same page"] * count,
                "body": texts,
            },
            schema=schema,
        )

    chunk = 50_000
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, copies, chunk):
            count = min(chunk, copies - start)
            writer.write_table(
                table([f"copy-{i}" for i in range(start, start + count)], [body] * count)
            )
        writer.write_table(
            table([f"own-{i}" for i in range(1_000)], [words(rng, 200) for _ in range(1_000)])
        )
    return path

