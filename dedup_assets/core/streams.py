"""Helpers for batch streams: read ahead in a worker thread, and log throughput as they pass."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

Progress = Callable[[str], None]
T = TypeVar("T")


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
