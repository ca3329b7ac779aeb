"""The engines benchmark's markdown report: the engines side by side, our per-step and per-stage
times, the recall of the sketches, and the target lines (``targets``; also kept as a dict in the
JSON record). The per-stage tables are in ``stage_tables``."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from .common import THRESHOLD, engine_of, is_reference, run_label
from .markdown import fmt_number, fmt_ratio, fmt_share, markdown_table, number, records_table
from .ours import CORE_STAGES, WARMUP_ROWS, assurance_steps, step_kind
from .stage_tables import engines_stages_table, floors_line, memory_note, nodes_table, roofline_table, stages_table, step_memory


def table_row(engine: str, run: dict, timed_s: float, n_docs: int) -> dict:
    """The engines-table columns of one run."""
    return {
        "engine": engine,
        "wall_s": run["wall_s"],
        "cpu_s": run.get("cpu_s"),
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
    n_docs: int,
    ours: dict | None,
    library: dict | None,
    peers: list[dict],
    others: list[dict] | None = None,
) -> list[dict]:
    """One row per engine. Peer rows carry the ratios of our reference run (Dagster end to end,
    else the library run) to theirs, both as whole-process wall times. ``others`` are Dagster
    runs on other engines than the reference's (--both-engines)."""
    our_rows = [
        table_row(run_label(run, table=True), run, sum(run["steps"].values()), n_docs)
        for run in [ours, *(others or [])]
        if run
    ]
    if library:
        our_rows.append(
            table_row("dedup-assets (library)", library, sum(library["stages"].values()), n_docs)
        )
    peer_rows = [table_row(peer["engine"], peer, peer["timed_s"], n_docs) for peer in peers]
    reference = ours or library
    if reference:
        for row in peer_rows:
            row["ours_over_theirs"] = reference["wall_s"] / row["wall_s"]
            row["times_faster"] = row["wall_s"] / reference["wall_s"]
    return our_rows + peer_rows


ENGINE_COLUMNS = {
    "engine": ("engine", str),
    "wall s (whole process)": ("wall_s", number(2)),
    "CPU s (user + sys)": ("cpu_s", number(1)),
    "timed s (in-process)": ("timed_s", number(2)),
    "docs/s": ("docs_per_s", number()),
    "peak RSS MB": ("peak_rss_mb", number()),
    "candidates": ("candidates", number()),
    "accepted edges": ("accepted", number()),
    "recall J>=0.7": ("recall", number(4)),
    "cand. recall": ("candidate_recall", number(4)),
    "ours ÷ theirs": ("ours_over_theirs", fmt_ratio),
    "× faster": ("times_faster", fmt_ratio),
}


def dagster_steps_table(ours: dict) -> str:
    """Every step's seconds, what it does (``ours.step_kind``) and its share of the whole
    process's wall; then the assurance steps (checks and audit) together, and the totals."""
    wall, steps = ours["wall_s"], ours["steps"]
    rows = [(step, step_kind(ours, step), seconds) for step, seconds in steps.items()] + [
        ("**assurance steps**", "check, audit", sum(assurance_steps(ours).values())),
        ("**sum of steps**", "", sum(steps.values())),
        ("**whole process**", "", wall),
    ]
    body = [[step, kind, fmt_number(seconds, 3), fmt_share(seconds / wall)] for step, kind, seconds in rows]
    return markdown_table(["asset (step)", "kind", "seconds", "share of run"], body)


def library_stages_table(library: dict) -> str:
    documents = library["documents"]
    rows = [*library["stages"].items(), (f"**core ({'+'.join(CORE_STAGES)})**", library["core_s"]), ("**whole process**", library["wall_s"])]
    body = [[stage, fmt_number(seconds, 3), fmt_number(documents / seconds if seconds else None)] for stage, seconds in rows]
    return markdown_table(["stage", "seconds", "docs/s"], body)


def settings_line(record: dict) -> str:
    """The sketch settings, the machine and when the run started."""
    weight = record.get("auto_bands_false_negative_weight")
    return (
        f"perm {record['perm']}: {record['bands']} bands × {record['rows_per_band']} rows"
        + ("" if weight is None else f" (auto_bands, false_negative_weight {weight})")
        + f", scheme {record['hash_scheme']}, {record['cpus']} CPUs, load average at start "
        f"{record['loadavg_start'][0]:.2f}, {datetime.fromisoformat(record['started']):%Y-%m-%d %H:%M} UTC"
    )


