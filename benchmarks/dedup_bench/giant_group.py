"""A crawl with one giant group of identical copies (a cookie wall, an error page): the benchmark's
corpus of N documents of which C are copies of one page, through ``dedup run``, with the peak
memory and wall time of every step.

    .venv/bin/python benchmarks/benchmark.py --docs 1000000 --copies-of-one 200000

The first N - C documents are the generated corpus (``corpus.py``); the last C are one page of
COPY_PAGE_WORDS words the generator's vocabulary never makes, so they pair with nothing else:
the run must make one cluster of C members, keep one, and leave every other count as the
generated corpus alone has it. ``dedup run`` logs no step starts, so the memory of its process
tree is sampled with a timestamp (``memory.TreeSampler``'s timeline: anonymous memory plus
/dev/shm) and each step's peak is read afterwards against the step starts and ends the run
stored in its DAGSTER_HOME: the highest sample from the step's start to the first sample after
its end.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .common import cli, progress, require_success, run_json_child, run_measured, truth_path
from .corpus import DEFAULT_SEED, ROW_GROUP_DOCS, SCHEMA, generate
from .markdown import fmt_number, markdown_table
from .memory import SAMPLE_INTERVAL_S
from .ours import DUCKDB_MEMORY, dagster_home, fresh_dir

COPY_PAGE_WORDS = 300
COPY_DOMAIN = "cookie-wall.example"


def copy_page(seed: int) -> str:
    rng = np.random.default_rng(seed)
    return " ".join(f"consent{number}" for number in rng.integers(0, 3_000, COPY_PAGE_WORDS))


def write_copies_corpus(documents: int, copies: int, workdir: Path, seed: int = DEFAULT_SEED) -> Path:
    """``<workdir>/copies-N-C.parquet`` (made once): the generated corpus of N - C documents,
    then C copies of :func:`copy_page`, doc_ids going on from the corpus's."""
    workdir = Path(workdir)
    out = workdir / f"copies-{documents}-{copies}.parquet"
    if out.exists():
        return out
    workdir.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".partial")
    with pq.ParquetWriter(partial, SCHEMA) as writer:
        if documents > copies:
            base = workdir / f"copies-{documents}-{copies}.base.parquet"
            generate(documents - copies, base, seed)
            source = pq.ParquetFile(base)
            for group in range(source.num_row_groups):
                writer.write_table(source.read_row_group(group))
            base.unlink()
            truth_path(base).unlink()  # the planted pairs are not what this benchmark measures
        page = copy_page(seed)
        for start in range(documents - copies, documents, ROW_GROUP_DOCS):
            ids = np.arange(start, min(start + ROW_GROUP_DOCS, documents))
            rows = len(ids)
            columns = [
                ids,
                pa.array(["cc-main-2024-10"] * rows),
                pa.array([COPY_DOMAIN] * rows),
                pa.array(np.full(rows, np.datetime64("2024-06-01T00:00:00", "us"))),
                pa.array(["We value your privacy"] * rows),
                pa.array([page] * rows),
            ]
            writer.write_table(pa.Table.from_arrays(columns, schema=SCHEMA))
    partial.rename(out)
    return out


def step_peaks(samples: list[tuple[float, float]], steps: dict[str, list[float]]) -> dict[str, dict]:
    """Per step (start, end): its wall seconds and the highest sample from its start to the
    first sample after its end."""
    peaks = {}
    for step, (start, end) in steps.items():
        within = [mb for at, mb in samples if start <= at <= end + SAMPLE_INTERVAL_S]
        peaks[step] = {"seconds": round(end - start, 2), "peak_mb": round(max(within), 1) if within else None}
    return peaks


