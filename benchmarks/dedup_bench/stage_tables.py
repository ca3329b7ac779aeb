"""The Dagster runs' tables per stage: seconds and the process tree's peak memory, a Ray
cluster's nodes, two engines side by side, each step against its floor (roofline), and how the
memory was measured."""

from __future__ import annotations

from .markdown import fmt_number, fmt_ratio, markdown_table, number, ratio, records_table
from .memory import OUTSIDE_STEPS, PSS_CPU_SHARE, WHOLE_RUN
from .roofline import AT_LIMIT, HASHING_STEPS, floor_s, hashed_mb


def step_memory(run: dict) -> dict[str, dict]:
    """The run's sampled peaks per step (and OUTSIDE_STEPS, WHOLE_RUN); empty when unsampled."""
    return (run.get("memory") or {}).get("steps", {})


def stage_names(run: dict) -> list[str]:
    """The run's steps in the order they started, then any with a time but no sample."""
    sampled = [step for step in step_memory(run) if step not in (OUTSIDE_STEPS, WHOLE_RUN)]
    return sampled + [step for step in run["steps"] if step not in sampled]


def stage_seconds(run: dict, stage: str) -> float | None:
    """A step's seconds; outside the steps, the whole process's wall less its steps (the CLI's
    start-up and definitions load, resource start-up and teardown, Dagster's bookkeeping)."""
    if stage == OUTSIDE_STEPS:
        return run["wall_s"] - sum(run["steps"].values())
    return run["wall_s"] if stage == WHOLE_RUN else run["steps"].get(stage)


def stage_records(run: dict, stages: list[str] | None = None) -> list[dict]:
    """Per step (by default the run's), then outside the steps and the whole process: its label,
    seconds and sampled peaks."""
    memory = step_memory(run)
    return [
        {**memory.get(stage, {}), "step": "**whole process**" if stage == WHOLE_RUN else stage,
         "seconds": stage_seconds(run, stage)}
        for stage in [*(stage_names(run) if stages is None else stages), OUTSIDE_STEPS, WHOLE_RUN]
    ]


STAGE_COLUMNS = {
    "step": ("step", str),
    "seconds": ("seconds", number(3)),
    "peak MB (private + object store)": ("private_mb", number()),
    "peak MB (PSS sum)": ("pss_mb", number()),
    "peak MB (RSS sum)": ("rss_mb", number()),
    "/dev/shm MB": ("shm_mb", number()),
    "processes": ("processes", number()),
    "samples (with PSS)": ("sampled", str),  # how many samples the peaks rest on, how many read PSS
}


def stages_table(run: dict) -> str:
    """Per step: Dagster's seconds and the peak memory of the run's process tree while it ran."""
    records = stage_records(run)
    for record in records:
        record["sampled"] = f"{record.get('samples', 0)} ({record.get('pss_samples', 0)})"
    return records_table(STAGE_COLUMNS, records)


def nodes_table(run: dict) -> str:
    """Per step, on a cluster the run joined: each Ray node's peak memory (private + object
    store, over the processes Ray started for it and their workers) and processes."""
    nodes = list(run["ray_cluster"]["nodes"])
    rows = []
    for record in stage_records(run):
        peaks = record.get("nodes", {})
        cells = [
            f"{fmt_number(peaks[node]['private_mb'])} ({peaks[node]['processes']})" if node in peaks else "-"
            for node in nodes
        ]
        rows.append([record["step"], fmt_number(record["seconds"], 3), *cells])
    return markdown_table(["step", "seconds", *(f"{node}: peak MB (processes)" for node in nodes)], rows)


# a step shorter than this many samples is mostly its boundary intervals, which count for the
# steps on both sides: its CPU seconds over its own seconds would mislead
BUSY_SAMPLES = 5


def busy(figures: dict, seconds: float) -> str:
    """The CPUs a step kept busy: its CPU seconds over its seconds, for a step sampled often enough."""
    if figures.get("cpu_s") is None or not seconds or figures.get("samples", 0) < BUSY_SAMPLES:
        return "-"
    return f"{figures['cpu_s'] / seconds:.2f}"


