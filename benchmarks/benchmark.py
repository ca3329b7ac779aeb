#!/usr/bin/env python3
"""Benchmark dedup-assets against peer MinHash/LSH engines, side by side, on one corpus.

    python benchmarks/benchmark.py (--docs N | --corpus PATH.parquet | --smoke)
        [--perm 128|64] [--scheme fss|blake2b] [--peers rensa,fastsketch-pre,...]
        [--recall-seeds N] [--skip-dagster] [--skip-library] [--workdir DIR] [--json-out FILE]
        [--shared-bench DIR]

Three kinds of run, each in its own process so that wall time (interpreter start included) and
peak RSS (the child's ru_maxrss from wait4) are measured the same way for all of them:

* Dagster end to end: the real ``dagster asset materialize --select '*'`` CLI on the corpus.
  Per-asset times come from its STEP_SUCCESS log lines, counts from the release manifest.
* Library core: ``dedup_assets.core.pipeline.run_library`` without Dagster.
* Peers: ``<shared-bench>/peers.py CORPUS ENGINE``, which prints one JSON line per run.

Recall is measured on the planted (origin, copy) pairs of the corpus's ``*.truth.parquet``
sidecar: the share of planted pairs with exact 5-shingle Jaccard >= 0.7 that end up as accepted
edges. The machine is shared and noisy, so compare the engines of one run as ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.util import find_spec
from pathlib import Path

INSTALL_HINT = "run `pip install -e '.[bench]'` in the repository root"

try:
    import duckdb
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    import recall_spread
except ImportError as missing:
    sys.exit(f"benchmark.py needs the module {missing.name!r}: {INSTALL_HINT}.")

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SHARED_BENCH = REPO_ROOT.parent / "shared" / "bench"
DEFAULT_WORKDIR = REPO_ROOT / "var" / "bench"
LIBRARY_CHILD_FLAG = "--_library-child"

THRESHOLD = 0.7
SHINGLE_SIZE = 5
ROWS_PER_BAND = 8
SMOKE_DOCS = 2000
SMOKE_RECALL_SEEDS = 2
CORE_STAGES = ("fingerprint", "candidates", "verify", "cluster")
# The default pair budget (1,000,000 slots) guards interactive runs; a 1M-document corpus at
# 16 bands legitimately needs about 1.4M, so benchmarks raise it for every engine of ours.
MAX_PAIR_SLOTS = 100_000_000

# peers.py engines and the modules each one imports (on top of the harness's own).
PEER_HARNESS_MODULES = ("numpy", "pyarrow", "xxhash", "scipy")
PEER_ENGINE_MODULES = {
    "datasketch": ("datasketch",),
    "rensa": ("rensa",),
    "rensa-rows": ("rensa",),
    "fastsketch": ("FastSketchLSH",),
    "fastsketch-pre": ("FastSketchLSH",),
    "numpy": (),
    "numpy-ms": (),
    "floor": (),
}
THREADED_PEERS = {"fastsketch": 2, "fastsketch-pre": 2}

TARGET_SPEEDUP = 5.0
TARGET_LIBRARY_DOCS_PER_S = 50_000
TARGET_PEAK_RSS_MB = 4096

WARMUP_ROWS = 500
STEP_SUCCESS = re.compile(r'Finished execution of step "([^"]+)" in ([0-9.hms ]+)')
DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|h|m|s)")
UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
STDERR_TAIL_LINES = 40


class BenchmarkError(RuntimeError):
    """A run failed or an input is unusable; the message says which and why."""


# ----------------------------------------------------------------------------- processes
@dataclass
class ProcessRun:
    """One finished child process: exit code, whole-process wall time, peak RSS and output."""

    command: list[str]
    returncode: int
    wall_s: float
    peak_rss_mb: float
    stdout: str
    stderr: str

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        return "\n".join(self.stderr.rstrip().splitlines()[-lines:])


def run_measured(command: list[str], env: dict[str, str] | None = None) -> ProcessRun:
    """Run ``command`` from the repository root and wait for it with ``os.wait4``.

    Wall time runs from spawn to exit, so it includes interpreter start and imports. Peak RSS is
    the child's own ``ru_maxrss`` (KiB on Linux), not mixed with any other child of this process.
    Output goes to temporary files, so a chatty child cannot block on a full pipe. Dirty pages
    of the previous run are flushed first: their writeback otherwise lands in this run's time
    (a 1M-document stage measured 9 s after a sync and 14 s right after another run).
    """
    os.sync()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err
        )
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return ProcessRun(
            command=command,
            returncode=process.returncode,
            wall_s=wall,
            peak_rss_mb=usage.ru_maxrss / 1024,
            stdout=out.read().decode("utf-8", errors="replace"),
            stderr=err.read().decode("utf-8", errors="replace"),
        )


def require_success(run: ProcessRun, what: str) -> None:
    """Raise with the last lines of the child's stderr when it exited non-zero."""
    if run.returncode != 0:
        hint = ""
        missing = re.search(r"No module named '([^'.]+)[^']*'", run.stderr)
        if missing and missing.group(1) != "dedup_assets":
            hint = f"\nMissing module {missing.group(1)!r}: {INSTALL_HINT}."
        raise BenchmarkError(
            f"{what} failed with exit code {run.returncode} after {run.wall_s:.1f}s.\n"
            f"command: {' '.join(run.command)}\n"
            f"--- last {STDERR_TAIL_LINES} lines of stderr ---\n{run.stderr_tail()}{hint}"
        )