def runs_line(record: dict) -> str:
    """Every run's walls, of which the smallest counts."""
    runs = [("Dagster", record["dagster"]), ("library", record["library"]), *((peer["engine"], peer) for peer in record["peers"])]
    walls = "; ".join(
        f"{name} {', '.join(f'{wall:.1f}' for wall in run['walls_s'])} s" for name, run in runs if run
    )
    return f"Each run ran {record['runs']} times; the table counts the smallest wall: {walls}."


def report_sections(record: dict) -> list[str]:
    """The markdown report's paragraphs and sections, in order: engines, our per-stage times, and
    the targets."""
    web = " (web-length pages)" if record.get("web_corpus") else ""
    out = [
        f"## dedup-assets benchmark: {Path(record['corpus']).name}, {record['documents']:,} docs{web}",
        settings_line(record),
        records_table(ENGINE_COLUMNS, record["table"]),
    ]
    if record.get("runs", 1) > 1:
        out.append(runs_line(record))
    out.append(
        f"Compiled kernels were loaded or compiled before timing by a {WARMUP_ROWS}-document run "
        f"({record['kernel_warmup_s']:.1f} s; a first run on a machine compiles them once)."
    )
    if record.get("library_skipped") and record["library_skipped"] != "--skip-library":
        out.append(f"Library run skipped: {record['library_skipped']}.")
    dagster_runs = [run for run in (record["dagster"], *record.get("dagster_other_engines", [])) if run]
    if any(not is_reference(engine_of(run)) for run in dagster_runs):
        out.append(
            "Peak RSS of a ray run above is the CLI's ru_maxrss: the largest single process among it "
            "and the descendants it waited for, not the sum over Ray's processes; the per-stage "
            "table below has the whole tree's."
        )

    def section(title: str, *body: str) -> None:
        out.append("\n\n".join([f"### {title}", *body]))

    if record["dagster"]:
        section(
            "Dagster run, per asset", "Assurance steps (kind check or audit) check or measure the run rather "
            "than make it: the asset checks (the removals check and the release's among them) and "
            "recall_audit and evaluation.", dagster_steps_table(record["dagster"]),
        )
    for run in dagster_runs:
        engine = engine_of(run)
        section(f"Dagster run (engine {engine}), per stage: seconds and peak memory", stages_table(run))
        # the bytes of a ray run's tree are mostly Ray's own traffic between its processes
        if record.get("floors") and is_reference(engine) and step_memory(run):
            section(
                f"Roofline (engine {engine}): each step against its floor",
                floors_line(record["floors"]), roofline_table(run, record["floors"]),
            )
        if run.get("ray_cluster"):
            cluster = run["ray_cluster"]
            section(
                f"Ray cluster, per node and stage ({len(cluster['nodes'])} local nodes of 1 CPU, "
                f"{cluster['object_store_mb']:,} MB object store each; the Dagster CLI above is the "
                "driver, outside them)", nodes_table(run),
            )
    for run in dagster_runs[1:]:
        section(
            f"Dagster runs per stage, {dagster_runs[0]['engine']} and {run['engine']} side by side "
            "(peak MB: private + object store, over the process tree)", engines_stages_table(dagster_runs[0], run),
        )
    if dagster_runs:
        out.append(memory_note(dagster_runs))
    if record["library"]:
        section("Library core, per stage", library_stages_table(record["library"]))
    if record["recall_spread"]:
        spread = record["recall_spread"]
        section(
            f"Recall of the sketch and banding alone, over {len(spread['seeds'])} seeds",
            f"{spread['planted_positive']:,} planted pairs with J ≥ {THRESHOLD}; every engine "
            "sketches the same 64-bit shingle hashes (ours) with seeds "
            f"{', '.join(map(str, spread['seeds']))}. Independent MinHash rows would find "
            f"{spread['independent_expectation']:.4f} of them on average.", spread["table"],
        )
    if "dagster_overhead" in record["targets"]:
        out.append(f"Dagster overhead: {record['targets']['dagster_overhead']:.2f}× the library's whole-process wall")
    section("Targets", "\n".join(f"- {line}" for line in record["target_lines"]))
    return out


def print_report(record: dict) -> None:
    print("\n\n".join(report_sections(record)))


def precision_errors(record: dict) -> int:
    """Accepted edges of our runs whose exact Jaccard is below the threshold (should be 0)."""
    return sum(
        run.get("accepted_below_threshold", 0)
        for run in (record["dagster"], *record.get("dagster_other_engines", []), record["library"])
        if run
    )
