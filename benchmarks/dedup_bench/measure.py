"""The whole benchmark, one measured process at a time: corpus, kernel warm-up, our Dagster and
library runs, the peers, and then, with every measured run over, recall.

This process loads no corpus data until the last measured child has exited: Linux starts a
child's ru_maxrss at its parent's peak, so anything large held here would show up as the next
child's memory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from dedup_assets.core.settings.choices import ENGINES

from .common import (
    REFERENCE, REPO_ROOT, BenchmarkError, Sketch, child_command, child_env, engine_of, is_reference, progress,
    run_json_child, truth_path,
)
from .ours import run_dagster, run_folder, run_library_core, warm_kernels
from .report import engine_rows
from .targets import target_lines
from .theirs import check_peers, run_peer


@dataclass
class Options:
    """What to run; ``benchmark.py`` parses them from its command line."""

    workdir: Path
    docs: int | None = None
    corpus: Path | None = None
    perm: int = 128
    scheme: str = "fss"
    false_negative_weight: float | None = None  # set: our runs choose their bands (auto_bands)
    peers: list[str] = field(default_factory=list)
    recall_seeds: int = 0
    skip_dagster: bool = False
    skip_library: bool = False
    engine: str = REFERENCE  # the Dagster run's engine; another skips the library run
    compare_engines: bool = False  # ray: let engine_matches_duckdb run DuckDB again and compare
    both_engines: bool = False  # the Dagster run on duckdb, then on ray; duckdb's is the reference
    ray_nodes: int = 0  # ray: join a local cluster of this many one-CPU nodes (0: a local Ray)
    ray_object_store_mb: int = 2048  # each node's object store, with ray_nodes
    web: bool = False  # generate the web-length corpus (web_corpus.py) rather than the plain one
    runs: int = 1  # each of our runs and each peer's this many times; the smallest wall counts

    def sketch(self) -> Sketch:
        return Sketch(self.perm, self.scheme, self.false_negative_weight)

    def dagster_engines(self) -> tuple[str, ...]:
        """The engines the Dagster run runs on, the reference first; none with skip_dagster."""
        if self.skip_dagster:
            return ()
        return ENGINES if self.both_engines else (self.engine,)

    def library_skipped(self) -> str | None:
        """Why the library run does not run, or None when it does."""
        if self.skip_library:
            return "--skip-library"
        if not is_reference(self.engine):  # so that the library's figures stay the reference's
            return f"--engine {self.engine}: the library run measures the reference engine, {REFERENCE}"
        return None


def prepare_corpus(options: Options) -> Path:
    """The corpus to benchmark: the given file, or ``<workdir>/synthetic-N.parquet`` (with
    ``web``: ``web-N.parquet``) generated once, with its truth sidecar, by ``dedup_bench.corpus``."""
    if options.corpus:
        corpus = options.corpus.resolve()
        if corpus.suffix != ".parquet" or not corpus.is_file():
            raise BenchmarkError(f"{corpus}: not a Parquet file")
        return corpus
    corpus = options.workdir / f"{'web' if options.web else 'synthetic'}-{options.docs}.parquet"
    if corpus.exists() and truth_path(corpus).exists():
        return corpus
    options.workdir.mkdir(parents=True, exist_ok=True)
    progress(f"generating {options.docs:,} {'web-length ' if options.web else ''}documents into {corpus}")
    run_json_child("corpus generation", "corpus.write", options.docs, corpus, options.web)
    return corpus


@contextmanager
def ray_cluster(nodes: int, object_store_mb: int) -> Iterator[dict | None]:
    """A local Ray cluster of ``nodes`` one-CPU nodes (``ray_cluster.py``) while the block runs:
    its address and each node's processes; None when ``nodes`` is 0."""
    if not nodes:
        yield None
        return
    progress(f"starting a local Ray cluster: {nodes} nodes of 1 CPU, {object_store_mb:,} MB object store each")
    process = subprocess.Popen(
        child_command("ray_cluster.serve", nodes, object_store_mb),
        cwd=REPO_ROOT, env=child_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        line = process.stdout.readline()
        if not line:
            raise BenchmarkError(f"the local Ray cluster did not start (exit {process.wait()}); see its output above")
        yield {**json.loads(line), "object_store_mb": object_store_mb}
    finally:
        process.stdin.close()  # the cluster shuts down when its stdin closes
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def measure(options: Options, argv: list[str]) -> dict:
    """Run everything asked for and return the whole record."""
    if options.peers:
        check_peers(options.peers)
    started = datetime.now(timezone.utc)
    load_start = os.getloadavg()
    corpus = prepare_corpus(options)
    truth = truth_path(corpus)
    if options.recall_seeds and not truth.exists():
        raise BenchmarkError(f"--recall-seeds needs the planted pairs in {truth}")
    # an earlier invocation's databases and release files would hold page cache that this
    # invocation's runs need
    for stale in (*(run_folder(engine) for engine in ENGINES), "library"):
        shutil.rmtree(options.workdir / stale, ignore_errors=True)
    sketch = options.sketch()
    warmup_s = warm_kernels(corpus, options.workdir, sketch)
    dagster_runs = []
    for engine in options.dagster_engines():
        nodes = 0 if is_reference(engine) else options.ray_nodes
        with ray_cluster(nodes, options.ray_object_store_mb) as cluster:
            run = smallest_of(
                options.runs,
                lambda: run_dagster(corpus, options.workdir, sketch, engine, options.compare_engines, cluster),
            )
        dagster_runs.append({**run, "ray_cluster": cluster})
    ours, others = (dagster_runs[0], dagster_runs[1:]) if dagster_runs else (None, [])
    library_skipped = options.library_skipped()
    if library_skipped and not options.skip_library:
        progress(f"library run skipped ({library_skipped})")
    library = (
        None
        if library_skipped
        else smallest_of(options.runs, lambda: run_library_core(corpus, options.workdir / "library", sketch))
    )
    peers = [smallest_of(options.runs, lambda: run_peer(engine, corpus, options.perm)) for engine in options.peers]

    # every measured run is over: from here on this process may load the corpus
    import pyarrow.parquet as pq

    from .recall import measure_recall
    from .roofline import measure_floors

    floors = None
    if any(is_reference(engine_of(run)) for run in dagster_runs):
        progress("floors: read, write and hashing rates of this machine")
        floors = measure_floors(corpus, options.workdir).as_dict()

    our_runs = [run for run in (ours, *others, library) if run]
    spread = None
    if truth.exists() and (our_runs or options.recall_seeds):
        spread = measure_recall(corpus, truth, our_runs, options.perm, options.recall_seeds)
    n_docs = pq.ParquetFile(corpus).metadata.num_rows
    cpus = len(os.sched_getaffinity(0))  # the CPUs this run may use, as the pipeline counts them
    lines, targets = target_lines(ours, library, peers, others, library_skipped, options.web, cpus)
    if spread:
        lines.append(spread["comparison"])
    return {  # when and how it ran, the corpus, the sketch settings and the machine's load; then the runs
        "started": started.isoformat(), "argv": argv, "corpus": str(corpus), "documents": n_docs,
        "web_corpus": options.web, "runs": options.runs, "perm": options.perm,
        **dict(zip(("bands", "rows_per_band"), options.sketch().bands())),
        "auto_bands_false_negative_weight": options.false_negative_weight, "hash_scheme": options.scheme,
        "cpus": cpus, "loadavg_start": load_start, "loadavg_end": os.getloadavg(), "kernel_warmup_s": warmup_s,
        "engine": "both" if options.both_engines else options.engine, "floors": floors, "dagster": ours,
        "dagster_other_engines": others, "library": library, "library_skipped": library_skipped, "peers": peers,
        "recall_spread": spread, "table": engine_rows(n_docs, ours, library, peers, others),
        "target_lines": lines, "targets": targets,
    }


def smallest_of(runs: int, run) -> dict:
    """The run with the smallest whole-process wall of ``runs`` calls of ``run``, with every
    wall: on a shared machine the smallest is the one least disturbed. Each call starts its run
    afresh in the same folder; the tables are the same every time, so recall reads the last's."""
    done = [run() for _ in range(runs)]
    return {**min(done, key=lambda one: one["wall_s"]), "walls_s": [one["wall_s"] for one in done]}

