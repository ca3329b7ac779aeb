"""The peer runs, each in its own measured process (``peers.run``)."""

from __future__ import annotations

import sys
from importlib.util import find_spec
from pathlib import Path

from .common import INSTALL_HINT, BenchmarkError, progress, run_json_child
from .peer_engines import ENGINES, HARNESS_MODULES


def peer_label(engine: str) -> str:
    threads = ENGINES[engine].threads
    return f"{engine} (T={threads})" if threads else engine


def check_peers(engines: list[str]) -> None:
    """Fail before any run when an engine is unknown or its modules are not installed."""
    unknown = [engine for engine in engines if engine not in ENGINES]
    if unknown:
        raise BenchmarkError(
            f"unknown peer engine(s) {', '.join(unknown)}; choose from {', '.join(ENGINES)}"
        )
    needed = set(HARNESS_MODULES).union(*(ENGINES[engine].modules for engine in engines))
    missing = sorted(module for module in needed if find_spec(module) is None)
    if missing:
        raise BenchmarkError(
            f"the peers need module(s) {', '.join(missing)}, which are not installed in "
            f"{sys.prefix}: {INSTALL_HINT}"
        )


def run_peer(engine: str, corpus: Path, perm: int) -> dict:
    """Run one peer engine and keep both its own timings and ours of its whole process."""
    progress(f"peer: {peer_label(engine)}")
    run, report = run_json_child(f"peer {engine}", "peers.run", corpus, engine, perm)
    return {
        "engine": peer_label(engine),
        "finds_pairs": ENGINES[engine].finds_pairs,
        "front_end": ENGINES[engine].front_end,
        "wall_s": run.wall_s,
        "cpu_s": run.cpu_s,
        "peak_rss_mb": run.peak_rss_mb,
        "timed_s": report["timed_s"],
        "candidates": report["candidates"],
        "accepted": report["accepted"],
        "recall": report.get("recall"),
        "candidate_recall": report.get("candidate_recall"),
        "stages": report["stages"],
        "report": report,
    }
