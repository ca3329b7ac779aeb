"""The benchmark's markdown report: the engines side by side, our per-step and per-stage times,
the recall of the sketches, and the target lines (also kept as a dict in the JSON record)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from .common import THRESHOLD
from .memory import OUTSIDE_STEPS, PSS_CPU_SHARE, WHOLE_RUN
from .ours import CORE_STAGES, WARMUP_ROWS
from .roofline import AT_LIMIT, HASHING_STEPS, floor_s, hashed_mb

TARGET_SPEEDUP = 8.0  # issue 19: the whole Dagster run against the fastest peer, at 1M
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


def dagster_label(run: dict) -> str:
    """The Dagster run's name in the tables: as before engines for duckdb, else with its engine."""
    engine = run.get("engine", "duckdb")
    return "dedup-assets (Dagster e2e)" if engine == "duckdb" else f"dedup-assets (Dagster e2e, {engine})"


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
        table_row(dagster_label(run), run, sum(run["steps"].values()), n_docs)
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


def step_memory(run: dict) -> dict[str, dict]:
    """The run's sampled peaks per step (and OUTSIDE_STEPS, WHOLE_RUN); empty when unsampled."""
    return (run.get("memory") or {}).get("steps", {})


def stage_names(run: dict) -> list[str]:
    """The run's steps in the order they started, then any with a time but no sample."""
    sampled = [step for step in step_memory(run) if step not in (OUTSIDE_STEPS, WHOLE_RUN)]
    return sampled + [step for step in run["steps"] if step not in sampled]


def outside_steps_s(run: dict) -> float:
    """The whole process's wall less its steps: the CLI's start-up and definitions load, resource
    start-up and teardown, and Dagster's bookkeeping between steps."""
    return run["wall_s"] - sum(run["steps"].values())


def stage_seconds(run: dict, stage: str) -> float | None:
    if stage == OUTSIDE_STEPS:
        return outside_steps_s(run)
    if stage == WHOLE_RUN:
        return run["wall_s"]
    return run["steps"].get(stage)


def stage_label(stage: str) -> str:
    return {WHOLE_RUN: "**whole process**", OUTSIDE_STEPS: "(outside steps)"}.get(stage, stage)


def fmt_samples(peak: dict) -> str:
    """How many samples a step's peaks rest on, and how many of them read PSS."""
    return f"{peak.get('samples', 0)} ({peak.get('pss_samples', 0)})"


def stages_table(run: dict) -> str:
    """Per step: Dagster's seconds and the peak memory of the run's process tree while it ran."""
    header = [
        "step",
        "seconds",
        "peak MB (private + object store)",
        "peak MB (PSS sum)",
        "peak MB (RSS sum)",
        "/dev/shm MB",
        "processes",
        "samples (with PSS)",
    ]
    memory = step_memory(run)
    rows = []
    for stage in [*stage_names(run), OUTSIDE_STEPS, WHOLE_RUN]:
        peak = memory.get(stage, {})
        rows.append(
            [
                stage_label(stage),
                fmt_number(stage_seconds(run, stage), 3),
                fmt_number(peak.get("private_mb")),
                fmt_number(peak.get("pss_mb")),
                fmt_number(peak.get("rss_mb")),
                fmt_number(peak.get("shm_mb")),
                fmt_number(peak.get("processes")),
                fmt_samples(peak),
            ]
        )
    return markdown_table(header, rows)


def nodes_table(run: dict) -> str:
    """Per step, on a cluster the run joined: each Ray node's peak memory (private + object
    store, over the processes Ray started for it and their workers) and processes."""
    nodes = list(run["ray_cluster"]["nodes"])
    memory = step_memory(run)
    rows = []
    for stage in [*stage_names(run), OUTSIDE_STEPS, WHOLE_RUN]:
        peaks = memory.get(stage, {}).get("nodes", {})
        cells = [
            f"{fmt_number(peaks[node]['private_mb'])} ({peaks[node]['processes']})" if node in peaks else "-"
            for node in nodes
        ]
        rows.append([stage_label(stage), fmt_number(stage_seconds(run, stage), 3), *cells])
    return markdown_table(["step", "seconds", *(f"{node}: peak MB (processes)" for node in nodes)], rows)


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    return None if numerator is None or not denominator else numerator / denominator


