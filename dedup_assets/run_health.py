"""Runs whose process died (killed, or out of memory) are marked failed, so the run history
tells the truth instead of showing them started forever.

Dagster's own run monitoring cannot see this here: the default run launcher offers no health
check, and runs made in a process of our own (``python -m dedup_assets.run``) have no launcher
at all. A run's process is known from the ``dedup/pid`` tag our runner sets, or from the
engine event in which a run worker says which process it is.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from dagster import (
    DagsterEventType,
    DagsterInstance,
    DagsterRunStatus,
    DefaultSensorStatus,
    RunsFilter,
    SensorEvaluationContext,
    SkipReason,
    sensor,
)

PID_TAG = "dedup/pid"
HOST_TAG = "dedup/host"


def process_tags() -> dict[str, str]:
    """Tags naming this process, for a run executed in it."""
    return {PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()}


def _run_pid(instance: DagsterInstance, run) -> int | None:
    if PID_TAG in run.tags:
        return int(run.tags[PID_TAG]) if run.tags.get(HOST_TAG) == socket.gethostname() else None
    for entry in instance.all_logs(run.run_id, of_type=DagsterEventType.ENGINE_EVENT):
        pid = entry.dagster_event.engine_event_data.metadata.get("pid")
        if pid is not None:
            return int(pid.value)
    return None


def _alive(pid: int, since: float) -> bool:
    """Whether ``pid`` is a process that started no later than ``since`` (a process id is
    reused once its process is gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    if not stat.exists():
        return True
    ticks = int(stat.read_text().rsplit(")", 1)[1].split()[19])
    boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime"))
    return boot + ticks / os.sysconf("SC_CLK_TCK") <= since + 1


def fail_dead_runs(instance: DagsterInstance) -> list[str]:
    """Mark every started run whose process is gone as failed; one line per run marked."""
    marked = []
    for record in instance.get_run_records(RunsFilter(statuses=[DagsterRunStatus.STARTED])):
        run = record.dagster_run
        pid = _run_pid(instance, run)
        since = record.start_time or record.create_timestamp.timestamp()
        if pid is None or _alive(pid, since):
            continue
        instance.report_run_failed(
            run,
            f"The run's process ({pid}) is gone: it was killed or ran out of memory. The steps it "
            "finished are kept; run it again to finish the rest.",
        )
        marked.append(f"run {run.run_id}: its process ({pid}) is gone; marked failed")
    return marked


@sensor(
    default_status=DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=30,
    description="Marks a run failed when its process has died (killed, or out of memory), so the "
    "run history never shows a dead run as started.",
)
def dead_runs(context: SensorEvaluationContext) -> SkipReason:
    marked = fail_dead_runs(context.instance)
    return SkipReason("; ".join(marked) or "every started run's process is alive")
