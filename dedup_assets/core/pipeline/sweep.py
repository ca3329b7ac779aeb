"""The parameter sweep: the pipeline's own steps, from fingerprints to duplicate pairs, run once
per settings combination on one seeded sample of the documents, in a scratch DuckDB, and each
measured against an exhaustive ground truth of that sample.

The ground truth is the recall audit's probe (:class:`audit_probe.AuditProbe`: prefix filtering,
exact) with every text of the sample audited, computed once per (jaccard_threshold, shingle_size)
and shared by the combinations with that pair. Unlike the audit's headline, it leaves exact
copies out and takes each text through its first copy, since the pipeline pairs every copy
through its content hash whatever LSH does: the sweep measures what LSH finds. Recall is the share of the
true pairs of distinct texts that are accepted edges; precision is the share of the edges between
distinct texts (``found_by`` ``lsh``) that are true pairs.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from ..audit.recall import counted_pairs
from ..audit.probe import AuditProbe, probe_pass
from ..audit.sample import sample_doc_ids
from ..lsh.candidates import PairBudgetExceeded
from .library import found_settings, run_core_steps
from ..release.plots import FIGURE_SIZE, new_axes, png_bytes
from ..release.outputs import spreadsheet_safe
from ..settings.model import Settings
from .sweep_settings import SweepSettings
from ..storage.store import TableBuild, open_database, rows_with_ids, write_table
from ..util.streams import Progress
from ..storage.tables import Tables
from ..text.normalize import Shingling
from ..verify.pairs import MemoryBudgetExceeded, first_copies

SWEEP_TABLE = "parameter_sweep"
SWEEP_CSV = "sweep.csv"
SWEEP_PNG = "sweep.png"
# the lineage entry of the parameter_sweep table that records how many documents were sampled
SWEEP_SAMPLED = "sweep_sampled_documents"
# where the sample and each combination's tables live in the scratch database
SCRATCH_SCHEMA = "sweep"
# ``seconds`` is the only column that differs between two sweeps of the same input and settings
SWEEP_COLUMNS = pa.schema(
    [
        ("combination", pa.int32()),  # its place in sweep_combinations
        ("label", pa.string()),
        ("num_perm", pa.int32()),
        ("rows_per_band", pa.int32()),
        ("auto_bands", pa.bool_()),
        ("false_negative_weight", pa.float64()),
        ("jaccard_threshold", pa.float64()),
        ("shingle_size", pa.int32()),
        ("bands", pa.int32()),
        ("rows", pa.int32()),  # rows per band in use
        ("pair_slots", pa.int64()),
        ("candidates", pa.int64()),
        ("edges", pa.int64()),
        ("lsh_edges", pa.int64()),  # edges between distinct texts: precision's denominator
        ("true_pairs", pa.int64()),
        ("found_pairs", pa.int64()),
        ("recall", pa.float64()),
        ("precision", pa.float64()),
        ("refused", pa.string()),  # why the pair limits refused the combination; null when it ran
        ("seconds", pa.float64()),
    ]
)


@dataclass(frozen=True)
class SweepResult:
    """The sweep's table and how many documents it sampled."""

    rows: pa.Table  # SWEEP_COLUMNS, one row per combination, in their order
    sampled_documents: int


def run_sweep(
    connection: duckdb.DuckDBPyConnection,
    tables: Tables,
    run: Settings,
    sweep: SweepSettings,
    memory_limit: str,
    log: Progress,
) -> SweepResult:
    """Run every combination of ``sweep`` (each applied to the ``run`` settings) on a seeded
    sample of the ``documents`` that ``connection`` holds, in a scratch database with
    ``memory_limit``."""
    applied = sweep.settings(run)
    # threshold and shingle size join the labels only when the combinations do not share them
    varied = len({(settings.jaccard_threshold, settings.shingle_size) for settings in applied}) > 1
    with _scratch(memory_limit) as scratch:
        scratch_tables = Tables.in_schema(SCRATCH_SCHEMA)
        schema = connection.sql(f"select doc_id, domain, body from {tables.documents} limit 0").to_arrow_table().schema
        sampled = write_table(
            scratch,
            scratch_tables.documents,
            TableBuild(
                batches=_sampled_documents(connection, tables, sweep.sample_size, run.minhash_seed, run.batch_size),
                schema=schema,
            ),
        )
        truths: dict[tuple[float, Shingling], pa.Table] = {}
        rows = []
        for index, settings in enumerate(applied):
            log(f"parameter sweep: sweep_combinations[{index}], {_label(settings, varied)} ({index + 1} of {len(applied)})")
            rows.append({"combination": index, **_measure(scratch, scratch_tables, settings, truths, varied, log)})
    return SweepResult(pa.Table.from_pylist(rows, schema=SWEEP_COLUMNS), sampled)


