"""The Ray session a run's steps execute in, and the settings of Daft (its Ray runner) for them.

Without an address a local Ray is started for the run (``address="local"``: never a cluster
that happens to be running on the machine) and stopped at its end. With one (``ray://...``,
``auto``, or ``host:port`` of a ``ray up`` or KubeRay head), the run joins that cluster and
leaves it running. A session already open in this process (a test's cluster) is used as is.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import ray

from ..util.errors import DedupError

LOCAL_SYSTEM_CONFIG = {
    "idle_worker_killing_time_threshold_ms": 600_000,
    # Ray refuses to spill once the disk under its temp folder is 95% used: on a shared 252 GB disk
    # that is 12 GB still free, and a run of two one-CPU test nodes failed so (CI, stop 58)
    "local_fs_capacity_threshold": 0.99,
}


class RayUnavailable(DedupError, RuntimeError):
    """Ray could not be started or reached."""


# the Ray session Daft's runner last ran on (this driver's node and job): see _use_daft
_daft_session: tuple[str, str] | None = None


def _use_daft() -> None:
    """Daft on this process's Ray session. Daft sets its runner once per process, and its Ray
    runner keeps the scheduler actor it starts for its first query (``flotilla_plan_runner``): a
    handle that dies with the session. A later session in the same process (a test's cluster
    after a run's own local Ray stopped) gets a scheduler of its own, started at its first query."""
    global _daft_session
    import daft

    runner = daft.set_runner_ray(noop_if_initialized=True)  # the runner already set, if any
    if runner.name != "ray":
        raise RayUnavailable(
            f"Daft's runner in this process is {runner.name!r}, and Daft lets a process set it once: "
            "the ray engine needs its Ray runner. Run the pipeline in a process that does not use "
            "Daft otherwise (or calls daft.set_runner_ray())."
        )
    # a new local Ray is a new node; joining a cluster again, a new job
    context = ray.get_runtime_context()
    session = (context.get_node_id(), context.get_job_id())
    if session != _daft_session:
        runner.flotilla_plan_runner = None
        _daft_session = session


def cluster_cpus() -> int:
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def cluster_object_store() -> int:
    """Bytes of object store memory over the cluster's nodes."""
    return int(ray.cluster_resources().get("object_store_memory", 0))


# Daft's own number of partitions of a grouping (its ExecutionConfig's default)
DAFT_GROUPING_PARTITIONS = 200


def use_shuffle(disk: bool, partitions: int) -> None:
    """Daft's joins and groupings through files on each node's disk (its flight shuffle), or
    through Ray's object store as Daft chooses; its groupings into ``partitions`` (0: Daft's
    own number). Set on every run: the settings are the process's, read with each query's plan."""
    import daft

    daft.set_execution_config(
        shuffle_algorithm="flight_shuffle" if disk else "auto",
        shuffle_aggregation_default_partitions=partitions or DAFT_GROUPING_PARTITIONS,
    )


@contextmanager
def ray_session(address: str | None) -> Iterator[None]:
    """Ray for the steps inside; started (and stopped after) unless one is open already."""
    if ray.is_initialized():
        _use_daft()
        yield
        return
    try:
        ray.init(
            address=address or "local",
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
            # a local Ray keeps idle workers for the run: joins and groupings start their own,
            # and one started again for every step costs more than the step on a small corpus
            _system_config=None if address else LOCAL_SYSTEM_CONFIG,
        )
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise RayUnavailable(
            f"Could not {'reach the Ray cluster at ' + address if address else 'start a local Ray'}: "
            f"{error}. Check the address (the engine resource's, or run_library's cluster; env "
            "DEDUP_RAY_ADDRESS): e.g. ray://head:10001 for a remote cluster, or leave it unset for "
            "a local Ray."
        ) from None
    try:
        _use_daft()
        yield
    finally:
        ray.shutdown()
