"""A crawl with shared boilerplate: the benchmark's corpus with one ~3 KB footer appended to a
fifth of its pages, and the library run of it under both ``hot_buckets`` settings.

    .venv/bin/python benchmarks/benchmark.py --boilerplate 200000

The pages that carry the footer are mostly that footer, so they fill a few LSH buckets with
thousands of different texts. ``hot_buckets: refuse`` (the default) stops the run there, naming
the bucket; ``skip`` leaves such buckets out of the join and lists them. Each run is a child
process, measured for its wall time and peak RSS; the skip run's figures are read back from its
release: every document accounted for (input rows = documents + rejected = clusters rows), the
buckets left out, and the recall audit's measure of what they cost.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dedup_assets.core.settings.model import Settings

from .common import progress, run_json_child
from .corpus import DEFAULT_SEED, SCHEMA, generate
from .markdown import fmt_number, markdown_table
from .ours import DUCKDB_MEMORY, fresh_dir

FOOTER_EVERY = 5  # every fifth page carries the footer
FOOTER_WORDS = 450  # about 3 KB
AUDIT_SAMPLE = 1_000


def footer(seed: int) -> str:
    rng = np.random.default_rng(seed)
    return " ".join(f"site{number}" for number in rng.integers(0, 5_000, FOOTER_WORDS))


def write_boilerplate_corpus(documents: int, workdir: Path, seed: int = DEFAULT_SEED) -> Path:
    """``<workdir>/boilerplate-N.parquet`` (made once): the generated corpus of ``documents``
    with the footer appended to every FOOTER_EVERY-th body."""
    out = workdir / f"boilerplate-{documents}.parquet"
    if out.exists():
        return out
    workdir.mkdir(parents=True, exist_ok=True)
    base = workdir / f"boilerplate-{documents}.base.parquet"
    generate(documents, base, seed)
    text = " " + footer(seed)
    with pq.ParquetWriter(out, SCHEMA) as writer:
        source = pq.ParquetFile(base)
        for group in range(source.num_row_groups):
            table = source.read_row_group(group)
            carries = pa.array(table["doc_id"].to_numpy() % FOOTER_EVERY == 0)
            body = pc.if_else(carries, pc.binary_join_element_wise(table["body"], text, ""), table["body"])
            writer.write_table(table.set_column(table.schema.get_field_index("body"), "body", body))
    base.unlink()
    return out


def run_child(job: dict) -> dict:
    """The child side: ``run_library`` on the corpus; the figures of its release, or the
    message it stopped with."""
    import duckdb

    from dedup_assets.core.lsh.candidates import PairBudgetExceeded
    from dedup_assets.core.pipeline.library import run_library

    settings = Settings(hot_buckets=job["hot_buckets"], max_bucket_size=job["max_bucket_size"], audit_sample_size=AUDIT_SAMPLE)
    try:
        run_library(job["input_path"], job["database_path"], job["output_dir"], settings, duckdb_memory=DUCKDB_MEMORY)
    except PairBudgetExceeded as refused:
        return {"refused": str(refused)}
    manifest = json.loads((Path(job["output_dir"]) / "manifest.json").read_text(encoding="utf-8"))
    with duckdb.connect(job["database_path"], read_only=True) as connection:
        clustered = connection.execute("select count(*) from dedup.clusters").fetchone()[0]
        examples = connection.execute(
            "select bucket_key, texts, example_doc_ids from dedup.hot_buckets order by texts desc limit 3"
        ).fetchall()
    counts = manifest["counts"]
    return {
        "input_rows": counts["input_record_rows"],
        "documents": counts["document_rows"],
        "rejected": counts["rejected_document_rows"],
        "clustered": clustered,
        "hot_buckets_skipped": counts.get("hot_buckets_skipped", 0),
        "largest_hot_bucket_texts": counts.get("largest_hot_bucket_texts", 0),
        "largest_hot_buckets": [list(row) for row in examples],
        "candidates": counts["candidate_pair_rows"],
        "duplicate_pairs": counts["duplicate_pair_rows"],
        "recall_audit": {key: manifest["recall_audit"][key] for key in ("true_pairs", "found_pairs", "recall", "ci_low", "ci_high")},
    }


def measure_boilerplate(workdir: Path, documents: int, max_bucket_size: int = Settings.max_bucket_size) -> dict:
    """Both runs of the boilerplate corpus, each in a measured child (the corpus is written in
    a child too: a child's peak RSS starts at its parent's)."""
    corpus = Path(run_json_child("writing the boilerplate corpus", "boilerplate.corpus", documents, workdir)[1]["corpus"])
    runs = {}
    for mode in ("refuse", "skip"):
        folder = fresh_dir(workdir / f"boilerplate-{mode}")
        job = {
            "input_path": str(corpus),
            "database_path": str(folder / "pipeline.duckdb"),
            "output_dir": str(folder / "out"),
            "hot_buckets": mode,
            "max_bucket_size": max_bucket_size,
        }
        progress(f"boilerplate: run_library with hot_buckets: {mode}")
        run, figures = run_json_child(f"the hot_buckets: {mode} run", "boilerplate.run_child", job)
        runs[mode] = {"wall_s": run.wall_s, "peak_rss_mb": run.peak_rss_mb, **figures}
    skip = runs["skip"]
    accounted = skip["input_rows"] == skip["documents"] + skip["rejected"] and skip["clustered"] == skip["documents"]
    return {"documents": documents, "corpus": str(corpus), "runs": runs, "every_document_accounted_for": accounted}


def print_boilerplate_report(record: dict) -> None:
    runs = record["runs"]
    print(f"## Boilerplate: {record['documents']:,} pages, every {FOOTER_EVERY}th with a shared ~3 KB footer\n")
    refuse, skip = runs["refuse"], runs["skip"]
    audit = skip["recall_audit"]
    outcomes = {
        "refuse": refuse.get("refused", "not refused")[:160] + "…",
        "skip": f"hot buckets left out: {skip['hot_buckets_skipped']:,} (largest {skip['largest_hot_bucket_texts']:,} "
        f"texts); {skip['documents']:,} documents, {skip['rejected']:,} rejected, {skip['clustered']:,} in clusters; "
        f"{skip['candidates']:,} candidates, {skip['duplicate_pairs']:,} duplicate pairs; audited recall {audit['recall']} "
        f"({audit['ci_low']}–{audit['ci_high']}, {audit['found_pairs']:,} of {audit['true_pairs']:,})",
    }
    rows = [[mode, fmt_number(runs[mode]["wall_s"], 1), fmt_number(runs[mode]["peak_rss_mb"]), said] for mode, said in outcomes.items()]
    print(markdown_table(["hot_buckets", "wall s", "peak RSS MB", "outcome"], rows))
    print(f"\nEvery document accounted for: {record['every_document_accounted_for']}")
    for key, texts, examples in skip["largest_hot_buckets"]:
        print(f"- bucket {key}: {texts:,} texts, e.g. {', '.join(examples)}")



def corpus(documents: int, workdir: str) -> dict:
    return {"corpus": write_boilerplate_corpus(documents, Path(workdir))}
