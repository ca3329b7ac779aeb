"""A local multi-node Ray cluster for the ray engine's benchmark, kept apart from the run, in a
child process (``child.py``): ``serve`` starts ``ray.cluster_utils.Cluster`` with ``nodes`` nodes of
one CPU each (the head is the first), each with an object store of ``object_store_mb`` and Ray's
defaults otherwise (as ``ray up`` starts a cluster: idle workers are not kept, unlike the local
Ray of a run), prints one JSON line: the cluster's address and,
per node, the pids of the processes Ray started for it (GCS, raylet, ...; the raylet's workers
are its children), and keeps the cluster up until its stdin closes. The Dagster CLI joins it
through ``DEDUP_RAY_ADDRESS``, as it would join a ``ray up`` cluster, and the memory sampler
measures every node's tree on its own (``memory.py``).
"""

from __future__ import annotations

import json
import sys


def serve(nodes: int, object_store_mb: int) -> dict:
    from ray.cluster_utils import Cluster

    store = object_store_mb * 2**20
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "object_store_memory": store,
            "include_dashboard": False,
        },
    )
    try:
        members = [cluster.head_node]
        members += [cluster.add_node(num_cpus=1, object_store_memory=store) for _ in range(nodes - 1)]
        cluster.wait_for_nodes()
        pids = {
            f"node {index}{' (head)' if index == 0 else ''}": sorted(
                info.process.pid
                for infos in node.all_processes.values()
                for info in infos
                if info.process is not None
            )
            for index, node in enumerate(members)
        }
        print(json.dumps({"address": cluster.address, "nodes": pids}), flush=True)
        sys.stdin.read()  # up until the benchmark closes our stdin
    finally:
        cluster.shutdown()
    return {"shut_down": True}
