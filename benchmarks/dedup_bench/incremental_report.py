"""The incremental benchmark's report (dedup_bench.incremental_runs): every run side by side, the
batches' steps, and the targets."""

from __future__ import annotations

from pathlib import Path

from .markdown import fmt_number, fmt_share, markdown_table, number, records_table, verdict
from .report import dagster_steps_table, settings_line, warmup_line
from .targets import TARGET_PEAK_RSS_MB

TARGET_SMALL_BATCH_SHARE = 0.10  # of the one-shot run's wall


def incremental_row(
    run: str, figures: dict, documents: int, edges: tuple[int, int], one_shot_wall: float
) -> dict:
    """The incremental table's columns of one run: ``figures`` has its wall, Dagster in-process
    time and peak RSS, ``edges`` the edges it found and those in its output after it."""
    in_process = figures["in_process_s"]
    return {
        "run": run,
        "documents": documents,
        "wall_s": figures["wall_s"],
        "in_process_s": in_process,
        "peak_rss_mb": figures["peak_rss_mb"],
        "new_edges": edges[0],
        "total_edges": edges[1],
        "wall_share": figures["wall_s"] / one_shot_wall,
        "in_process_share": None if in_process is None else in_process / one_shot_wall,
    }


def batch_edges(run: dict) -> tuple[int, int]:
    """The edges a batch found (within it and with earlier batches) and the index's total."""
    counts = run["counts"]
    found = counts["duplicate_pairs_within_batch"] + counts["duplicate_pairs_with_earlier"]
    return found, run["totals"]["duplicate_pairs"]


def incremental_rows(one_shot: dict, batches: list[dict], small: dict) -> list[dict]:
    """One row for the one-shot run, one per batch, one for the K batches together, and one
    for the small batch; every time also as a share of the one-shot run's wall."""
    wall = one_shot["wall_s"]
    rows = [
        incremental_row(
            "one-shot (group:deduplication)",
            one_shot,
            one_shot["counts"]["document_rows"],
            (one_shot["accepted"], one_shot["accepted"]),
            wall,
        )
    ]
    for run in batches:
        documents = run["counts"]["document_rows"]
        rows.append(incremental_row(f"batch {run['key']}", run, documents, batch_edges(run), wall))
    in_process = [run["in_process_s"] for run in batches]
    together = {
        "wall_s": sum(run["wall_s"] for run in batches),
        "in_process_s": None if None in in_process else sum(in_process),
        "peak_rss_mb": max(run["peak_rss_mb"] for run in batches),
    }
    documents = sum(run["counts"]["document_rows"] for run in batches)
    edges = (sum(batch_edges(run)[0] for run in batches), batch_edges(batches[-1])[1])
    rows.append(incremental_row(f"**{len(batches)} batches**", together, documents, edges, wall))
    documents = small["counts"]["document_rows"]
    rows.append(
        incremental_row(f"small batch {small['key']}", small, documents, batch_edges(small), wall)
    )
    return rows


INCREMENTAL_COLUMNS = {
    "run": ("run", str),
    "documents": ("documents", number()),
    "wall s (whole process)": ("wall_s", number(2)),
    "Dagster run s (in process)": ("in_process_s", number(2)),
    "peak RSS MB": ("peak_rss_mb", number()),
    "edges found": ("new_edges", number()),
    "edges in total": ("total_edges", number()),
    "wall ÷ one-shot wall": ("wall_share", fmt_share),
    "Dagster run ÷ one-shot wall": ("in_process_share", fmt_share),
}


def batch_steps_table(runs: list[dict]) -> str:
    """Seconds per step of every batch run, beside its Dagster in-process and whole-process time:
    a step that grows with the index shows down its column."""
    steps = list(runs[0]["steps"])
    header = ["batch", *steps, "sum of steps", "in process", "whole process"]
    body = [
        [
            run["key"],
            *(fmt_number(run["steps"].get(step), 2) for step in steps),
            fmt_number(sum(run["steps"].values()), 2),
            fmt_number(run["in_process_s"], 2),
            fmt_number(run["wall_s"], 2),
        ]
        for run in runs
    ]
    return markdown_table(header, body)


