"""Helpers for batch streams: read ahead in a worker thread, work on several batches at once in
order, log throughput as they pass, and tell the threads producing them that the run is
stopping."""

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


class ThroughputLog:
    """Logs documents done, documents per second and time to go, at most every ``interval`` s."""

    def __init__(self, log: Progress, label: str, total: int, interval: float = 5.0):
        self.log, self.label, self.total, self.interval = log, label, total, interval
        self.started = self.last = time.monotonic()
        self.done = 0

    def advance(self, count: int) -> None:
        self.done += count
        now = time.monotonic()
        if now - self.last >= self.interval or self.done >= self.total:
            self.last = now
            rate = self.done / max(now - self.started, 1e-9)
            remaining = (self.total - self.done) / rate if rate else float("inf")
            self.log(
                f"{self.label}: {self.done:,}/{self.total:,} documents, {rate:,.0f} docs/s, "
                f"about {remaining:,.0f} s to go"
            )


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
