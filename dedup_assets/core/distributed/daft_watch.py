"""No Daft step waits forever (issue 51): a watcher beside each ray step that, once a Daft query
has run for the engine resource's ``stall_timeout_s`` without a task of this Ray job finishing,
ends the query and fails the step with what it waits for.

Daft's subscribers on its Ray runner say when a query starts and ends, not how far it got, and
Ray's state API needs the dashboard, which a run's Ray is started without. So progress is read
from the raylets (each worker's count of executed tasks, as ``ray memory`` reads it) and what
waits from the GCS (the resource demand queued on each node, the actors that hold CPUs). The
query ends by killing Daft's scheduler actor; the next query starts a new one.

Daft's per-node actors ask Ray for no CPU while they run, so actors of another job holding every
CPU do not stop a plain query; what waits is a Ray task of Daft's own (the sample boundaries of
a sort want a CPU). A node lost mid-step: Daft reran the lost tasks on the node left, in every
trial (docs/scale-out.md); should a query then stall, the message names the lost node.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import wraps

import ray

from ..pipeline.step_assets import ONE_SHOT_STEP_ASSETS, rerun_from
from ..util.errors import DedupError

_timeout_s = 300.0  # the engine resource's stall_timeout_s, set by watch_daft
_assets = ONE_SHOT_STEP_ASSETS  # the assets whose steps call the engine's, by call: set by watch_daft


class RayStalled(DedupError, RuntimeError):
    """A ray step made no progress for the engine resource's stall_timeout_s."""


class RayNodeLost(DedupError, RuntimeError):
    """A ray step failed after a node it started with left the cluster."""


def watch_daft(timeout_s: float, assets: dict[str, str] = ONE_SHOT_STEP_ASSETS) -> None:
    """Stall timeout of the steps of this process (0: never), and the assets whose steps make
    its engine calls where they are not the calls' names (``pipeline/step_assets.py``)."""
    global _timeout_s, _assets
    _timeout_s, _assets = float(timeout_s), assets


def watched_steps(engine_class: type) -> type:
    """``engine_class`` with each public method (a step) run under ``watched``."""
    for name, method in list(vars(engine_class).items()):
        if callable(method) and not name.startswith("_"):
            setattr(engine_class, name, _watched_method(method, name))
    return engine_class


def _watched_method(method, name: str):
    @wraps(method)
    def step(*args, **kwargs):
        with watched(_assets.get(name, name), _timeout_s):
            return method(*args, **kwargs)

    return step


class _Queries:
    """The Daft queries running in this process, from Daft's subscriber API."""

    def __init__(self) -> None:
        from daft.subscribers.abc import Subscriber

        queries = self

        class Running(Subscriber):
            def on_query_started(self, event) -> None:
                queries.started(event.query_id)

            def on_query_finished(self, event) -> None:
                queries.running.discard(event.query_id)

        self.running: set[str] = set()
        self.last_start = time.monotonic()
        self.subscriber = Running()

    def started(self, query_id: str) -> None:
        self.running.add(query_id)
        self.last_start = time.monotonic()


class _Watcher(threading.Thread):
    def __init__(self, asset: str, timeout_s: float, queries: _Queries) -> None:
        super().__init__(name=f"daft-watch-{asset}", daemon=True)
        self.asset, self.timeout_s, self.queries = asset, timeout_s, queries
        self.job = ray.get_runtime_context().get_job_id()
        self.nodes = _alive_nodes()  # at the step's start: one that dies is named
        self.done = threading.Event()
        self.verdict: str | None = None

    def run(self) -> None:
        poll_s = min(5.0, max(0.5, self.timeout_s / 10))
        last, since = None, time.monotonic()
        while not self.done.wait(poll_s):
            if not self.queries.running:  # the step's own work on this node
                last, since = None, time.monotonic()
                continue
            try:
                progress = _finished_tasks(self.job)
            except Exception:  # a node going away mid-read: read again at the next poll
                continue
            now = time.monotonic()
            if progress != last or self.queries.last_start > since:
                last, since = progress, now
            elif now - since >= self.timeout_s:
                # what it waits for is read while it waits; a cluster that cannot say must not keep
                # the query from being ended, nor end this thread before it is
                try:
                    verdict = stall_message(self.asset, now - since, self.timeout_s, self.nodes)
                except Exception as error:
                    verdict = (
                        f"{self.asset}: a Daft query made no progress for {now - since:.0f} s (the engine "
                        f"resource's stall_timeout_s is {self.timeout_s:g}). The query was ended. What it waited "
                        f"for could not be read from the cluster: {error}. " + _advice(self.asset)
                    )
                self.verdict = verdict  # before the query ends: the step reads it when its wait raises
                try:
                    _end_daft_query()
                except Exception as error:
                    self.verdict = f"{verdict}\n(Ending the query failed: {error}.)"
                return