def roofline_table(run: dict, floors: dict) -> str:
    """Per step: seconds, its process tree's CPU seconds and how many CPUs that kept busy (for a
    step of :data:`BUSY_SAMPLES` samples or more), the bytes it read and wrote, the body bytes it hashes,
    its floor at this invocation's measured rates (``roofline.py``) and its time over that
    floor; the whole process's row is its own bytes (start-up and teardown included) and the
    bodies hashed by all its steps."""
    memory = step_memory(run)
    steps = [stage for stage in stage_names(run) if "read_mb" in memory.get(stage, {})]
    rows = []
    for label, seconds, moved, hashed in [
        *((stage, stage_seconds(run, stage), memory[stage], hashed_mb([stage], floors)) for stage in steps),
        ("**whole process**", run["wall_s"], memory.get(WHOLE_RUN, {}), hashed_mb(steps, floors)),
    ]:
        if "read_mb" not in moved:
            continue
        floor = floor_s(moved["read_mb"], moved["written_mb"], hashed, floors)
        over = ratio(seconds, floor)
        rows.append([
            label, fmt_number(seconds, 2), fmt_number(moved.get("cpu_s"), 1), busy(moved, seconds),
            fmt_number(moved["read_mb"]), fmt_number(moved["written_mb"]), fmt_number(hashed) if hashed else "-",
            fmt_number(floor, 2), "-" if over is None else f"{over:,.1f}×",
            "-" if over is None else "yes" if over <= AT_LIMIT else "no",
        ])
    header = ["step", "seconds", "CPU s", "CPUs busy", "MB read", "MB written", "MB hashed", "floor s", "× floor", f"within {AT_LIMIT:g}×"]
    return markdown_table(header, rows)


def floors_line(floors: dict) -> str:
    return (
        f"Floors measured in this invocation, after its runs, over {floors['measured_mb']:,.0f} MB of the corpus "
        f"file: read {floors['read_mb_s']:,.0f} MB/s (from the page cache), write {floors['write_mb_s']:,.0f} MB/s "
        f"(into the page cache, no fsync), one 64-bit hashing pass {floors['hash_mb_s']:,.0f} MB/s on every core; the "
        f"corpus's bodies are {floors['body_mb']:,.0f} MB. A step's floor is its bytes read and written at those "
        f"rates, plus one hashing pass over the bodies for {', '.join(HASHING_STEPS)}. Bytes are the read() and "
        "write() calls of the run's process tree on any descriptor (files, pipes, the log) while the step ran, "
        "page cache hits included; CPU seconds (user + sys) are the tree's too. An interval at a step boundary counts for "
        f"both steps, so CPUs busy (CPU s over seconds) is given for steps of {BUSY_SAMPLES} samples or more."
    )


def engines_stages_table(reference: dict, other: dict) -> str:
    """Two runs' steps side by side: seconds and peak private + object store memory of the
    process tree, each with other ÷ reference."""
    first, second = reference["engine"], other["engine"]
    header = ["step", f"{first} s", f"{second} s", f"{second} ÷ {first} s", f"{first} peak MB", f"{second} peak MB", f"{second} ÷ {first} MB"]
    stages = stage_names(reference)
    stages += [stage for stage in stage_names(other) if stage not in stages]
    rows = []
    for first, second in zip(stage_records(reference, stages), stage_records(other, stages)):
        seconds, peaks = (first["seconds"], second["seconds"]), (first.get("private_mb"), second.get("private_mb"))
        rows.append([
            first["step"], *(fmt_number(value, 3) for value in seconds), fmt_ratio(ratio(seconds[1], seconds[0])),
            *map(fmt_number, peaks), fmt_ratio(ratio(peaks[1], peaks[0])),
        ])
    return markdown_table(header, rows)


def memory_note(runs: list[dict]) -> str:
    """How the per-stage memory was measured, and what it leaves out."""
    sampled = [run for run in runs if run.get("memory")]
    if not sampled:
        return "Memory: no run was sampled."

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
    # what each figure counts and leaves out is written once, in memory.py's docstring
    return (
        f"Memory: sampled every {interval:g} s by a thread of the benchmark process over the CLI "
        "process and all its descendants (on engine ray the local Ray's processes too): "
        + "; ".join(facts(run) for run in sampled)
        + ". Private + object store: anonymous memory of every process plus the /dev/shm files the "
        f"tree holds open, once; PSS is read while it costs within {PSS_CPU_SHARE:.0%} of one CPU, so "
        "a step's PSS peak rests on fewer samples (in brackets); the RSS sum counts shared pages once "
        "per process, so it overstates for Ray. A sample counts for every step that ran since the "
        "sample before it. Not included: the page cache, processes outside the CLI's tree, the "
        "benchmark process. (outside steps) is the whole process's wall less Dagster's step seconds. "
        "How each figure is read: dedup_bench/memory.py."
    )