def last_json_line(text: str, what: str) -> dict:
    """The last line of ``text`` that parses as a JSON object."""
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    raise BenchmarkError(f"{what} printed no JSON result line; stdout ends with:\n{text[-2000:]}")


def progress(message: str) -> None:
    print(f"[{datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- corpus
def truth_path(corpus: Path) -> Path:
    """The planted-pairs sidecar that make_corpus.py writes next to ``corpus``."""
    return corpus.with_name(corpus.name.removesuffix(".parquet") + ".truth.parquet")


def prepare_corpus(args: argparse.Namespace) -> Path:
    """The corpus to benchmark: the given file, or ``<workdir>/cN.parquet`` generated once."""
    if args.corpus:
        corpus = Path(args.corpus).resolve()
        if corpus.suffix != ".parquet" or not corpus.is_file():
            raise BenchmarkError(f"{corpus}: not a Parquet file")
        return corpus
    corpus = args.workdir / f"c{args.docs}.parquet"
    if corpus.exists() and truth_path(corpus).exists():
        return corpus
    generator = args.shared_bench / "make_corpus.py"
    if not generator.is_file():
        raise BenchmarkError(
            f"{generator} not found: point --shared-bench at the peer harness folder"
        )
    args.workdir.mkdir(parents=True, exist_ok=True)
    progress(f"generating {args.docs:,} documents into {corpus}")
    run = run_measured([sys.executable, str(generator), str(args.docs), str(corpus)])
    require_success(run, "make_corpus.py")
    return corpus


class CorpusBodies:
    """The corpus's bodies by integer ``doc_id``, for exact Jaccard of arbitrary document pairs."""

    def __init__(self, corpus: Path):
        try:
            from dedup_assets.core.fingerprint import exact_jaccard
        except ImportError as error:
            raise BenchmarkError(
                f"cannot import dedup_assets.core.fingerprint.exact_jaccard: {error}"
            ) from error

        table = pq.read_table(corpus, columns=["doc_id", "body"])
        self.doc_ids = table["doc_id"].combine_chunks()
        self.bodies = table["body"].cast(pa.large_string())  # a 1M corpus overflows 32-bit offsets
        self.id_base = int(pc.max(self.doc_ids).as_py()) + 1
        self._exact_jaccard = exact_jaccard

    def jaccard(self, left_ids: np.ndarray, right_ids: np.ndarray) -> np.ndarray:
        """Exact 5-shingle Jaccard of each (left_ids[i], right_ids[i]) pair."""
        if len(left_ids) == 0:
            return np.zeros(0, dtype=np.float64)
        return np.asarray(
            self._exact_jaccard(self.bodies_of(left_ids), self.bodies_of(right_ids), SHINGLE_SIZE)
        )

    def pair_keys(self, left_ids: np.ndarray, right_ids: np.ndarray) -> np.ndarray:
        """One int64 per unordered pair, so (a, b) and (b, a) compare equal."""
        low, high = np.minimum(left_ids, right_ids), np.maximum(left_ids, right_ids)
        return low.astype(np.int64) * self.id_base + high.astype(np.int64)

    def bodies_of(self, ids: np.ndarray) -> pa.Array:
        positions = pc.index_in(pa.array(ids, pa.int64()), value_set=self.doc_ids)
        if positions.null_count:
            raise BenchmarkError(
                f"{positions.null_count} doc_id(s) of a pair are not in the corpus"
            )
        return self.bodies.take(positions).combine_chunks()


@dataclass
class PlantedPairs:
    """The planted (origin, copy) pairs of the truth sidecar with their exact Jaccard."""

    origin: np.ndarray
    copy: np.ndarray
    keys: np.ndarray
    jaccard: np.ndarray

    @classmethod
    def load(cls, truth: Path, bodies: CorpusBodies) -> PlantedPairs:
        table = pq.read_table(truth, columns=["doc_id", "origin_doc_id"])
        origin = table["origin_doc_id"].to_numpy()
        copy = table["doc_id"].to_numpy()
        return cls(origin, copy, bodies.pair_keys(origin, copy), bodies.jaccard(origin, copy))


def stored_pairs(database: Path, table: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(left, right) integer doc ids of ``dedup.<table>``, or None when the table is absent."""
    with duckdb.connect(str(database), read_only=True) as connection:
        try:
            columns = connection.execute(
                "select cast(left_doc_id as bigint) as left_id, "
                f"cast(right_doc_id as bigint) as right_id from dedup.{table}"
            ).fetchnumpy()
        except duckdb.CatalogException:
            return None
    return np.asarray(columns["left_id"], np.int64), np.asarray(columns["right_id"], np.int64)


def recall_report(database: Path, planted: PlantedPairs, bodies: CorpusBodies) -> dict | None:
    """Planted-pair recall of the edges and candidates stored in ``database``, plus the number of
    accepted edges whose exact Jaccard is below the threshold (0 when precision holds)."""
    accepted = stored_pairs(database, "duplicate_pairs")
    candidates = stored_pairs(database, "candidate_pairs")
    if accepted is None:
        return None
    positive = planted.jaccard >= THRESHOLD
    report = {
        "planted_pairs": int(len(planted.keys)),
        "planted_positive": int(positive.sum()),
        "recall": share(np.isin(planted.keys[positive], bodies.pair_keys(*accepted))),
        "candidate_recall": None,
        "accepted_below_threshold": int((bodies.jaccard(*accepted) < THRESHOLD).sum()),
    }
    if candidates is not None:
        report["candidate_recall"] = share(
            np.isin(planted.keys[positive], bodies.pair_keys(*candidates))
        )
    return report


def share(hits: np.ndarray) -> float | None:
    return float(hits.mean()) if len(hits) else None


# ----------------------------------------------------------------------------- our runs
def dagster_config(perm: int, scheme: str) -> dict:
    return {
        "resources": {
            "dedup": {
                "config": {
                    "num_perm": perm,
                    "rows_per_band": ROWS_PER_BAND,
                    "hash_scheme": scheme,
                    "max_pair_slots": MAX_PAIR_SLOTS,
                }
            }
        }
    }


def parse_step_seconds(log: str) -> dict[str, float]:
    """Seconds per step from lines like ``Finished execution of step "fingerprinted" in 1.2s``.

    Dagster formats durations as 0.83ms, 533ms, 5.6s, 4m52s or 1h4m.
    """
    steps = {}
    for step, duration in STEP_SUCCESS.findall(log):
        steps[step] = sum(
            float(value) * UNIT_SECONDS[unit] for value, unit in DURATION_PART.findall(duration)
        )
    return steps


def run_dagster(corpus: Path, workdir: Path, perm: int, scheme: str) -> dict:
    """Materialize every asset with the real CLI into a fresh database, with a throwaway
    DAGSTER_HOME that has telemetry off."""
    dagster = Path(sys.executable).parent / "dagster"
    if not dagster.exists():
        raise BenchmarkError(f"{dagster} not found: {INSTALL_HINT}")
    run_dir = workdir / "run"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    database, output_dir = run_dir / "pipeline.duckdb", run_dir / "out"
    command = [
        str(dagster),
        "asset",
        "materialize",
        "-m",
        "dedup_assets.definitions",
        "--select",
        "*",
        "--config-json",
        json.dumps(dagster_config(perm, scheme)),
    ]
    with tempfile.TemporaryDirectory(prefix="bench-dagster-home-") as home:
        Path(home, "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
        env = {
            **os.environ,
            "DAGSTER_HOME": home,
            "DEDUP_INPUT": str(corpus),
            "DEDUP_DATABASE": str(database),
            "DEDUP_OUTPUT_DIR": str(output_dir),
        }
        progress("Dagster: dagster asset materialize --select '*'")
        run = run_measured(command, env=env)
    require_success(run, "Dagster run")
    counts = json.loads((output_dir / "manifest.json").read_text(encoding="utf-8"))["counts"]
    return {
        "wall_s": run.wall_s,
        "peak_rss_mb": run.peak_rss_mb,
        "steps": parse_step_seconds(run.stderr),
        "counts": counts,
        "candidates": counts["candidate_pair_rows"],
        "accepted": counts["duplicate_pair_rows"],
        "database": str(database),
    }


def library_child(payload: str) -> None:
    """Child-process side of the library run: call run_library and print its result as JSON."""
    from dedup_assets.core.pipeline import run_library
    from dedup_assets.core.settings import Settings

    job = json.loads(payload)
    result = run_library(
        job["input_path"],
        job["database_path"],
        job["output_dir"],
        Settings(
            num_perm=job["num_perm"],
            rows_per_band=job["rows_per_band"],
            hash_scheme=job["hash_scheme"],
            max_pair_slots=MAX_PAIR_SLOTS,
        ),
    )
    print(json.dumps(result))


def warm_kernels(corpus: Path, workdir: Path, perm: int, scheme: str) -> float:
    """Run the library on the corpus's first rows so numba's on-disk cache holds every kernel
    before anything is timed; returns how long that took."""
    sample = workdir / "warmup" / "sample.parquet"
    sample.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pq.ParquetFile(corpus).read_row_group(0).slice(0, WARMUP_ROWS), sample)
    progress(f"warm-up: run_library on {WARMUP_ROWS} documents")
    run = run_library_core(sample, sample.parent, perm, scheme)
    return run["wall_s"]


def run_library_core(corpus: Path, workdir: Path, perm: int, scheme: str) -> dict:
    """Run the library core in a child process of this script and time its core stages."""
    run_dir = workdir / "library"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    database = run_dir / "pipeline.duckdb"
    job = {
        "input_path": str(corpus),
        "database_path": str(database),
        "output_dir": str(run_dir / "out"),
        "num_perm": perm,
        "rows_per_band": ROWS_PER_BAND,
        "hash_scheme": scheme,
    }
    progress("library: dedup_assets.core.pipeline.run_library")
    run = run_measured(
        [sys.executable, str(Path(__file__).resolve()), LIBRARY_CHILD_FLAG, json.dumps(job)]
    )
    require_success(run, "library run")
    result = last_json_line(run.stdout, "library run")
    stages = result["stages"]
    missing = [stage for stage in CORE_STAGES if stage not in stages]
    if missing:
        raise BenchmarkError(
            f"run_library reported no time for stage(s) {', '.join(missing)}; "
            f"it reported {', '.join(stages)}"
        )
    core_s = sum(stages[stage] for stage in CORE_STAGES)
    return {
        "wall_s": run.wall_s,
        "peak_rss_mb": run.peak_rss_mb,
        "stages": stages,
        "core_s": core_s,
        "core_docs_per_s": result["documents"] / core_s if core_s else None,
        "documents": result["documents"],
        "candidates": result["candidates"],
        "accepted": result["duplicates"],
        "database": str(database),
    }


# ----------------------------------------------------------------------------- peers
def peer_label(engine: str) -> str:
    threads = THREADED_PEERS.get(engine)
    return f"{engine} (T={threads})" if threads else engine


def check_peers(engines: list[str], shared_bench: Path) -> None:
    """Fail before any run when an engine is unknown or its modules are not installed."""
    if not (shared_bench / "peers.py").is_file():
        raise BenchmarkError(
            f"{shared_bench / 'peers.py'} not found: point --shared-bench at the peer harness"
        )
    unknown = [engine for engine in engines if engine not in PEER_ENGINE_MODULES]
    if unknown:
        raise BenchmarkError(
            f"unknown peer engine(s) {', '.join(unknown)}; "
            f"choose from {', '.join(PEER_ENGINE_MODULES)}"
        )
    needed = set(PEER_HARNESS_MODULES).union(*(PEER_ENGINE_MODULES[engine] for engine in engines))
    missing = sorted(module for module in needed if find_spec(module) is None)
    if missing:
        raise BenchmarkError(
            f"the peers need module(s) {', '.join(missing)}, which are not installed in "
            f"{sys.prefix}: {INSTALL_HINT}"
        )


def run_peer(engine: str, corpus: Path, perm: int, shared_bench: Path) -> dict:
    """Run one peer engine through peers.py and keep both its own timings and ours."""
    command = [
        sys.executable,
        str(shared_bench / "peers.py"),
        str(corpus),
        engine,
        "--perm",
        str(perm),
    ]
    if engine in THREADED_PEERS:
        command += ["--threads", str(THREADED_PEERS[engine])]
    progress(f"peer: {peer_label(engine)}")
    run = run_measured(command)
    require_success(run, f"peer {engine}")
    report = last_json_line(run.stdout, f"peer {engine}")
    return {
        "engine": peer_label(engine),
        "wall_s": run.wall_s,
        "peak_rss_mb": run.peak_rss_mb,
        "harness_wall_s": report["total_wall"],
        "harness_peak_rss_mb": report["peak_rss_mb"],
        "candidates": report["candidates"],
        "accepted": report["accepted"],
        "recall": report.get("recall"),
        "candidate_recall": report.get("cand_recall"),
        "stages": report["wall"],
        "report": report,
    }


# ----------------------------------------------------------------------------- report
def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def fmt_number(value: float | int | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}×"


def table_row(engine: str, run: dict, timed_s: float, n_docs: int) -> dict:
    """The engines-table columns of one run."""
    return {
        "engine": engine,
        "wall_s": run["wall_s"],
        "timed_s": timed_s,
        "docs_per_s": n_docs / run["wall_s"],
        "peak_rss_mb": run["peak_rss_mb"],
        "candidates": run["candidates"],
        "accepted": run["accepted"],
        "recall": run.get("recall"),
        "candidate_recall": run.get("candidate_recall"),
        "ours_over_theirs": None,
        "times_faster": None,
    }


def engine_rows(
    n_docs: int, ours: dict | None, library: dict | None, peers: list[dict]
) -> list[dict]:
    """One row per engine. Peer rows carry the ratios of our reference run (Dagster end to end,
    else the library run) to theirs, both as whole-process wall times."""
    our_rows = []
    if ours:
        our_rows.append(
            table_row("dedup-assets (Dagster e2e)", ours, sum(ours["steps"].values()), n_docs)
        )
    if library:
        our_rows.append(
            table_row("dedup-assets (library)", library, sum(library["stages"].values()), n_docs)
        )
    peer_rows = [table_row(peer["engine"], peer, peer["harness_wall_s"], n_docs) for peer in peers]
    reference = ours or library
    if reference:
        for row in peer_rows:
            row["ours_over_theirs"] = reference["wall_s"] / row["wall_s"]
            row["times_faster"] = row["wall_s"] / reference["wall_s"]
    return our_rows + peer_rows


def engines_table(rows: list[dict]) -> str:
    header = [
        "engine",
        "wall s (whole process)",
        "timed s (in-process)",
        "docs/s",
        "peak RSS MB",
        "candidates",
        "accepted edges",
        "recall J>=0.7",
        "cand. recall",
        "ours ÷ theirs",
        "× faster",
    ]
    body = [
        [
            row["engine"],
            fmt_number(row["wall_s"], 2),
            fmt_number(row["timed_s"], 2),
            fmt_number(row["docs_per_s"]),
            fmt_number(row["peak_rss_mb"]),
            fmt_number(row["candidates"]),
            fmt_number(row["accepted"]),
            fmt_number(row.get("recall"), 4),
            fmt_number(row.get("candidate_recall"), 4),
            fmt_ratio(row["ours_over_theirs"]),
            fmt_ratio(row["times_faster"]),
        ]
        for row in rows
    ]
    return markdown_table(header, body)


def dagster_steps_table(ours: dict) -> str:
    rows = [[step, fmt_number(seconds, 3)] for step, seconds in ours["steps"].items()]
    rows.append(["**sum of steps**", fmt_number(sum(ours["steps"].values()), 3)])
    rows.append(["**whole process**", fmt_number(ours["wall_s"], 3)])
    return markdown_table(["asset (step)", "seconds"], rows)


def library_stages_table(library: dict) -> str:
    documents = library["documents"]
    rows = [
        [stage, fmt_number(seconds, 3), fmt_number(documents / seconds if seconds else None)]
        for stage, seconds in library["stages"].items()
    ]
    rows.append(
        [
            f"**core ({'+'.join(CORE_STAGES)})**",
            fmt_number(library["core_s"], 3),
            fmt_number(library["core_docs_per_s"]),
        ]
    )
    rows.append(
        [
            "**whole process**",
            fmt_number(library["wall_s"], 3),
            fmt_number(documents / library["wall_s"]),
        ]
    )
    return markdown_table(["stage", "seconds", "docs/s"], rows)


def verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def speedup_target(ours: dict | None, peers: list[dict], targets: dict) -> str:
    fastest = min(peers, key=lambda peer: peer["wall_s"]) if peers else None
    if not (ours and fastest):
        return "Dagster e2e vs fastest peer: n/a (needs the Dagster run and --peers)"
    speedup = fastest["wall_s"] / ours["wall_s"]
    targets["speedup_vs_fastest_peer"] = {"peer": fastest["engine"], "value": speedup}
    return (
        f"Dagster e2e vs fastest peer ({fastest['engine']}): {speedup:.2f}× faster "
        f"(target ≥ {TARGET_SPEEDUP:g}×) — {verdict(speedup >= TARGET_SPEEDUP)}"
    )


def library_target(library: dict | None, targets: dict) -> str:
    if not library:
        return "library core: n/a (--skip-library)"
    rate = library["core_docs_per_s"]
    targets["library_core_docs_per_s"] = rate
    return (
        f"library core: {rate:,.0f} docs/s (target ≥ {TARGET_LIBRARY_DOCS_PER_S:,}) — "
        f"{verdict(rate >= TARGET_LIBRARY_DOCS_PER_S)}"
    )


def rss_target(ours_runs: dict[str, dict], targets: dict) -> str:
    if not ours_runs:
        return "peak RSS: n/a (neither of our runs)"
    name, run = max(ours_runs.items(), key=lambda item: item[1]["peak_rss_mb"])
    peak = run["peak_rss_mb"]
    targets["peak_rss_mb"] = {"run": name, "value": peak}
    return (
        f"peak RSS: {peak:,.0f} MB ({name} run; target ≤ {TARGET_PEAK_RSS_MB:,}) — "
        f"{verdict(peak <= TARGET_PEAK_RSS_MB)}"
    )


def recall_target(ours_runs: dict[str, dict], peers: list[dict], targets: dict) -> str:
    our_recall = next(iter(ours_runs.values()), {}).get("recall")
    rated = [peer for peer in peers if peer["recall"] is not None]
    best = max(rated, key=lambda peer: peer["recall"]) if rated else None
    targets["recall"] = {
        "ours": our_recall,
        "best_peer": best and {"peer": best["engine"], "value": best["recall"]},
    }
    theirs = f"{best['recall']:.4f} ({best['engine']})" if best else "-"
    return f"recall: ours {fmt_number(our_recall, 4)} vs best peer {theirs}"


def precision_line(ours_runs: dict[str, dict]) -> str | None:
    checked = {name: run for name, run in ours_runs.items() if "recall" in run}
    if not checked:
        return None
    counts = ", ".join(f"{name} {run['accepted_below_threshold']}" for name, run in checked.items())
    planted = next(iter(checked.values()))
    return (
        f"precision sanity: accepted edges with true J < {THRESHOLD}: {counts} (should be 0); "
        f"{planted['planted_positive']:,} of {planted['planted_pairs']:,} planted pairs have "
        f"J ≥ {THRESHOLD}"
    )


def target_lines(
    ours: dict | None, library: dict | None, peers: list[dict]
) -> tuple[list[str], dict]:
    """The target lines of the report and the same facts as a dict for the JSON record."""
    targets: dict = {}
    ours_runs = {name: run for name, run in (("Dagster", ours), ("library", library)) if run}
    lines = [
        speedup_target(ours, peers, targets),
        library_target(library, targets),
        rss_target(ours_runs, targets),
        recall_target(ours_runs, peers, targets),
        precision_line(ours_runs),
    ]
    if ours and library:
        targets["dagster_overhead"] = ours["wall_s"] / library["wall_s"]
    return [line for line in lines if line], targets


# ----------------------------------------------------------------------------- main
def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Benchmark dedup-assets (Dagster end to end and library core) and peer engines "
        "side by side on one corpus."
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--docs", type=int, help="generate an N-document corpus with make_corpus.py"
    )
    source.add_argument(
        "--corpus", help="an existing corpus (.parquet; recall needs its .truth.parquet)"
    )
    source.add_argument(
        "--smoke",
        action="store_true",
        help=f"CI smoke run: --docs {SMOKE_DOCS}, both of our runs, no peers, recall over "
        f"{SMOKE_RECALL_SEEDS} seeds",
    )
    parser.add_argument(
        "--perm",
        type=int,
        choices=[128, 64],
        default=128,
        help="MinHash permutations; bands = perm / 8 of 8 rows (default 128)",
    )
    parser.add_argument(
        "--scheme", choices=["fss", "blake2b"], default="fss", help="hash scheme (default fss)"
    )
    parser.add_argument(
        "--peers", default="", help="comma-separated peers.py engines, e.g. rensa,fastsketch-pre"
    )
    parser.add_argument(
        "--recall-seeds",
        type=int,
        default=0,
        help="also measure planted-pair recall of the sketch and banding alone over N seeds, ours "
        "and every installed peer's sketch on the same shingle hashes (one run's recall is one "
        "draw)",
    )
    parser.add_argument("--skip-dagster", action="store_true", help="do not run the Dagster CLI")
    parser.add_argument("--skip-library", action="store_true", help="do not run the library core")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=DEFAULT_WORKDIR,
        help=f"corpora and run folders (default {DEFAULT_WORKDIR})",
    )
    parser.add_argument(
        "--json-out", type=Path, help="append one JSON record of the whole run to this file"
    )
    parser.add_argument(
        "--shared-bench",
        type=Path,
        default=DEFAULT_SHARED_BENCH,
        help=f"folder with make_corpus.py and peers.py (default {DEFAULT_SHARED_BENCH})",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        if args.peers or args.skip_dagster or args.skip_library:
            parser.error("--smoke runs both of our runs and no peers; drop --peers/--skip-*")
        args.docs = SMOKE_DOCS
        args.recall_seeds = args.recall_seeds or SMOKE_RECALL_SEEDS
    if args.recall_seeds < 0 or args.recall_seeds == 1:
        parser.error("--recall-seeds must be 0 (off) or at least 2")
    if args.docs is not None and args.docs < 2:
        parser.error("--docs must be at least 2")
    args.peers = [engine.strip() for engine in args.peers.split(",") if engine.strip()]
    args.workdir = args.workdir.resolve()
    args.shared_bench = args.shared_bench.resolve()
    return args


def add_recall(bodies: CorpusBodies, planted: PlantedPairs, runs: list[dict]) -> None:
    """Add planted-pair recall and the precision sanity count to each of our runs, in place."""
    progress("recall of planted pairs")
    for run in runs:
        run.update(recall_report(Path(run["database"]), planted, bodies) or {})


def measure_spread(bodies: CorpusBodies, planted: PlantedPairs, perm: int, seed_count: int) -> dict:
    """Recall of the planted pairs with J >= THRESHOLD by the sketch and banding alone, for ours
    and the installed peers' sketches of the same shingle hashes, over ``seed_count`` seeds."""
    progress(f"recall of the sketches over {seed_count} seeds")
    positive = planted.jaccard >= THRESHOLD
    origin, copy = planted.origin[positive], planted.copy[positive]
    ids = np.unique(np.concatenate([origin, copy]))
    engines = recall_spread.sketchers(bodies.bodies_of(ids), SHINGLE_SIZE, perm, ROWS_PER_BAND)
    rows = recall_spread.spread_rows(
        engines, np.searchsorted(ids, origin), np.searchsorted(ids, copy), ROWS_PER_BAND, seed_count
    )
    return {
        "seeds": recall_spread.seeds(seed_count),
        "planted_positive": int(positive.sum()),
        "independent_expectation": recall_spread.independent_expectation(
            planted.jaccard[positive], perm // ROWS_PER_BAND, ROWS_PER_BAND
        ),
        "rows": [row.as_dict() for row in rows],
        "comparison": recall_spread.comparison(rows[0], rows[1:]),
        "table": recall_spread.spread_table(rows),
    }


def measure(args: argparse.Namespace) -> dict:
    """Run everything asked for, one process at a time, and return the whole record."""
    if args.peers:
        check_peers(args.peers, args.shared_bench)
    started = datetime.now(timezone.utc)
    load_start = os.getloadavg()
    corpus = prepare_corpus(args)
    n_docs = pq.ParquetFile(corpus).metadata.num_rows
    # an earlier invocation's databases and release files (7.6 GB at 1M documents) would hold
    # page cache that this invocation's runs need
    for stale in ("run", "library"):
        shutil.rmtree(args.workdir / stale, ignore_errors=True)
    warmup_s = warm_kernels(corpus, args.workdir, args.perm, args.scheme)
    ours = None if args.skip_dagster else run_dagster(corpus, args.workdir, args.perm, args.scheme)
    library = (
        None
        if args.skip_library
        else run_library_core(corpus, args.workdir, args.perm, args.scheme)
    )
    spread = None
    if truth_path(corpus).exists() and (ours or library or args.recall_seeds):
        bodies = CorpusBodies(corpus)
        planted = PlantedPairs.load(truth_path(corpus), bodies)
        add_recall(bodies, planted, [run for run in (ours, library) if run])
        if args.recall_seeds:
            spread = measure_spread(bodies, planted, args.perm, args.recall_seeds)
        del bodies, planted
    elif args.recall_seeds:
        raise BenchmarkError(f"--recall-seeds needs the planted pairs in {truth_path(corpus)}")
    peers = [run_peer(engine, corpus, args.perm, args.shared_bench) for engine in args.peers]
    lines, targets = target_lines(ours, library, peers)
    if spread:
        lines.append(spread["comparison"])
    return {
        "started": started.isoformat(),
        "argv": sys.argv[1:],
        "corpus": str(corpus),
        "documents": n_docs,
        "perm": args.perm,
        "bands": args.perm // ROWS_PER_BAND,
        "rows_per_band": ROWS_PER_BAND,
        "hash_scheme": args.scheme,
        "cpus": os.cpu_count(),
        "loadavg_start": load_start,
        "loadavg_end": os.getloadavg(),
        "kernel_warmup_s": warmup_s,
        "dagster": ours,
        "library": library,
        "peers": peers,
        "recall_spread": spread,
        "table": engine_rows(n_docs, ours, library, peers),
        "target_lines": lines,
        "targets": targets,
    }


def print_report(record: dict) -> None:
    """The markdown report: engines, our per-stage times, and the targets."""
    started = datetime.fromisoformat(record["started"])
    print(
        f"## dedup-assets benchmark: {Path(record['corpus']).name}, {record['documents']:,} docs\n"
    )
    print(
        f"perm {record['perm']} = {record['bands']} bands × {record['rows_per_band']} rows, scheme "
        f"{record['hash_scheme']}, {record['cpus']} CPUs, load average at start "
        f"{record['loadavg_start'][0]:.2f}, {started:%Y-%m-%d %H:%M} UTC\n"
    )
    print(engines_table(record["table"]) + "\n")
    print(
        f"Compiled kernels were loaded or compiled before timing by a {WARMUP_ROWS}-document run "
        f"({record['kernel_warmup_s']:.1f} s; a first run on a machine compiles them once).\n"
    )
    if record["dagster"]:
        print("### Dagster run, per asset\n\n" + dagster_steps_table(record["dagster"]) + "\n")
    if record["library"]:
        print("### Library core, per stage\n\n" + library_stages_table(record["library"]) + "\n")
    if record["recall_spread"]:
        spread = record["recall_spread"]
        print(
            f"### Recall of the sketch and banding alone, over {len(spread['seeds'])} seeds\n\n"
            f"{spread['planted_positive']:,} planted pairs with J ≥ {THRESHOLD}; every engine "
            "sketches the same 64-bit shingle hashes (ours) with seeds "
            f"{', '.join(map(str, spread['seeds']))}. Independent MinHash rows would find "
            f"{spread['independent_expectation']:.4f} of them on average.\n\n"
            + spread["table"]
            + "\n"
        )
    if "dagster_overhead" in record["targets"]:
        overhead = record["targets"]["dagster_overhead"]
        print(f"Dagster overhead: {overhead:.2f}× the library's whole-process wall\n")
    print("### Targets\n")
    print("\n".join(f"- {line}" for line in record["target_lines"]))


def precision_errors(record: dict) -> int:
    """Accepted edges of our runs whose exact Jaccard is below the threshold (should be 0)."""
    return sum(
        run.get("accepted_below_threshold", 0)
        for run in (record["dagster"], record["library"])
        if run
    )


def main(argv: list[str]) -> int:
    if argv[:1] == [LIBRARY_CHILD_FLAG]:
        library_child(argv[1])
        return 0
    args = parse_args(argv)
    try:
        record = measure(args)
    except BenchmarkError as error:
        print(f"benchmark failed: {error}", file=sys.stderr)
        return 1
    print_report(record)
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        with args.json_out.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
    errors = precision_errors(record)
    if errors:
        print(f"\nERROR: {errors} accepted edge(s) with exact Jaccard < {THRESHOLD}: not precise.")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
