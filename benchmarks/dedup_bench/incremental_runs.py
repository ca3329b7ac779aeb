"""The incremental benchmark, one measured process at a time: the one-shot Dagster run over N
documents, the same N documents added as K batches through the Dagster CLI into a fresh index,
whether the batches' edges and clusters are the one-shot run's, and then one small batch of N/100
more documents against the N indexed.

The corpus is generated once with N + N/100 documents: the generator copies uniformly chosen
earlier documents, so the small batch holds planted duplicates of documents the index has.
As in ``measure``, this process loads no corpus data: splitting and comparing are children.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from .common import (
    Sketch,
    cli,
    progress,
    require_success,
    run_json_child,
    run_measured,
)
from .measure import Options, prepare_corpus, run_record
from .ours import dagster_home, dagster_times, fresh_dir, materialize, run_dagster, warm_kernels
from .incremental_report import incremental_rows, incremental_targets

SMALL_BATCH_DIVISOR = 100  # the small batch has N / 100 documents
ONE_SHOT_FOLDER, BATCH_FOLDER = "one-shot", "batches"
INDEX_DATABASE = "index.duckdb"


def batch_sizes(documents: int, batches: int) -> list[int]:
    """The documents of each batch, in order: ``batches`` shares of ``documents`` that differ by
    at most one, then the small batch's hundredth of them."""
    share, extra = divmod(documents, batches)
    small = max(1, documents // SMALL_BATCH_DIVISOR)
    return [share + (index < extra) for index in range(batches)] + [small]


def batch_keys(count: int) -> list[str]:
    """``count`` batch keys whose string order, which is the order batches are added in, is
    their numeric order: part-00, part-01, … part-10."""
    width = len(str(count - 1))
    return [f"part-{index:0{width}d}" for index in range(count)]


@dataclass(frozen=True)
class BatchFiles:
    """One split corpus: the folder of the K batches (the one-shot run's input), the batch folder
    (the same K and the small batch: DEDUP_BATCHES), and every batch's key, in order."""

    one_shot: Path
    folder: Path
    keys: list[str]


def write_batches(corpus: Path, folder: Path, sizes: list[int]) -> dict:
    """Cut the corpus's rows, in order, into one file per size: every batch into
    ``folder/batches``, and the first K (all but the small one) hard-linked into
    ``folder/one-shot``, so both runs read the same bytes. Written aside and renamed into place,
    so an interrupted split is never taken for a finished one."""
    import pyarrow.parquet as pq

    from .corpus import ROW_GROUP_DOCS, corpus_writer

    corpus, folder = Path(corpus), Path(folder)
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    batches, one_shot = partial / BATCH_FOLDER, partial / ONE_SHOT_FOLDER
    batches.mkdir(parents=True)
    one_shot.mkdir()
    rows = pq.ParquetFile(corpus).iter_batches(batch_size=ROW_GROUP_DOCS)
    pending = next(rows)
    keys = batch_keys(len(sizes))
    for key, size in zip(keys, sizes):
        with corpus_writer(batches / f"{key}.parquet") as writer:
            while size:
                if not pending.num_rows:
                    pending = next(rows)
                taken = pending.slice(0, size)
                writer.write_batch(taken)
                pending = pending.slice(taken.num_rows)
                size -= taken.num_rows
    for key in keys[:-1]:
        os.link(batches / f"{key}.parquet", one_shot / f"{key}.parquet")
    partial.rename(folder)
    return {"folder": folder}


def prepare_batches(options: Options) -> tuple[Path, BatchFiles]:
    """The corpus of N + N/100 documents and its batch files, each made once and cached in the
    workdir."""
    sizes = batch_sizes(options.docs, options.incremental)
    corpus = prepare_corpus(replace(options, docs=sum(sizes)))
    folder = corpus.with_name(f"{corpus.stem}.batches-{options.incremental}")
    if not folder.is_dir():
        progress(f"splitting {corpus.name} into {len(sizes)} batch files in {folder}")
        run_json_child("batch split", "incremental_runs.write_batches", corpus, folder, sizes)
    keys = batch_keys(len(sizes))
    return corpus, BatchFiles(folder / ONE_SHOT_FOLDER, folder / BATCH_FOLDER, keys)


def register_batches(files: BatchFiles, home: str) -> None:
    """Every batch file as a partition of the instance in ``home``, as a user runs
    ``dedup register-batches`` before the batches' commands."""
    run = run_measured([cli("dedup"), "register-batches"], {"DAGSTER_HOME": home, "DEDUP_BATCHES": str(files.folder)})
    require_success(run, "registering the batches")


def run_batch(files: BatchFiles, key: str, index: Path, home: str, sketch: Sketch) -> dict:
    """Add batch ``key`` to the index in ``index`` with the real CLI: its whole-process and
    Dagster times, and the counts and running totals of its manifest."""
    output_dir = index / "out"
    env = {
        "DAGSTER_HOME": home,
        "DEDUP_BATCHES": str(files.folder),
        "DEDUP_DATABASE": str(index / INDEX_DATABASE),
        "DEDUP_OUTPUT_DIR": str(output_dir),
    }
    selection = ("--select", "group:incremental", "--partition", key)
    run = materialize(f"batch {key}", env, sketch, *selection)
    manifest = output_dir / "batches" / key / "manifest.json"
    figures = json.loads(manifest.read_text(encoding="utf-8"))
    return {
        "key": key,
        **dagster_times(run),
        "counts": figures["counts"],
        "totals": figures["totals"],
    }


def compare(index_db: Path, one_shot_db: Path) -> dict:
    """The comparison of the index with the one-shot run, in a child (it reads both databases)."""
    progress("comparing the batches' edges and clusters with the one-shot run's")
    return run_json_child("comparison with the one-shot run", "incremental_runs.compare_child", index_db, one_shot_db)[1]


def compare_child(index_db: Path, one_shot_db: Path) -> dict:
    """``one_shot_differences`` of the index and the one-shot run's tables (None: they hold other
    documents; [] equal), with both sides' edges and multi-document clusters. The one-shot
    database is attached, read-only like the index's; the project's table names have two parts
    (``dedup.clusters``), so its schema goes on the search path after the index's own."""
    # imported here, not above: the measuring parent imports this module and stays small
    import duckdb

    from dedup_assets.core.incremental.index_reports import one_shot_differences
    from dedup_assets.core.incremental.index_tables import IndexTables
    from dedup_assets.core.storage.tables import SCHEMA, Tables

    index, one_shot = IndexTables.in_schema(), Tables.in_schema(SCHEMA)
    quoted = str(one_shot_db).replace("'", "''")
    with duckdb.connect(str(index_db), read_only=True) as connection:
        connection.execute(f"attach '{quoted}' as one_shot (read_only)")
        connection.execute(f"set search_path = 'main,one_shot.{SCHEMA}'")
        differences = one_shot_differences(connection, one_shot, index)
        counts = connection.execute(
            f"""
            select (select count(*) from {one_shot.duplicate_pairs}),
                   (select count(*) from {index.pairs} where is_duplicate),
                   (select count(distinct cluster_id) from {one_shot.clusters}
                    where cluster_size > 1),
                   (select count(*) from (
                      select cluster_id from {index.members}
                      group by cluster_id having count(*) > 1))
            """
        ).fetchall()[0]
    names = ("one_shot_edges", "batch_edges", "one_shot_clusters", "batch_clusters")
    return {"differences": differences, **dict(zip(names, counts))}


def measure_incremental(options: Options, argv: list[str]) -> dict:
    """Run the incremental benchmark and return its whole record."""
    started = datetime.now(timezone.utc)
    load_start = os.getloadavg()
    corpus, files = prepare_batches(options)
    # an earlier invocation's databases hold page cache that this invocation's runs need
    shutil.rmtree(options.workdir / "run", ignore_errors=True)
    index = fresh_dir(options.workdir / "index")
    sketch = options.sketch()
    warmup_s = warm_kernels(corpus, options.workdir, sketch)
    one_shot = run_dagster(files.one_shot, options.workdir, sketch)
    *keys, small_key = files.keys
    # one Dagster instance for the whole index, as a user's would be
    with dagster_home() as home:
        register_batches(files, home)
        batches = [run_batch(files, key, index, home, sketch) for key in keys]
        equivalence = compare(index / INDEX_DATABASE, Path(one_shot["database"]))
        small = run_batch(files, small_key, index, home, sketch)
    lines, targets = incremental_targets(one_shot, batches, small, equivalence)
    return {
        "mode": "incremental",
        **run_record(started, argv, corpus, one_shot["counts"]["document_rows"], options, load_start, warmup_s),
        "batches": len(batches),
        "dagster": one_shot,
        "batch_runs": batches,
        "small_batch": small,
        "equivalence": equivalence,
        "table": incremental_rows(one_shot, batches, small),
        "target_lines": lines,
        "targets": targets,
    }

