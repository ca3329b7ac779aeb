"""Memory of a measured child's whole process tree, sampled while it runs and attributed to the
Dagster step running at each sample.

Every SAMPLE_INTERVAL_S a thread of the measuring parent reads what the child's log has grown by
since the last poll (its STEP_START / STEP_SUCCESS ... lines), then sums the memory of the child
and all its descendants (for the ray engine's local Ray: GCS, raylet, its workers and agents) and
of the /dev/shm files they hold open, where Ray's object store lives. A sample counts for every
step that ran at some time since the sample before it, so a step's peak is the highest sample
from the first one after it started to the first one after it ended: a step shorter than the
interval still gets one, a sample at a step boundary counts for both steps, and a spike shorter
than the interval can be missed. Samples while no step runs (the CLI's imports, definitions load, resource start-up and
teardown) go to OUTSIDE_STEPS.

Figures per sample:
- private + object store: every process's anonymous resident memory (``memory_info()``'s rss
  less shared, from /proc/PID/statm: heaps, DuckDB's and Arrow's buffers) added up, plus the
  /dev/shm files the tree holds open, once. It leaves out file-backed pages (shared libraries,
  mapped files). Cheap, so taken on every sample: the headline figure.
- PSS sum: the proportional set size (``memory_full_info().pss``, from /proc/PID/smaps_rollup),
  which splits each shared page among the processes that map it, so the sum counts every page
  once, libraries included. The kernel walks each process's page tables for it, which for
  dozens of Ray processes is costly, so it is taken only while its own CPU time stays within
  PSS_CPU_SHARE of the wall time (every sample for a small tree, fewer for Ray's).
  When a process's PSS cannot be read its RSS stands in (counted in ``pss_fallbacks``).
- RSS sum: the resident set of every process, added up. Pages shared between processes (the
  object store's pages that raylet and workers map, shared libraries) count once per process
  that maps them, so for Ray it overstates.
- /dev/shm held: the space allocated to the /dev/shm files that the tree's processes hold open
  (each file once): Ray's object store (raylet's /dev/shm/plasmaXXXX, unlinked but open, and
  passed to its workers), so other Rays on the machine do not count. Part of the first figure,
  not an addition to it. PSS and RSS have only the store's pages that a live process has mapped
  (tmpfs keeps the rest, which still take memory). Each sample stats every open descriptor of
  every process.

Bytes moved per step: the read() and write() calls' bytes (``io_counters()``' read_chars and
write_chars, /proc/PID/io's rchar and wchar: page cache hits included, which is what the
roofline's floors measure) of the tree's processes on any descriptor (files, pipes, sockets),
summed on every sample. A reaped child's counts pass to its parent, so the sum only drops when a
process leaves the tree unreaped (its bytes stay counted; others' growth in that interval is
missed until the sum passes its earlier high). The growth over the highest earlier sum counts
for every step that ran since the sample before, like the memory figures: a step boundary's
interval counts for both. Ray's nodes joined by address are outside the tree. CPU seconds per
step (user and system, ``cpu_times()``, a reaped child's passing to its parent) are counted the
same way, and so are each joined node's, from its first sample (the cluster ran before the run).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from stat import S_ISREG

import psutil

from .step_log import STARTS, FileTail, LineBuffer, step_events

SAMPLE_INTERVAL_S = 0.2
PSS_CPU_SHARE = 0.03  # of one CPU, averaged over the run, for reading PSS
OUTSIDE_STEPS = "(outside steps)"
WHOLE_RUN = "(whole run)"
SHM = "/dev/shm"
MB = 1024 * 1024

@dataclass(frozen=True)
class Sample:
    """One sample of the process tree (MB) and how many processes it had."""

    private_mb: float  # anonymous memory of every process, plus the /dev/shm files once
    pss_mb: float | None  # None: not read on this sample
    rss_mb: float
    shm_mb: float
    processes: int
    # the Ray nodes of a cluster the run joined: (node, private + object store MB, processes,
    # CPU seconds of those processes so far, None where unreadable)
    nodes: tuple[tuple[str, float, int, float | None], ...] = ()
    # bytes the tree's read() and write() calls have moved so far; None: not readable
    read_bytes: int | None = None
    written_bytes: int | None = None
    # the tree's CPU seconds so far, user and system (reaped children's included); None: not readable
    cpu_seconds: float | None = None


FIGURES = ("private_mb", "pss_mb", "rss_mb", "shm_mb", "processes")


class StepPeaks:
    """Peak figures per step from polls: each poll brings the step events logged since the poll
    before it, then one sample (see the module's docstring for the attribution)."""

    def __init__(self) -> None:
        self.running: list[str] = []
        self.order: list[str] = []
        self.peaks: dict[str, dict] = {}
        self.counted = {"read_bytes": 0, "written_bytes": 0, "cpu_seconds": 0.0}
        # each joined node's CPU seconds so far: the first sample is the baseline (the cluster
        # ran before this run, earlier runs of the invocation included)
        self.node_cpu: dict[str, float] = {}

    def increments(self, sample: Sample) -> dict[str, float]:
        """MB read and written, and CPU seconds, beyond the most any earlier sample had: a sum
        that drops (a process left the tree unreaped) and comes back is not counted twice."""
        moved = {}
        for name, figure, unit in (
            ("read_mb", "read_bytes", MB), ("written_mb", "written_bytes", MB), ("cpu_s", "cpu_seconds", 1)
        ):
            now = getattr(sample, figure)
            if now is not None:
                moved[name] = max(0, now - self.counted[figure]) / unit
                self.counted[figure] = max(self.counted[figure], now)
        return moved

    def poll(self, events: Iterable[tuple[str, str]], sample: Sample | None) -> list[str]:
        """Count ``sample`` for the steps that ran since the poll before; return the steps that
        ended in this poll, whose peaks are now final."""
        active = list(self.running)
        ended = []
        for step, event in events:
            if event in STARTS:
                for names in (self.running, active, self.order):
                    if step not in names:
                        names.append(step)
            elif step in self.running:
                self.running.remove(step)
                ended.append(step)
        if sample is None:
            return ended
        grown, node_cpu = self.increments(sample), self.node_increments(sample)
        for step in [*(active or [OUTSIDE_STEPS]), WHOLE_RUN]:
            peak = self.peaks.setdefault(step, {"samples": 0, "pss_samples": 0})
            peak["samples"] += 1
            for name, amount in grown.items():
                peak[name] = peak.get(name, 0.0) + amount
            peak["pss_samples"] += sample.pss_mb is not None
            for figure in FIGURES:
                value = getattr(sample, figure)
                if value is not None and value > peak.get(figure, float("-inf")):
                    peak[figure] = value
            for node, private_mb, processes, _ in sample.nodes:
                node_peak = peak.setdefault("nodes", {}).setdefault(node, {"private_mb": 0.0, "processes": 0, "cpu_s": 0.0})
                node_peak["private_mb"] = max(node_peak["private_mb"], private_mb)
                node_peak["processes"] = max(node_peak["processes"], processes)
                node_peak["cpu_s"] += node_cpu.get(node, 0.0)
        return ended

    def node_increments(self, sample: Sample) -> dict[str, float]:
        """Each node's CPU seconds beyond the most an earlier sample had (as ``increments``);
        nothing on a node's first readable sample, its baseline."""
        grown = {}
        for node, _, _, cpu_seconds in sample.nodes:
            if cpu_seconds is None:
                continue
            if node in self.node_cpu:
                grown[node] = max(0.0, cpu_seconds - self.node_cpu[node])
            self.node_cpu[node] = max(self.node_cpu.get(node, cpu_seconds), cpu_seconds)
        return grown

    def by_step(self) -> dict[str, dict]:
        """The peaks in the order the steps started, then OUTSIDE_STEPS and WHOLE_RUN."""
        keys = [*self.order, OUTSIDE_STEPS, WHOLE_RUN]
        return {key: self.peaks[key] for key in keys if key in self.peaks}


class ShmFiles:
    """The /dev/shm files a changing set of processes holds open: the allocated size of each
    once. Every descriptor is stat'ed on every sample, as a descriptor number closed and opened
    again between two samples names another file, so no earlier answer about it holds."""

    def __init__(self, folder: str = SHM) -> None:
        try:
            self.device: int | None = os.stat(folder).st_dev
        except OSError:
            self.device = None

    def held_bytes(self, pids: list[int]) -> int:
        if self.device is None:
            return 0
        held: dict[int, int] = {}
        for pid in pids:
            folder = f"/proc/{pid}/fd"
            try:
                names = os.listdir(folder)
            except OSError:
                continue
            for name in names:
                path = f"{folder}/{name}"
                try:
                    stat = os.stat(path)
                    # the device is the cheap test; the path rules out other files of a
                    # /dev/shm that is no mount of its own
                    if stat.st_dev != self.device or not S_ISREG(stat.st_mode):
                        continue
                    if not os.readlink(path).startswith(SHM + "/"):
                        continue
                except OSError:
                    continue
                held[stat.st_ino] = stat.st_blocks * 512
        return sum(held.values())


class TreeSampler:
    """Samples the tree under ``pid`` every ``interval`` seconds on a thread, attributing each
    sample to the steps of the log ``read_log`` returns the growth of."""

    def __init__(
        self,
        pid: int,
        read_log: Callable[[], bytes],
        interval: float = SAMPLE_INTERVAL_S,
        nodes: dict[str, list[int]] | None = None,
        on_step_end: Callable[[str, dict], None] = lambda step, peak: None,
        timeline: bool = False,
    ):
        self.on_step_end = on_step_end
        # (time.time(), private MB) of every sample: the clock Dagster stamps its events with
        self.timeline: list[tuple[float, float]] | None = [] if timeline else None
        self.pid = pid
        self.nodes = nodes or {}
        self.read_log = read_log
        self.interval = interval
        self.lines = LineBuffer()
        self.peaks = StepPeaks()
        self.root = None
        self.samples = 0
        self.pss_samples = 0
        self.pss_fallbacks = 0
        self.max_processes = 0
        self.cpu_s = 0.0
        self.pss_cpu_s = 0.0
        self.error: str | None = None
        self.shm = ShmFiles()
        self.started = time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-sampler", daemon=True)

    def start(self) -> TreeSampler:
        self._thread.start()
        return self

    def stop(self) -> dict:
        """Stop sampling and return the figures (after reading the rest of the log)."""
        self._stop.set()
        self._thread.join()
        self.peaks.poll(step_events(self.lines.feed(self.read_log()) + self.lines.flush()), None)
        return {
            "interval_s": self.interval,
            "samples": self.samples,
            "pss_samples": self.pss_samples,
            "pss_fallbacks": self.pss_fallbacks,
            "max_processes": self.max_processes,
            "sampler_cpu_s": self.cpu_s,
            "pss_cpu_s": self.pss_cpu_s,
            "error": self.error,
            "steps": self.peaks.by_step(),
            **({} if self.timeline is None else {"timeline": self.timeline}),
        }

    def _run(self) -> None:
        while True:
            started = time.thread_time()
            try:
                events = step_events(self.lines.feed(self.read_log()))
                sample = self.sample()
            except Exception as error:  # noqa: BLE001 -- never let sampling break the run
                self.error = f"{type(error).__name__}: {error}"
                return
            for step in self.peaks.poll(events, sample):
                if step in self.peaks.peaks:
                    self.on_step_end(step, self.peaks.peaks[step])
            self.cpu_s += time.thread_time() - started
            if self._stop.wait(self.interval):
                return

    def tree(self) -> list:
        """The child and every descendant now."""
        if self.root is None:
            self.root = psutil.Process(self.pid)
        return [self.root, *self.root.children(recursive=True)]

    def sample(self) -> Sample | None:
        try:
            members = self.tree()
        except psutil.Error:
            return None  # the child has exited
        gone = (psutil.NoSuchProcess, psutil.AccessDenied)
        alive = self.memory_infos(members)
        if not alive:
            return None
        rss = sum(info.rss for _, info in alive)
        anon = sum(info.rss - info.shared for _, info in alive)
        pss = None
        if self.pss_cpu_s <= PSS_CPU_SHARE * (time.perf_counter() - self.started):
            started = time.thread_time()
            pss = 0
            for process, info in alive:
                try:
                    pss += process.memory_full_info().pss
                except gone:
                    pss += info.rss
                    self.pss_fallbacks += 1
            self.pss_cpu_s += time.thread_time() - started
            self.pss_samples += 1
        shm = self.shm.held_bytes([process.pid for process, _ in alive])
        read, written, cpu_seconds = self.counters(process for process, _ in alive)
        self.samples += 1
        if self.timeline is not None:
            self.timeline.append((time.time(), (anon + shm) / MB))
        self.max_processes = max(self.max_processes, len(alive))
        return Sample(
            private_mb=(anon + shm) / MB,
            pss_mb=None if pss is None else pss / MB,
            rss_mb=rss / MB,
            shm_mb=shm / MB,
            processes=len(alive),
            nodes=tuple(self.node_sample(node, roots) for node, roots in self.nodes.items()),
            read_bytes=read,
            written_bytes=written,
            cpu_seconds=cpu_seconds,
        )

    def counters(self, processes: Iterable) -> tuple[int | None, int | None, float | None]:
        """The read() and write() bytes and the user and system CPU seconds of ``processes`` so
        far (their reaped children's included); None where no process's figure can be read."""
        read = written = cpu = None
        for process in processes:
            try:
                moved = process.io_counters()
                read, written = (read or 0) + moved.read_chars, (written or 0) + moved.write_chars
            except (psutil.NoSuchProcess, psutil.AccessDenied, AttributeError):
                pass
            try:
                times = process.cpu_times()
                cpu = (cpu or 0.0) + times.user + times.system + times.children_user + times.children_system
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        return read, written, cpu

    def node_sample(self, node: str, roots: list[int]) -> tuple[str, float, int, float | None]:
        """One Ray node of a cluster the run joined: the anonymous memory of the processes Ray
        started for it and their descendants (its workers), plus the /dev/shm files they hold
        open (its object store), how many processes that is, and their CPU seconds so far."""
        members = {}
        for pid in roots:
            try:
                root = psutil.Process(pid)
                for process in [root, *root.children(recursive=True)]:
                    members[process.pid] = process
            except psutil.Error:
                continue
        alive = self.memory_infos(members.values())
        anon = sum(info.rss - info.shared for _, info in alive)
        _, _, cpu_seconds = self.counters(process for process, _ in alive)
        return node, (anon + self.shm.held_bytes([process.pid for process, _ in alive])) / MB, len(alive), cpu_seconds

    def memory_infos(self, processes: Iterable) -> list[tuple]:
        """(process, memory_info()) of each process still there."""
        alive = []
        for process in processes:
            try:
                alive.append((process, process.memory_info()))
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return alive


def step_line(step: str, peak: dict) -> str:
    """One step's peaks as it ends: the process tree's, and each joined node's."""
    nodes = "".join(f", {node} {figures['private_mb']:,.0f} MB" for node, figures in peak.get("nodes", {}).items())
    return f"[memory] {step} ended: tree {peak.get('private_mb', 0):,.0f} MB{nodes}"


def print_step_line(step: str, peak: dict) -> None:
    # as each step ends, so that a run stopped or killed part way still leaves its figures
    print(step_line(step, peak), file=sys.stderr, flush=True)


def start_sampler(pid: int, log_fd: int, nodes: dict[str, list[int]] | None = None, timeline: bool = False) -> TreeSampler:
    """A running sampler of ``pid``'s tree, its steps read from the log file ``log_fd``, and of
    the trees of ``nodes``' processes, per node, which prints each step's peaks as it ends."""
    return TreeSampler(pid, FileTail(log_fd).read, nodes=nodes, on_step_end=print_step_line, timeline=timeline).start()