def roofline_table(run: dict, floors: dict) -> str:
    """Per step: seconds, the bytes its process tree read and wrote, the body bytes it hashes,
    its floor at this invocation's measured rates (``roofline.py``) and its time over that
    floor; the whole process's row is its own bytes (start-up and teardown included) and the
    bodies hashed by all its steps."""
    memory = step_memory(run)
    steps = [stage for stage in stage_names(run) if "read_mb" in memory.get(stage, {})]
    rows = []
    for label, seconds, moved, hashed in [
        *((stage, stage_seconds(run, stage), memory[stage], hashed_mb([stage], floors)) for stage in steps),
        (stage_label(WHOLE_RUN), run["wall_s"], memory.get(WHOLE_RUN, {}), hashed_mb(steps, floors)),
    ]:
        if "read_mb" not in moved:
            continue
        floor = floor_s(moved["read_mb"], moved["written_mb"], hashed, floors)
        over = ratio(seconds, floor)
        rows.append(
            [
                label,
                fmt_number(seconds, 2),
                fmt_number(moved["read_mb"]),
                fmt_number(moved["written_mb"]),
                fmt_number(hashed) if hashed else "-",
                fmt_number(floor, 2),
                "-" if over is None else f"{over:,.1f}×",
                "-" if over is None else "yes" if over <= AT_LIMIT else "no",
            ]
        )
    header = ["step", "seconds", "MB read", "MB written", "MB hashed", "floor s", "× floor", f"within {AT_LIMIT:g}×"]
    return markdown_table(header, rows)


def floors_line(floors: dict) -> str:
    return (
        f"Floors measured in this invocation, after its runs, over {floors['measured_mb']:,.0f} MB of the corpus "
        f"file: read {floors['read_mb_s']:,.0f} MB/s (from the page cache), write {floors['write_mb_s']:,.0f} MB/s "
        f"(into the page cache, no fsync), one 64-bit hashing pass {floors['hash_mb_s']:,.0f} MB/s on every core; the "
        f"corpus's bodies are {floors['body_mb']:,.0f} MB. A step's floor is its bytes read and written at those "
        f"rates, plus one hashing pass over the bodies for {', '.join(HASHING_STEPS)}. Bytes are the read() and "
        "write() calls of the run's process tree on any descriptor (files, pipes, the log) while the step ran, "
        "page cache hits included; an interval at a step boundary counts for both steps."
    )


def engines_stages_table(reference: dict, other: dict) -> str:
    """Two runs' steps side by side: seconds and peak private + object store memory of the
    process tree, each with other ÷ reference."""
    first, second = reference["engine"], other["engine"]
    header = [
        "step",
        f"{first} s",
        f"{second} s",
        f"{second} ÷ {first} s",
        f"{first} peak MB",
        f"{second} peak MB",
        f"{second} ÷ {first} MB",
    ]
    stages = stage_names(reference)
    stages += [stage for stage in stage_names(other) if stage not in stages]
    rows = []
    for stage in [*stages, OUTSIDE_STEPS, WHOLE_RUN]:
        seconds = [stage_seconds(run, stage) for run in (reference, other)]
        peaks = [step_memory(run).get(stage, {}).get("private_mb") for run in (reference, other)]
        rows.append(
            [
                stage_label(stage),
                fmt_number(seconds[0], 3),
                fmt_number(seconds[1], 3),
                fmt_ratio(ratio(seconds[1], seconds[0])),
                fmt_number(peaks[0]),
                fmt_number(peaks[1]),
                fmt_ratio(ratio(peaks[1], peaks[0])),
            ]
        )
    return markdown_table(header, rows)


