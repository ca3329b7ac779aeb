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


def print_report(record: dict) -> None:
    """The markdown report: engines, our per-stage times, and the targets."""
    started = datetime.fromisoformat(record["started"])
    print(
        f"## dedup-assets benchmark: {Path(record['corpus']).name}, {record['documents']:,} docs\n"
    )
    print(
        f"perm {record['perm']} = {record['bands']} bands × {record['rows_per_band']} rows, "
        f"scheme {record['hash_scheme']}, {record['cpus']} CPUs, load average at start "
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