def small_batch_targets(one_shot: dict, small: dict, targets: dict) -> list[str]:
    """The small batch's whole process and its Dagster run, each against the target share of
    the one-shot run's wall: the CLI's start-up is in the first and not in the second."""
    wall = one_shot["wall_s"]
    in_process = small["in_process_s"]
    shares = {
        "whole process": small["wall_s"] / wall,
        "Dagster run (in process)": None if in_process is None else in_process / wall,
    }
    targets["small_batch_share_of_one_shot_wall"] = shares
    documents = small["counts"]["document_rows"]
    indexed = small["totals"]["document_rows"] - documents
    return [
        f"small batch ({documents:,} documents against {indexed:,}), {name}: "
        f"{fmt_share(share)} of the one-shot run's {wall:.1f} s "
        f"(target ≤ {TARGET_SMALL_BATCH_SHARE:.0%}) — "
        + ("n/a" if share is None else verdict(share <= TARGET_SMALL_BATCH_SHARE))
        for name, share in shares.items()
    ]


def batch_rss_target(runs: list[dict], targets: dict) -> str:
    heaviest = max(runs, key=lambda run: run["peak_rss_mb"])
    peak = heaviest["peak_rss_mb"]
    targets["batch_peak_rss_mb"] = {"batch": heaviest["key"], "value": peak}
    return (
        f"peak RSS of the batch runs: {peak:,.0f} MB at most (batch {heaviest['key']}; target < "
        f"{TARGET_PEAK_RSS_MB:,}) — {verdict(peak < TARGET_PEAK_RSS_MB)}"
    )


def equivalence_line(equivalence: dict, batches: int, targets: dict) -> str:
    """Whether the K batches' edges and clusters are the one-shot run's, with both counts."""
    differences = equivalence["differences"]
    targets["equivalent"] = differences == []
    counts = (
        f"edges: one-shot {equivalence['one_shot_edges']:,}, {batches} batches "
        f"{equivalence['batch_edges']:,}; multi-document clusters: one-shot "
        f"{equivalence['one_shot_clusters']:,}, batches {equivalence['batch_clusters']:,}"
    )
    if differences is None:
        outcome = "NOT comparable: the index and the one-shot run hold other documents"
    elif differences:
        outcome = "NOT equal: " + " | ".join(differences)
    else:
        outcome = "equal (one_shot_differences is [])"
    return f"equivalence after {batches} batches — {counts} — {outcome}"


def incremental_targets(
    one_shot: dict, batches: list[dict], small: dict, equivalence: dict
) -> tuple[list[str], dict]:
    """The incremental report's target lines and the same facts as a dict."""
    targets: dict = {}
    lines = [
        *small_batch_targets(one_shot, small, targets),
        batch_rss_target([*batches, small], targets),
        equivalence_line(equivalence, len(batches), targets),
    ]
    return lines, targets


def print_incremental_report(record: dict) -> None:
    """The incremental report: every run side by side, the batches' steps, and the targets."""
    small = record["small_batch"]
    print(
        f"## dedup-assets incremental benchmark: {record['documents']:,} docs in "
        f"{record['batches']} batches, then {small['counts']['document_rows']:,} more "
        f"({Path(record['corpus']).name})\n"
    )
    print(settings_line(record) + "\n")
    print(records_table(INCREMENTAL_COLUMNS, record["table"]) + "\n")
    print(
        "Each row is one `dagster asset materialize` process; the batches add to one index, in key "
        "order. Dagster run = its executor's `Finished steps in process` time (the steps, resource "
        "start-up and bookkeeping), without the CLI's imports and definitions load.\n"
    )
    print(warmup_line(record) + "\n")
    print("### One-shot run, per asset\n\n" + dagster_steps_table(record["dagster"]) + "\n")
    runs = [*record["batch_runs"], small]
    print("### Batch runs, per step (seconds)\n\n" + batch_steps_table(runs) + "\n")
    print("### Targets\n")
    print("\n".join(f"- {line}" for line in record["target_lines"]))