def memory_note(runs: list[dict]) -> str:
    """How the per-stage memory was measured, and what it leaves out."""
    sampled = [run for run in runs if run.get("memory")]
    if not sampled:
        return (
            "No memory was sampled: psutil is not importable (neither installed nor vendored by "
            "an installed Ray); the seconds are Dagster's own."
        )

    def facts(run: dict) -> str:
        memory = run["memory"]
        return (
            f"{run['engine']}: {memory['samples']} samples ({memory['pss_samples']} with PSS), up to "
            f"{memory['max_processes']} processes, sampler CPU {memory['sampler_cpu_s']:.2f} s "
            f"({memory['pss_cpu_s']:.2f} s of it PSS)"
            + (f", PSS unreadable in {memory['pss_fallbacks']} process samples (RSS used)" if memory["pss_fallbacks"] else "")
            + (f", sampling stopped: {memory['error']}" if memory["error"] else "")
        )

    interval = sampled[0]["memory"]["interval_s"]
    return (
        f"Memory: sampled every {interval:g} s by a thread of the benchmark process over the CLI "
        "process and all its descendants (Dagster's log-capture helpers; on engine ray the local "
        "Ray's GCS, raylet, workers, actors and agents, all started under the CLI): "
        + "; ".join(facts(run) for run in sampled)
        + ". Private + object store: every process's anonymous resident memory (RSS less its "
        "file-backed and shared pages) plus the /dev/shm files the tree holds open, once; it leaves "
        "out shared libraries and mapped files; read on every sample. PSS splits each shared page "
        "among the processes that map it, so its sum counts every page once, libraries included; "
        "reading it costs the kernel a page-table walk per process, "
        f"so it is read only while that stays within {PSS_CPU_SHARE:.0%} of one CPU: a step's PSS "
        "peak rests on fewer samples (in brackets), and a short step may have none. The RSS sum "
        "counts shared pages once per process that maps them (the object store's, the libraries'), "
        "so it overstates for Ray. /dev/shm MB: the space allocated to the /dev/shm files the tree "
        "holds open, each once: Ray's object store (raylet's unlinked /dev/shm/plasma file), not "
        "other Rays on the machine; pages the store has written stay allocated, so it shows the "
        "store's high-water mark rather than its live objects. It is inside the private figure; PSS "
        "has only the store's pages that a live process has mapped, so it can be below the private "
        "figure once the workers that wrote objects have exited. A sample counts for "
        "every step that ran since the sample before it, so a step's peak is the highest sample "
        "from the first after its start to the first after its end (a sample at a boundary counts "
        "for both steps, and a spike shorter than the interval can be missed). Not included: the "
        "page cache of the files written and read, processes outside the CLI's tree (a remote Ray "
        "cluster), the benchmark process. Seconds are Dagster's own per step; (outside steps) is "
        "the whole process's wall less the steps: the CLI's start-up, definitions load and "
        "teardown (Ray starts inside the first ray step)."
    )


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


def library_target(library: dict | None, targets: dict, skipped: str | None = None) -> str:
    if not library:
        return f"library core: n/a ({skipped or '--skip-library'})"
    rate = library["core_docs_per_s"]
    targets["library_core_docs_per_s"] = rate
    return (
        f"library core: {rate:,.0f} docs/s (target ≥ {TARGET_LIBRARY_DOCS_PER_S:,}) — "
        f"{verdict(rate >= TARGET_LIBRARY_DOCS_PER_S)}"
    )


def tree_peak_mb(run: dict) -> float | None:
    """The highest sampled memory of the run's process tree: private + object store, or PSS
    sum, whichever is higher; None when unsampled."""
    whole = step_memory(run).get(WHOLE_RUN, {})
    figures = [whole[name] for name in ("private_mb", "pss_mb") if whole.get(name) is not None]
    return max(figures) if figures else None


def run_peak_mb(run: dict) -> tuple[float, str]:
    """The run's peak memory for the target: its ru_maxrss (one process's), or, when its tree's
    sampled memory is higher (engine ray's dozens of processes), that."""
    tree = tree_peak_mb(run)
    if tree is None or tree <= run["peak_rss_mb"]:
        return run["peak_rss_mb"], "RSS"
    return tree, "its whole process tree, sampled"


