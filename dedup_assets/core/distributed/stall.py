"""No ray step waits forever: a Ray Data execution callback that fails an execution which has made
no progress for ``stall_timeout_s``, with what it waits for.

Ray Data's own guard (``DataContext.execution_no_progress_timeout_s``) leaves out every execution
with a join or grouping, which are where a cluster of small nodes stalls: tasks that hold the
CPUs wait for outputs to be taken by an operator whose tasks wait for a CPU. This one watches
every operator, from the execution's own loop (``custom_execution_callback_classes``), so the
error reaches the step that consumes the dataset. The Daft queries of the candidates,
verification and the components' rounds (``ray_candidates.py``, ``ray_verify.py``,
``components.py``) are not Ray Data executions, and not watched (docs/scale-out.md).
"""

from __future__ import annotations

import time

import ray
import ray.data
from ray.data._internal.execution.execution_callback import ExecutionCallback

from ..util.errors import DedupError

TIMEOUT_KEY = "dedup_stall_timeout_s"  # in the DataContext's key-value config


class RayStalled(DedupError, RuntimeError):
    """A ray step made no progress for the engine resource's stall_timeout_s."""


def watch_stalls(timeout_s: float) -> None:
    """Fail any Ray Data execution of this process that makes no progress for ``timeout_s``
    seconds (0: never)."""
    context = ray.data.DataContext.get_current()
    context.set_config(TIMEOUT_KEY, timeout_s)
    if StallWatch not in context.custom_execution_callback_classes:
        context.custom_execution_callback_classes.append(StallWatch)


def _progress(executor) -> tuple:
    """What changes while any operator moves: outputs taken, tasks finished, inputs received,
    blocks in the queues, operators done."""
    return tuple(
        (
            op.metrics.num_outputs_taken,
            op.metrics.num_tasks_finished,
            op.metrics.num_inputs_received,
            state.total_enqueued_input_blocks(),
            state.total_enqueued_output_blocks(),
            op.has_completed(),
        )
        for op, state in executor._topology.items()
    )


def _cpus(resources) -> str:
    return f"{resources.cpu:g} CPU"


def _actors_holding_cpus() -> list[str]:
    """The live actors that hold CPUs, by class, from the GCS's actor table (Ray's state API
    needs the dashboard, which a run's Ray is started without)."""
    from ray._private import state
    from ray.core.generated import gcs_pb2

    held: dict[str, float] = {}
    for raw in state.state._connect_and_get_accessor().get_actor_table(None, "ALIVE"):
        actor = gcs_pb2.ActorTableData.FromString(raw)
        cpus = actor.required_resources.get("CPU", 0)
        if cpus:
            held[actor.class_name] = held.get(actor.class_name, 0) + cpus
    return [f"{name} ({cpus:g} CPU)" for name, cpus in sorted(held.items())]


def stall_message(executor, waited_s: float, timeout_s: float) -> str:
    """Which operators wait, what they hold and want, and what the cluster has free."""
    manager = executor._resource_manager
    running = [op for op in executor._topology if not op.has_completed()]
    lines = [
        f"Ray Data made no progress for {waited_s:.0f} s (the engine resource's stall_timeout_s is "
        f"{timeout_s:g}): no task finished and no block moved between operators."
    ]
    for op in running:
        state = executor._topology[op]
        lines.append(
            f"  - {op.name}: {op.num_active_tasks()} task(s) started or waiting to, counted as "
            f"{_cpus(manager.get_op_usage(op))}; "
            f"a new task needs {_cpus(op.incremental_resource_usage())}; "
            f"{state.total_enqueued_input_blocks()} block(s) waiting to go in, "
            f"{state.total_enqueued_output_blocks()} waiting to be taken"
        )
    free, total = ray.available_resources().get("CPU", 0), ray.cluster_resources().get("CPU", 0)
    if 0 < total <= free:  # no task waits for a CPU: a started one waits on objects
        used, limit = manager.get_global_usage().object_store_memory, manager.get_global_limits().object_store_memory
        lines.append(
            f"Every CPU of the cluster ({total:g}) is free, so no task waits for one: the started tasks wait "
            "on objects (their inputs, fetched from other nodes or restored from spill, or a result they "
            f"asked for); this execution's blocks take {used / 2**20:,.0f} MB of the {limit / 2**20:,.0f} MB "
            "of object store it may use. Give the nodes more object store memory, or raise the engine "
            "resource's shuffle_partitions (smaller blocks); if a task is just slow, raise stall_timeout_s "
            "(0 turns this off)."
        )
        return "\n".join(lines)
    actors = _actors_holding_cpus()
    lines.append(
        f"The cluster has {free:g} of {total:g} CPUs free"
        + (f"; actors holding CPUs: {', '.join(actors)}" if actors else "")
        + ". Tasks wait for CPUs that other tasks and actors hold. Give the nodes more CPUs "
        "(at least 2 each), free the CPUs other jobs hold, or lower the engine resource's "
        "shuffle_partitions; if a task is just slow, raise stall_timeout_s (0 turns this off)."
    )
    return "\n".join(lines)


class StallWatch(ExecutionCallback):
    """Raises ``RayStalled`` in the execution's loop once its progress has not changed for the
    DataContext's ``TIMEOUT_KEY`` seconds."""

    def before_execution_starts(self, executor) -> None:
        self._timeout_s = float(executor._data_context.get_config(TIMEOUT_KEY, 0) or 0)
        self._last, self._since = None, time.monotonic()

    def on_execution_step(self, executor) -> None:
        if self._timeout_s <= 0:
            return
        now, progress = time.monotonic(), _progress(executor)
        if progress != self._last:
            self._last, self._since = progress, now
        elif now - self._since >= self._timeout_s:
            raise RayStalled(stall_message(executor, now - self._since, self._timeout_s))
