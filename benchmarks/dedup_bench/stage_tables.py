"""The Dagster runs' tables per stage: seconds and the process tree's peak memory, a Ray
cluster's nodes, two engines side by side, each step against its floor (roofline), and how the
memory was measured."""

from __future__ import annotations

from .markdown import fmt_number, fmt_ratio, markdown_table, ratio
from .memory import OUTSIDE_STEPS, PSS_CPU_SHARE, WHOLE_RUN
from .roofline import AT_LIMIT, HASHING_STEPS, floor_s, hashed_mb


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
                fmt_number(moved.get("cpu_s"), 1),
                busy(moved, seconds),
                fmt_number(moved["read_mb"]),
                fmt_number(moved["written_mb"]),
                fmt_number(hashed) if hashed else "-",
                fmt_number(floor, 2),
                "-" if over is None else f"{over:,.1f}×",
                "-" if over is None else "yes" if over <= AT_LIMIT else "no",
            ]
        )
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
