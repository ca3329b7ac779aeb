"""Batch streams worked on several at a time: in order, within bounds, errors raised where the
stream is read; and the fingerprinting stream giving the same tables however its batches fall
on its threads."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import replace

import duckdb
import pytest

from dedup_assets.core.sketch import kernels, fingerprints as sketch
from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.settings.model import Settings
from dedup_assets.core.util.streams import mapped_in_order

from .conftest import sha256_of_files
from .test_audit import _corpus, _generated


def test_items_come_back_in_order_however_long_each_takes_and_within_the_bound():
    taken, running, most = [], [0], [0]
    lock = threading.Lock()
    # the first three items wait for each other: a pool that ran fewer at once would break it
    together = threading.Barrier(3, timeout=10)

    def items():
        for item in range(20):
            taken.append(item)
            yield item

    def work(item: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        if item < 3:
            together.wait()
        time.sleep(0.02 * (item % 3 == 0))  # every third item is slower than those after it
        with lock:
            running[0] -= 1
        return item * item

    results = []
    for result in mapped_in_order(work, items(), workers=3):
        # at most `workers` items are taken beyond those handed out
        assert len(taken) <= len(results) + 1 + 3
        results.append(result)
    assert results == [item * item for item in range(20)]
    assert most[0] == 3


def test_each_thread_starts_with_the_initializer_and_an_error_reaches_the_reader():
    started = threading.local()
    seen = []

    def work(item: int) -> int:
        seen.append(getattr(started, "yes", False))
        if item == 5:
            raise ValueError("item 5 is bad")
        return item

    def initializer() -> None:
        started.yes = True

    stream = mapped_in_order(work, iter(range(10)), workers=2, initializer=initializer)
    assert [next(stream) for _ in range(5)] == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="item 5 is bad"):
        next(stream)
    assert seen and all(seen)


def _tables(database):
    with duckdb.connect(str(database), read_only=True) as connection:
        return {
            name: connection.execute(f"select * from dedup.{name}").fetchall()
            for name in ("fingerprinted", "audit_true_pairs", "scored_pairs", "clusters")
        }


def test_fingerprinting_in_many_small_batches_gives_the_tables_and_files_of_one_batch(tmp_path, monkeypatch):
    corpus = _corpus(tmp_path / "pages.csv", _generated(600, seed=45))
    # every document audited, so the probe is fed from the batches on every thread
    settings = Settings(audit_sample_size=0)
    # three batches at once, whatever this machine's cores, where numba lets threads share kernels
    many = (3, 1) if kernels.threads_may_share_kernels() else (1, 1)
    for name, batch_size, workers in (("one", 100_000, (1, 2)), ("many", 7, many)):
        monkeypatch.setattr(sketch, "stream_workers", lambda workers=workers: workers)
        folder = tmp_path / name
        run_library(str(corpus), f"{folder}.duckdb", str(folder), replace(settings, batch_size=batch_size))
    one, many = _tables(tmp_path / "one.duckdb"), _tables(tmp_path / "many.duckdb")
    assert one["audit_true_pairs"], "the corpus must have true pairs"
    assert one == many
    files = [sha256_of_files(tmp_path / name) for name in ("one", "many")]
    for listed in files:  # the manifest records the settings, batch_size among them
        del listed["manifest.json"]
    assert files[0] == files[1]


@pytest.mark.parametrize(
    ("cores", "expected"), [(1, (1, 1)), (2, (2, 1)), (3, (3, 1)), (4, (4, 1)), (5, (1, 5)), (6, (3, 2)), (8, (4, 2))]
)
def test_batches_at_once_divide_the_cores_evenly(monkeypatch, cores, expected):
    monkeypatch.setattr(sketch.os, "sched_getaffinity", lambda pid: set(range(cores)))
    monkeypatch.setattr(sketch.kernels, "threads_may_share_kernels", lambda: True)
    assert sketch.stream_workers() == expected
    monkeypatch.setattr(sketch.kernels, "threads_may_share_kernels", lambda: False)
    assert sketch.stream_workers() == (1, cores)


WORKQUEUE_RUN = """
import sys
from dataclasses import replace
import numba
from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.settings.model import Settings
from dedup_assets.core.sketch import kernels, fingerprints as sketch
run_library(sys.argv[1], sys.argv[2], sys.argv[3], replace(Settings(), batch_size=7))
print(numba.threading_layer(), sketch.stream_workers())
"""


def test_without_a_thread_safe_layer_the_batches_go_one_at_a_time(tmp_path):
    """numba's workqueue layer ends the process when two threads run parallel kernels at once."""
    corpus = _corpus(tmp_path / "pages.csv", _generated(300, seed=46))
    done = subprocess.run(
        [sys.executable, "-c", WORKQUEUE_RUN, str(corpus), str(tmp_path / "run.duckdb"), str(tmp_path / "out")],
        env={**os.environ, "NUMBA_THREADING_LAYER": "workqueue"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    cores = len(os.sched_getaffinity(0))
    assert done.stdout.split("\n")[-2] == f"workqueue (1, {cores})"
