"""The benchmark's markdown report: the engines side by side, our per-step and per-stage times,
the recall of the sketches, and the target lines (also kept as a dict in the JSON record)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from .common import THRESHOLD
from .ours import CORE_STAGES, WARMUP_ROWS

TARGET_SPEEDUP = 5.0
TARGET_LIBRARY_DOCS_PER_S = 50_000
TARGET_PEAK_RSS_MB = 4096
TARGET_SMALL_BATCH_SHARE = 0.10  # of the one-shot run's wall


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
    peer_rows = [table_row(peer["engine"], peer, peer["timed_s"], n_docs) for peer in peers]
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
    # the floor (front end alone) finds no pairs, so it is no engine to beat
    engines = [peer for peer in peers if peer["finds_pairs"]]
    fastest = min(engines, key=lambda peer: peer["wall_s"]) if engines else None
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


def audit_line(ours_runs: dict[str, dict], targets: dict) -> str | None:
    """The recall audit's interval against the planted recall of distinct texts, the figure it
    estimates (the audit leaves exact copies out; the planted recall counts them)."""
    audited = {name: run for name, run in ours_runs.items() if run.get("audit_recall") is not None}
    if not audited:
        return None
    parts = []
    for name, run in audited.items():
        planted = run["recall_distinct_texts"]
        inside = planted is not None and run["audit_ci_low"] <= planted <= run["audit_ci_high"]
        targets.setdefault("recall_audit", {})[name] = {
            "audit": [run["audit_recall"], run["audit_ci_low"], run["audit_ci_high"]],
            "planted_distinct_texts": planted,
            "inside": inside,
        }
        parts.append(
            f"{name} {run['audit_recall']:.4f} ({run['audit_ci_low']:.4f}–{run['audit_ci_high']:.4f}, "
            f"{run['audit_true_pairs']:,} true pairs) vs planted {fmt_number(planted, 4)} over "
            f"{run['planted_distinct_text_pairs']:,} pairs of distinct texts — {verdict(inside)}"
        )
    return "recall audit (95% interval) contains the planted recall of distinct texts: " + "; ".join(parts)


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
        audit_line(ours_runs, targets),
    ]
    if ours and library:
        targets["dagster_overhead"] = ours["wall_s"] / library["wall_s"]
    return [line for line in lines if line], targets


def settings_line(record: dict) -> str:
    """The sketch settings, the machine and when the run started."""
    started = datetime.fromisoformat(record["started"])
    return (
        f"perm {record['perm']}: {record['bands']} bands × {record['rows_per_band']} rows"
        + (
            f" (auto_bands, false_negative_weight {record['auto_bands_false_negative_weight']})"
            if record.get("auto_bands_false_negative_weight") is not None
            else ""
        )
        + ", "
        f"scheme {record['hash_scheme']}, {record['cpus']} CPUs, load average at start "
        f"{record['loadavg_start'][0]:.2f}, {started:%Y-%m-%d %H:%M} UTC"
    )


def warmup_line(record: dict) -> str:
    return (
        f"Compiled kernels were loaded or compiled before timing by a {WARMUP_ROWS}-document run "
        f"({record['kernel_warmup_s']:.1f} s; a first run on a machine compiles them once)."
    )


def print_report(record: dict) -> None:
    """The markdown report: engines, our per-stage times, and the targets."""
    print(
        f"## dedup-assets benchmark: {Path(record['corpus']).name}, {record['documents']:,} docs\n"
    )
    print(settings_line(record) + "\n")
    print(engines_table(record["table"]) + "\n")
    print(warmup_line(record) + "\n")
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


# the incremental benchmark (dedup_bench.incremental)


def fmt_share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


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


def incremental_table(rows: list[dict]) -> str:
    header = [
        "run",
        "documents",
        "wall s (whole process)",
        "Dagster run s (in process)",
        "peak RSS MB",
        "edges found",
        "edges in total",
        "wall ÷ one-shot wall",
        "Dagster run ÷ one-shot wall",
    ]
    body = [
        [
            row["run"],
            fmt_number(row["documents"]),
            fmt_number(row["wall_s"], 2),
            fmt_number(row["in_process_s"], 2),
            fmt_number(row["peak_rss_mb"]),
            fmt_number(row["new_edges"]),
            fmt_number(row["total_edges"]),
            fmt_share(row["wall_share"]),
            fmt_share(row["in_process_share"]),
        ]
        for row in rows
    ]
    return markdown_table(header, body)


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
    print(incremental_table(record["table"]) + "\n")
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