@contextmanager
def watched(asset: str, timeout_s: float) -> Iterator[None]:
    """Fail the Daft queries inside with ``RayStalled`` once one has run ``timeout_s`` seconds
    (0: never) without a task of this Ray job finishing; ``asset`` is the step's: the error
    selects it and the assets after it to run again (``DedupError.select``), which the launch
    layer writes as the command the user ran."""
    if timeout_s <= 0:
        yield
        return
    import daft

    queries = _Queries()
    alias = f"dedup-watch-{id(queries)}"
    watcher = _Watcher(asset, timeout_s, queries)
    daft.context.get_context().attach_subscriber(alias, queries.subscriber)
    try:
        watcher.start()
        try:
            yield
        except DedupError:
            raise
        except Exception as error:
            if watcher.verdict is not None:
                raise RayStalled(watcher.verdict, select=rerun_from(asset)) from error
            lost = _lost(watcher.nodes)
            if lost:  # Daft reruns a lost node's tasks on the others; when that fails, say which and what to do
                raise RayNodeLost(f"{asset} failed: {error}\n{_lost_advice(lost, asset)}", select=rerun_from(asset)) from error
            raise
        finally:
            watcher.done.set()
            watcher.join()
            if watcher.verdict is not None:  # also when the query ended on its own as it was killed
                _new_daft_scheduler()
    finally:
        daft.context.get_context().detach_subscriber(alias)


def _alive_nodes() -> dict[str, str]:
    """Node id: address of each live node."""
    return {n["NodeID"]: f"{n['NodeManagerAddress']}:{n['NodeManagerPort']}" for n in ray.nodes() if n["Alive"]}


def _finished_tasks(job: str) -> tuple:
    """Each live worker of ``job`` and how many tasks it executed (Daft's plans run as tasks of
    its per-node actors; a worker that starts or dies changes this too)."""
    from ray._private.internal_api import node_stats

    counts = []
    for node in ray.nodes():
        if node["Alive"]:
            stats = node_stats(node["NodeManagerAddress"], node["NodeManagerPort"], include_memory_info=False)
            counts += [
                (worker.worker_id, worker.num_executed_tasks)
                for worker in stats.core_workers_stats
                if worker.job_id.hex() == job
            ]
    return tuple(sorted(counts))


def _waiting() -> list[str]:
    """The resource shapes that tasks and actors wait for, over the cluster, from the GCS."""
    from ray._private import state
    from ray.core.generated import gcs_pb2

    usage = gcs_pb2.ResourceUsageBatchData.FromString(state.state._connect_and_get_accessor().get_all_resource_usage())
    waiting = []
    for demand in usage.resource_load_by_shape.resource_demands:
        queued = demand.num_ready_requests_queued + demand.num_infeasible_requests_queued + demand.backlog_size
        if queued:
            shape = ", ".join(f"{amount:g} {name}" for name, amount in sorted(demand.shape.items()))
            infeasible = " (no node has that much)" if demand.num_infeasible_requests_queued else ""
            waiting.append(f"{queued} task(s) or actor(s) each wanting {shape or 'nothing'}{infeasible}")
    return waiting