def measure_copies_of_one(workdir: Path, documents: int, copies: int) -> dict:
    """The corpus written (in a measured child: a child's peak RSS starts at its parent's), then
    one ``dedup run`` of it at the defaults, sampled."""
    corpus = Path(run_json_child("writing the copies corpus", "giant_group.copies_corpus", documents, copies, workdir)[1]["corpus"])
    folder = fresh_dir(workdir / f"copies-{documents}-{copies}")
    with dagster_home() as home:
        env = {
            "DAGSTER_HOME": home,
            "DEDUP_DATABASE": str(folder / "pipeline.duckdb"),
            "DEDUP_OUTPUT_DIR": str(folder / "out"),
            "DEDUP_DUCKDB_MEMORY": DUCKDB_MEMORY,
        }
        command = [cli("dedup"), "run", "--input", str(corpus)]
        progress(f"copies of one: {' '.join(command)}")
        run = run_measured(command, env, sample_memory=True, timeline=True)
        require_success(run, "dedup run")
        samples = run.memory["timeline"]
        steps = run_json_child("reading the run's steps", "giant_group.run_steps", extra_env={"DAGSTER_HOME": home})[1]
    outcome = run_json_child("reading the release", "giant_group.outcome", folder / "out", documents - copies)[1]
    record = {
        "documents": documents,
        "copies": copies,
        "corpus": str(corpus),
        "command": " ".join(command),
        "wall_s": run.wall_s,
        "peak_rss_mb": run.peak_rss_mb,
        "peak_tree_mb": round(max((mb for _, mb in samples), default=0.0), 1),
        "steps": step_peaks(samples, steps),
        **outcome,
    }
    title = f"Giant copy group: {documents:,} documents, {copies:,} of them copies of one page"
    return {**record, "title": title, "lines": report_lines(record), "ok": (outcome["copies_cluster_size"], outcome["copies_kept"]) == (copies, 1)}


def report_lines(record: dict) -> list[str]:
    steps = record["steps"].items()
    return [
        f"`{record['command']}` at the defaults: {record['wall_s']:.1f} s, peak {record['peak_tree_mb']:,.0f} MB "
        f"(process tree, anonymous + /dev/shm; largest process RSS {record['peak_rss_mb']:,.0f} MB)\n",
        markdown_table(["step", "s", "peak MB"], [[step, f"{got['seconds']:.1f}", fmt_number(got["peak_mb"])] for step, got in steps]),
        f"\nThe copies: one cluster of {record['copies_cluster_size']:,} ({record['copies_kept']} kept); "
        f"{record['clusters']:,} clusters, {record['kept']:,} kept, {record['removed']:,} removed; audited recall "
        f"{record['recall']} ({record['found_pairs']:,} of {record['true_pairs']:,} true pairs)",
    ]


def copies_corpus(documents: int, copies: int, workdir: str) -> dict:
    return {"corpus": write_copies_corpus(documents, copies, Path(workdir))}


def run_steps() -> dict[str, list[float]]:
    """The step starts and ends of the one run in DAGSTER_HOME's instance."""
    from dagster import DagsterInstance

    with DagsterInstance.get() as instance:
        run = instance.get_runs(limit=1)[0]
        steps: dict[str, list[float]] = {}
        for entry in instance.all_logs(run.run_id):
            kind = entry.dagster_event.event_type_value if entry.dagster_event else None
            if kind == "STEP_START":
                steps[entry.step_key] = [entry.timestamp, entry.timestamp]
            elif kind in ("STEP_SUCCESS", "STEP_FAILURE") and entry.step_key in steps:
                steps[entry.step_key][1] = entry.timestamp
    return steps


def outcome(output_dir: str, first_copy: int) -> dict:
    """The release's figures, and the cluster of the first copy (doc_id ``first_copy``)."""
    import duckdb

    manifest = json.loads((Path(output_dir) / "manifest.json").read_text(encoding="utf-8"))
    clusters = f"read_csv('{Path(output_dir) / 'clusters.csv'}', all_varchar = true)"
    with duckdb.connect() as connection:
        size, kept = connection.execute(
            f"select count(*), count(*) filter (where decision like 'kept%') from {clusters} "
            f"where cluster_id = (select cluster_id from {clusters} where doc_id = '{first_copy}')"
        ).fetchall()[0]
    counts, audit = manifest["counts"], manifest["recall_audit"]
    return {
        "copies_cluster_size": size,
        "copies_kept": kept,
        "clusters": counts["cluster_count"],
        "kept": counts["representative_rows"],
        "removed": counts["removed_document_rows"],
        "counts": counts,
        "true_pairs": audit["true_pairs"],
        "found_pairs": audit["found_pairs"],
        "recall": audit["recall"],
    }