def rss_target(ours_runs: dict[str, dict], targets: dict) -> str:
    if not ours_runs:
        return "peak RSS: n/a (neither of our runs)"
    name, run = max(ours_runs.items(), key=lambda item: run_peak_mb(item[1])[0])
    peak, kind = run_peak_mb(run)
    targets["peak_rss_mb"] = {"run": name, "value": peak, "kind": kind}
    measure = "" if kind == "RSS" else f", {kind}"
    return (
        f"peak RSS: {peak:,.0f} MB ({name} run{measure}; target ≤ {TARGET_PEAK_RSS_MB:,}) — "
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
    """The recall audit's near-copy interval (pairs with Jaccard < 1) against the planted recall
    of distinct texts, the closest figure (the audit's headline counts exact copies too)."""
    audited = {name: run for name, run in ours_runs.items() if run.get("audit_near_recall") is not None}
    if not audited:
        return None
    parts = []
    for name, run in audited.items():
        planted = run["recall_distinct_texts"]
        inside = planted is not None and run["audit_near_ci_low"] <= planted <= run["audit_near_ci_high"]
        targets.setdefault("recall_audit", {})[name] = {
            "audit_near_copies": [run["audit_near_recall"], run["audit_near_ci_low"], run["audit_near_ci_high"]],
            "audit": [run["audit_recall"], run["audit_ci_low"], run["audit_ci_high"]],
            "planted_distinct_texts": planted,
            "inside": inside,
        }
        parts.append(
            f"{name} {run['audit_near_recall']:.4f} ({run['audit_near_ci_low']:.4f}–"
            f"{run['audit_near_ci_high']:.4f}, {run['audit_near_true_pairs']:,} true pairs with J < 1; every "
            f"pair: {run['audit_recall']:.4f}) vs planted {fmt_number(planted, 4)} over "
            f"{run['planted_distinct_text_pairs']:,} pairs of distinct texts — {verdict(inside)}"
        )
    return (
        "recall audit, near copies (95% interval) contains the planted recall of distinct texts: "
        + "; ".join(parts)
    )


def run_name(run: dict) -> str:
    """Our Dagster run's name in the target lines: Dagster, or Dagster ray."""
    engine = run.get("engine", "duckdb")
    return "Dagster" if engine == "duckdb" else f"Dagster {engine}"


def target_lines(
    ours: dict | None,
    library: dict | None,
    peers: list[dict],
    others: list[dict] | None = None,
    library_skipped: str | None = None,
) -> tuple[list[str], dict]:
    """The target lines of the report and the same facts as a dict for the JSON record."""
    targets: dict = {}
    ours_runs = {run_name(run): run for run in (ours, *(others or [])) if run}
    if library:
        ours_runs["library"] = library
    lines = [
        speedup_target(ours, peers, targets),
        library_target(library, targets, library_skipped),
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
    if record.get("library_skipped") and record["library_skipped"] != "--skip-library":
        print(f"Library run skipped: {record['library_skipped']}.\n")
    dagster_runs = [run for run in (record["dagster"], *record.get("dagster_other_engines", [])) if run]
    if any(run.get("engine", "duckdb") != "duckdb" for run in dagster_runs):
        print(
            "Peak RSS of a ray run above is the CLI's ru_maxrss: the largest single process among it "
            "and the descendants it waited for, not the sum over Ray's processes; the per-stage "
            "table below has the whole tree's.\n"
        )
    if record["dagster"]:
        print("### Dagster run, per asset\n\n" + dagster_steps_table(record["dagster"]) + "\n")
    for run in dagster_runs:
        print(
            f"### Dagster run (engine {run.get('engine', 'duckdb')}), per stage: seconds and peak "
            "memory\n\n" + stages_table(run) + "\n"
        )
        # the bytes of a ray run's tree are mostly Ray's own traffic between its processes
        if record.get("floors") and run.get("engine", "duckdb") == "duckdb" and step_memory(run):
            print(
                f"### Roofline (engine {run.get('engine', 'duckdb')}): each step against its floor\n\n"
                + floors_line(record["floors"]) + "\n\n" + roofline_table(run, record["floors"]) + "\n"
            )
        if run.get("ray_cluster"):
            cluster = run["ray_cluster"]
            print(
                f"### Ray cluster, per node and stage ({len(cluster['nodes'])} local nodes of 1 CPU, "
                f"{cluster['object_store_mb']:,} MB object store each; the Dagster CLI above is the "
                "driver, outside them)\n\n" + nodes_table(run) + "\n"
            )
    if len(dagster_runs) > 1:
        first, *rest = dagster_runs
        for run in rest:
            print(
                f"### Dagster runs per stage, {first['engine']} and {run['engine']} side by side "
                "(peak MB: private + object store, over the process tree)\n\n" + engines_stages_table(first, run) + "\n"
            )
    if dagster_runs:
        print(memory_note(dagster_runs) + "\n")
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
        for run in (record["dagster"], *record.get("dagster_other_engines", []), record["library"])
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