def _actors_holding_cpus() -> list[str]:
    """The live actors that hold CPUs, by class, from the GCS's actor table."""
    from ray._private import state
    from ray.core.generated import gcs_pb2

    held: dict[str, float] = {}
    for raw in state.state._connect_and_get_accessor().get_actor_table(None, "ALIVE"):
        actor = gcs_pb2.ActorTableData.FromString(raw)
        cpus = actor.required_resources.get("CPU", 0)
        name = actor.class_name.rsplit(".", 1)[-1]  # a class defined in a function: its own name
        if cpus:
            held[name] = held.get(name, 0) + cpus
    return [f"{name} ({cpus:g} CPU)" for name, cpus in sorted(held.items())]


def stall_message(asset: str, waited_s: float, timeout_s: float, nodes: dict[str, str]) -> str:
    """What the step waits for, what holds the cluster's CPUs, which nodes it lost, and what to do."""
    free, total = ray.available_resources().get("CPU", 0), ray.cluster_resources().get("CPU", 0)
    lost = _lost(nodes)
    waiting, actors = _waiting(), _actors_holding_cpus()
    lines = [
        f"{asset}: a Daft query made no progress for {waited_s:.0f} s (the engine resource's "
        f"stall_timeout_s is {timeout_s:g}): no task of this run finished. The query was ended."
    ]
    lines.append(
        ("Waiting for resources: " + "; ".join(waiting) + "." if waiting else "Nothing waits for resources: "
         "the running tasks are slow or blocked.")
        + f" The cluster has {free:g} of {total:g} CPUs free"
        + (f"; actors holding CPUs: {', '.join(actors)}" if actors else "")
        + "."
    )
    if lost:
        lines.append(_lost_advice(lost, asset))
    lines.append(_advice(asset))
    return "\n".join(lines)


def _advice(asset: str) -> str:
    return (
        "Give the nodes more CPUs (at least 2 each), or free the CPUs other jobs hold; if a task is "
        "just slow, raise stall_timeout_s (0 turns this off). Then " + _again(asset)
    )


def _lost(nodes: dict[str, str]) -> list[str]:
    try:
        alive = _alive_nodes()
    except Exception:  # the cluster cannot say: the step's own error stands
        return []
    return [f"{address} (node {node_id[:12]})" for node_id, address in nodes.items() if node_id not in alive]


def _lost_advice(lost: list[str], asset: str) -> str:
    return (
        f"Lost since the step started: {', '.join(lost)}. Bring the node back, or point "
        "DEDUP_RAY_ADDRESS (or the engine resource's address) at a cluster that has it, and " + _again(asset)
    )


def _again(asset: str) -> str:
    # the steps before it are stored: only this one and those after it run again, with the
    # settings of the run that failed; the command is the launch layer's, for the one the user ran
    return f"run {asset} and the steps after it again, with the same settings."


def _end_daft_query() -> None:
    """Kill Daft's scheduler actor of this job (its per-node actors die with it): the query's
    wait in this process raises."""
    from daft.runners.flotilla import FLOTILLA_RUNNER_NAMESPACE, get_flotilla_runner_actor_name

    try:
        ray.kill(ray.get_actor(get_flotilla_runner_actor_name(), namespace=FLOTILLA_RUNNER_NAMESPACE), no_restart=True)
    except ValueError:  # none started yet
        pass


def _new_daft_scheduler(wait_s: float = 30.0) -> None:
    """Let the next query start a scheduler: Daft reuses one by name, so wait until the killed
    one's name is free."""
    import daft
    from daft.runners.flotilla import FLOTILLA_RUNNER_NAMESPACE, get_flotilla_runner_actor_name

    daft.set_runner_ray(noop_if_initialized=True).flotilla_plan_runner = None
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            ray.get_actor(get_flotilla_runner_actor_name(), namespace=FLOTILLA_RUNNER_NAMESPACE)
        except ValueError:
            return
        time.sleep(0.2)
