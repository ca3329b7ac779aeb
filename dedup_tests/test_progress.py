"""Progress of the long steps: one mechanism (``streams.ThroughputLog``), throttled by a clock,
which every long step of a run reports through, without changing what the run writes."""

from __future__ import annotations

import re
from pathlib import Path

from dedup_assets.core.util import streams
from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.util.streams import ThroughputLog

from .conftest import sha256_of_files

HARD_CASES = Path(__file__).resolve().parents[1] / "data" / "hard_cases.csv"


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_line_at_most_every_interval_with_done_total_rate_and_time_to_go(monkeypatch):
    monkeypatch.setattr(streams, "PROGRESS_SECONDS", 5.0)
    clock, lines = FakeClock(), []
    progress = ThroughputLog(lines.append, "scored_pairs", 1_000, "candidate documents shingled", clock)
    clock.now += 4.9
    progress.advance(100)
    assert lines == []  # within the first interval: a step that ends now says nothing
    clock.now += 0.1
    progress.advance(150)
    assert lines == ["scored_pairs: 250/1,000 candidate documents shingled, 50 a second, about 15 s to go"]
    clock.now += 4.0
    progress.advance(250)
    assert len(lines) == 1  # throttled
    clock.now += 1.0
    progress.advance(0)
    assert lines[-1] == "scored_pairs: 500/1,000 candidate documents shingled, 50 a second, about 10 s to go"


def test_without_a_total_the_line_says_what_is_done_and_the_rate(monkeypatch):
    monkeypatch.setattr(streams, "PROGRESS_SECONDS", 5.0)
    clock, lines = FakeClock(), []
    progress = ThroughputLog(lines.append, "documents", None, "input records read", clock)
    clock.now += 8.0
    progress.advance(12)
    assert lines == ["documents: 12 input records read, 1.5 a second"]
    clock.now += 2.0
    progress.finish("storing them")  # the step goes on: the last line says what it does now
    assert lines[-1] == "documents: 12 input records read in 10 s; storing them"


def test_a_step_that_said_nothing_says_nothing_when_it_finishes(monkeypatch):
    monkeypatch.setattr(streams, "PROGRESS_SECONDS", 5.0)
    clock, lines = FakeClock(), []
    progress = ThroughputLog(lines.append, "documents", None, "input records read", clock)
    clock.now += 1.0
    progress.advance(12)
    progress.finish("storing them")
    assert lines == []


def test_every_long_step_reports_progress_and_the_release_is_the_same(tmp_path, monkeypatch):
    quiet = run_library(str(HARD_CASES), str(tmp_path / "quiet.duckdb"), str(tmp_path / "quiet"))
    monkeypatch.setattr(streams, "PROGRESS_SECONDS", 0.0)  # every advance logs
    lines: list[str] = []
    run_library(str(HARD_CASES), str(tmp_path / "told.duckdb"), str(tmp_path / "told"), log=lines.append)
    steps = {line.split(":")[0] for line in lines if re.search(r"\d+(/\d+)? .*, [\d.,]+ a second", line)}
    assert steps == {"documents", "fingerprinted", "scored_pairs", "clusters", "manifest"}
    finished = [line for line in lines if line.startswith("manifest: ")][-1]
    documents = quiet["documents"]
    kept = quiet["counts"]["representative_rows"]
    total = f"{documents + kept:,}"
    assert finished.startswith(f"manifest: {total}/{total} rows of deduped_documents and fingerprinted.parquet written")
    # the manifest names its own folder and database; every other file is the same
    quiet_files = sha256_of_files(tmp_path / "quiet")
    told_files = sha256_of_files(tmp_path / "told")
    quiet_files.pop("manifest.json"), told_files.pop("manifest.json")
    assert told_files == quiet_files



def test_the_documents_last_line_counts_every_record_while_the_next_batch_is_counted(monkeypatch):
    """Issue 49's 5,000 small files: "20,067 input records read" of 20,073 rows, another run
    20,068. The next batch is read and counted in another thread while the last is stored, so
    the count moved between two reads of it, and what it moved by was never counted."""
    import pyarrow as pa

    from dedup_assets.core.read.ingest import document_stream
    from dedup_assets.core.read.documents import InputStats

    class Counting(InputStats):
        """Records the other thread counts: 10 more each time the count is looked at."""

        seen = 0

        @property
        def rows(self) -> int:
            self.seen += 10
            return self.seen

        @rows.setter
        def rows(self, value: int) -> None:
            pass

    monkeypatch.setattr(streams, "PROGRESS_SECONDS", 0.0)
    stats, lines = Counting(), []
    batches = (pa.record_batch({"doc_id": [str(n)]}) for n in range(3))
    assert sum(len(batch) for batch in document_stream(batches, stats, lines.append, None)) == 3
    # the last count looked at, all of it: none lost between looks, none after the last batch
    assert lines[-1].startswith(f"documents: {stats.seen} input records read in ")