@contextmanager
def _scratch(memory_limit: str) -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB file of its own in a temporary folder, deleted with it."""
    with tempfile.TemporaryDirectory(prefix="dedup-sweep-") as folder:
        # not named like its schema: DuckDB would not know whether ``sweep.x`` is the file's or the schema's
        connection = open_database(str(Path(folder) / "scratch.duckdb"), memory_limit, SCRATCH_SCHEMA)
        try:
            yield connection
        finally:
            connection.close()


def _sampled_documents(
    connection: duckdb.DuckDBPyConnection, tables: Tables, size: int, seed: int, batch_size: int
) -> Iterator[pa.RecordBatch]:
    """The ``doc_id``, ``domain`` and ``body`` (what the steps read) of ``size`` documents drawn
    as the recall audit draws its sample (seeded by ``seed``), in input order, streamed."""
    doc_ids = connection.sql(f"select doc_id from {tables.documents}").to_arrow_table().column(0).combine_chunks()
    chosen = doc_ids.filter(pc.is_in(doc_ids, value_set=sample_doc_ids(doc_ids, size, seed)))
    yield from rows_with_ids(connection, tables.documents, chosen, ["domain", "body"]).to_batches(batch_size)


def _text_pairs(connection: duckdb.DuckDBPyConnection, tables: Tables, settings: Settings) -> pa.Table:
    """What the probe of every first copy, fed every first copy, finds: every true pair of two
    distinct texts of the documents, each text through its first copy."""
    connection.register("copies", first_copies(connection, tables))
    try:
        texts = connection.sql(
            f"select doc_id, body from {tables.documents} where doc_id not in (select doc_id from copies)"
        ).to_arrow_table()
    finally:
        connection.unregister("copies")
    shingling, threshold = settings.shingling(), settings.jaccard_threshold
    doc_ids, bodies = (texts.column(name).combine_chunks() for name in ("doc_id", "body"))
    probe = AuditProbe(doc_ids, bodies, shingling, threshold)
    return probe_pass(probe, texts.to_batches(settings.batch_size)).found()


def _label(settings: Settings, varied: bool) -> str:
    """``128: 16x8``, ``128: 14x9 auto 0.5``; with ``t=0.8 k=3`` when combinations differ in them."""
    params = settings.sketch_params()
    label = f"{settings.num_perm}: {params.bands}x{params.rows_per_band}"
    if settings.auto_bands:
        label += f" auto {settings.false_negative_weight:g}"
    if varied:
        label += f" t={settings.jaccard_threshold:g} k={settings.shingle_size}"
    return label


def _measure(
    connection: duckdb.DuckDBPyConnection,
    tables: Tables,
    settings: Settings,
    truths: dict[tuple[float, Shingling], pa.Table],
    varied: bool,
    log: Progress,
) -> dict:
    """One combination's row: the steps as the pipeline runs them, timed, then their edges
    against the ground truth for its threshold and shingle size (made on first use, into
    ``truths``)."""
    params = settings.sketch_params()
    row = {
        "label": _label(settings, varied),
        "num_perm": settings.num_perm,
        "rows_per_band": settings.rows_per_band,
        "auto_bands": settings.auto_bands,
        "false_negative_weight": settings.false_negative_weight,
        "jaccard_threshold": settings.jaccard_threshold,
        "shingle_size": settings.shingle_size,
        "bands": params.bands,
        "rows": params.rows_per_band,
    }
    started = time.perf_counter()
    try:
        steps = run_core_steps(connection, tables, settings, log, audit=False)
        row.update(pair_slots=steps.pressure.pair_slots, candidates=steps.candidates, edges=steps.edges)
    except (PairBudgetExceeded, MemoryBudgetExceeded) as error:
        return {**row, "refused": str(error), "seconds": round(time.perf_counter() - started, 3)}
    row["seconds"] = round(time.perf_counter() - started, 3)

    # its truth leaves out what its fingerprinting found to (ignore_shared_above), as its runs did
    settings = found_settings(connection, tables, settings)
    key = (settings.jaccard_threshold, settings.shingling())
    if key not in truths:  # every text of the sample audited: its true pairs are all there are
        truths[key] = _text_pairs(connection, tables, settings)
    # every document is its own text here (no copies named): the pairs are text pairs, each once
    no_copies = pa.table({"doc_id": pa.array([], pa.string()), "first_copy_doc_id": pa.array([], pa.string())})
    write_table(connection, tables.recall_audit, counted_pairs(tables, settings.jaccard_threshold, truths[key], no_copies))
    true, found = connection.execute(
        f"select coalesce(sum(pairs), 0)::bigint, coalesce(sum(pairs) filter (where found), 0)::bigint "
        f"from {tables.recall_audit}"
    ).fetchall()[0]
    # true pairs leave copies out, so a found one is an edge between two distinct texts: LSH's
    lsh_edges = connection.execute(
        f"select count(*) from {tables.duplicate_pairs} where found_by = 'lsh'"
    ).fetchall()[0][0]
    return {
        **row,
        "lsh_edges": lsh_edges,
        "true_pairs": true,
        "found_pairs": found,
        "recall": found / true if true else None,
        "precision": found / lsh_edges if lsh_edges else None,
    }


def sweep_png(rows: pa.Table, sampled_documents: int) -> bytes:
    """Recall against candidates: a point per combination that ran and had true pairs to find,
    numbered by its place in the list (combinations on one point share it), with the key beside."""
    points: dict[tuple[int, float], list[int]] = {}
    for row in rows.to_pylist():
        if row["recall"] is not None:
            points.setdefault((row["candidates"], row["recall"]), []).append(row["combination"])
    labels = dict(zip(rows.column("combination").to_pylist(), rows.column("label").to_pylist()))
    from matplotlib import ticker

    figure, axes = new_axes((FIGURE_SIZE[0] + 2.4, FIGURE_SIZE[1]))  # wider: room for the key
    for point, numbers in points.items():
        axes.plot(*point, "o", color="#1f77b4", label="\n".join(f"{n}: {labels[n]}" for n in numbers))
        axes.annotate(", ".join(map(str, numbers)), point, textcoords="offset points", xytext=(4, 4), fontsize=7)
    candidates = [x for x, _ in points]
    if candidates and min(candidates) > 0 and max(candidates) >= 10 * min(candidates):
        axes.set_xscale("log")  # combinations apart by orders of magnitude in candidates
        axes.xaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        axes.xaxis.set_minor_formatter(ticker.NullFormatter())
    axes.xaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:,.0f}"))
    axes.margins(x=0.1)
    if points:
        axes.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=7, frameon=False, handlelength=0.8)
    axes.set_title(
        f"Parameter sweep: {sum(map(len, points.values()))} of {rows.num_rows} combinations on "
        f"{sampled_documents:,} documents",
        fontsize=10,
    )
    axes.set_xlabel("candidate pairs")
    axes.set_ylabel("recall (pairs of distinct texts)")
    axes.set_ylim(0, 1.05)
    axes.grid(alpha=0.3, which="both")
    figure.tight_layout()
    return png_bytes(figure)


def sweep_files(
    connection: duckdb.DuckDBPyConnection, table: str, png: bytes
) -> dict[str, Callable[[Path], object]]:
    """How to write ``sweep.csv`` (the stored ``table``, in combination order) and ``sweep.png``
    to a path."""

    def write_csv(path: Path) -> None:
        spreadsheet_safe(connection.sql(f"select * from {table} order by combination")).write_csv(str(path))

    return {SWEEP_CSV: write_csv, SWEEP_PNG: lambda path: path.write_bytes(png)}
