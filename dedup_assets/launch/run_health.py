"""Runs whose process died (killed, or out of memory) are marked failed, so the run history
tells the truth instead of showing them started forever.

Dagster's own run monitoring cannot see this here: the default run launcher offers no health
check, and runs made in a process of our own (``dedup run``) have no launcher at all. A run's
process is known from the ``dedup/process`` tag our runner sets (run id, host and pid: a
re-executed run inherits its parent's tags, and must not be judged by the parent's process), or,
for a run the UI launched on this machine's instance, from the engine event in which its run
worker says which process it is.
"""

from __future__ import annotations

import os
import socket
import uuid

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

from .processes import alive

PROCESS_TAG = "dedup/process"


def new_run() -> tuple[str, dict[str, str]]:
    """A run id, and the tags that tie that run to this process."""
    run_id = str(uuid.uuid4())
    return run_id, {PROCESS_TAG: f"{run_id} {socket.gethostname()} {os.getpid()}"}


def _local_storage(instance: DagsterInstance) -> bool:
    # a SQLite run storage is a file on this machine, so its run workers ran here too
    return type(instance.run_storage).__name__.startswith("Sqlite")


def _run_pid(instance: DagsterInstance, run) -> int | None:
    """The process of a run on this machine; None when it cannot be known."""
    if PROCESS_TAG in run.tags:
        run_id, host, pid = run.tags[PROCESS_TAG].split()
        return int(pid) if (run_id, host) == (run.run_id, socket.gethostname()) else None
    if not _local_storage(instance):
        return None
    pids = [
        entry.dagster_event.engine_event_data.metadata["pid"].value
        for entry in instance.all_logs(run.run_id, of_type=DagsterEventType.ENGINE_EVENT)
        if "pid" in entry.dagster_event.engine_event_data.metadata
    ]
    return int(pids[-1]) if pids else None  # a resumed run worker says so again


def fail_dead_runs(instance: DagsterInstance) -> list[str]:
    """Mark every started run whose process is gone as failed; one line per run marked."""
    marked = []
    for record in instance.get_run_records(RunsFilter(statuses=[DagsterRunStatus.STARTED])):
        run = record.dagster_run
        pid = _run_pid(instance, run)
        since = record.start_time or record.create_timestamp.timestamp()
        if pid is None or alive(pid, since):
            continue
        # it may have ended well since the list was read
        if instance.get_run_by_id(run.run_id).status != DagsterRunStatus.STARTED:
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
