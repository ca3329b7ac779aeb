"""Helpers for batch streams: read ahead in a worker thread, work on several batches at once in
order, log a step's progress as they pass (every long step logs through :class:`ThroughputLog`),
and tell the threads producing them that the run is stopping."""

from __future__ import annotations

import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

Progress = Callable[[str], None]
T = TypeVar("T")
R = TypeVar("R")


def prefetched(items: Iterator[T]) -> Iterator[T]:
    """``items``, each produced in a worker thread while the caller handles the one before.
    Worth it where producing and consuming both release the GIL (Arrow compute, compiled kernels,
    DuckDB), which is how a batch stream uses both cores."""
    end = object()
    with ThreadPoolExecutor(max_workers=1) as worker:
        pending = worker.submit(next, items, end)
        while (item := pending.result()) is not end:
            pending = worker.submit(next, items, end)
            yield item


def mapped_in_order(
    work: Callable[[T], R], items: Iterator[T], workers: int, initializer: Callable[[], None] | None = None
) -> Iterator[R]:
    """``work(item)`` for each of ``items``, on ``workers`` threads at once (each started with
    ``initializer``), yielded in the items' order; at most ``workers`` more items are taken than
    have been yielded. For work that releases the GIL, where a batch per thread keeps the cores
    busier than one batch split over them all."""
    with ThreadPoolExecutor(max_workers=workers, initializer=initializer) as pool:
        pending: deque = deque()
        for item in items:
            pending.append(pool.submit(work, item))
            if len(pending) > workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


# at most one progress line per this many seconds, and none before it: a step that ends sooner
# says nothing. Read when a log is made, so a test can set it to 0 to see every line.
PROGRESS_SECONDS = 5.0


class ThroughputLog:
    """A long step's progress: done of ``total`` (in ``unit``), the rate and the time to go, at
    most every :data:`PROGRESS_SECONDS` and never within the first. ``total`` None: not known
    before the end (an input read record by record), and the line says done and rate. Safe to
    advance from several threads (the release's files are written two at a time)."""

    def __init__(
        self, log: Progress, label: str, total: int | None, unit: str = "documents",
        clock: Callable[[], float] = time.monotonic,
    ):
        self.log, self.label, self.total, self.unit, self.clock = log, label, total, unit, clock
        self.interval = PROGRESS_SECONDS
        self.started = self.last = clock()
        self.done = 0
        self.said = False
        self._lock = threading.Lock()

    def advance(self, count: int) -> None:
        with self._lock:
            self.done += count
            now = self.clock()
            if now - self.last < self.interval:
                return
            self.last, self.said = now, True
            rate = self.done / (now - self.started) if now > self.started else 0.0
            pace = f"{rate:,.0f}" if rate >= 10 else f"{rate:,.1f}"
            if self.total is None:
                self.log(f"{self.label}: {self.done:,} {self.unit}, {pace} a second")
                return
            remaining = f"about {(self.total - self.done) / rate:,.0f} s to go" if rate else "time to go not known yet"
            self.log(f"{self.label}: {self.done:,}/{self.total:,} {self.unit}, {pace} a second, {remaining}")

    def finish(self, then: str) -> None:
        """Where a line was said, one more: all is done, and ``then``, what the step does next,
        so that a step that goes on after its count (storing what it read) is not left at a
        line that was not its last."""
        with self._lock:
            if self.said:
                self.log(f"{self.label}: {self.done:,} {self.unit} in {self.clock() - self.started:,.0f} s; {then}")


class RunStopped(KeyboardInterrupt):
    """A stream given up because its run is stopping: the interrupt, raised in a thread the
    signal never reaches (Dagster takes a step raising a KeyboardInterrupt for interrupted)."""


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """Set ``stop`` on SIGINT or SIGTERM while the block runs, before the handler the signal had
    runs (Dagster's, which raises in the main thread). A thread the interrupt never reaches, such
    as one fetching for a stream DuckDB reads in a thread of its own, watches it. A signal with no
    Python handler (ignored, or ending the process) is left alone, as is a block outside the
    main thread, where no handler can be set: ``stop`` is then never set."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {
        signum: handler for signum in (signal.SIGINT, signal.SIGTERM) if callable(handler := signal.getsignal(signum))
    }

    def stopping(signum, frame) -> None:
        stop.set()
        before[signum](signum, frame)

    for signum in before:
        signal.signal(signum, stopping)
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
