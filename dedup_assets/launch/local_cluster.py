"""``dedup cluster up | down | status | address``: a local Ray cluster of several nodes on this machine,
kept up between runs, for trying the ray engine as it runs on a real cluster (each node its own
raylet and object store; the run joins it through ``DEDUP_RAY_ADDRESS``). A real cluster is
started with Ray's own tools instead (docs/scale-out.md).

``up`` starts a detached process (``serve``) that holds the cluster and writes a state file (its
pid, the address, the nodes) once every node is up; ``down`` signals that process, which shuts
the cluster down and removes the file. Only the processes this cluster started are stopped:
``ray stop`` would stop every Ray of the machine's user, another run's included.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .processes import alive

STATE_ENV = "DEDUP_CLUSTER_STATE"
UP_TIMEOUT_S = 180.0
DOWN_TIMEOUT_S = 60.0


def state_path() -> Path:
    """Where the state of this user's local cluster is kept (env DEDUP_CLUSTER_STATE)."""
    default = Path(tempfile.gettempdir()) / f"dedup-local-cluster-{os.getuid()}.json"
    return Path(os.environ.get(STATE_ENV) or default).expanduser()


def _state(path: Path) -> dict | None:
    """The cluster's state while its process lives; a file left by one that died is removed."""
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or not isinstance(state.get("pid"), int) or "started" not in state:
        return None  # not a state this command wrote (an older one has no start time): no cluster
    if alive(state["pid"], state["started"]):
        return state
    path.unlink(missing_ok=True)
    return None


def _described(state: dict) -> str:
    nodes = state["nodes"]
    return (
        f"A local Ray cluster of {nodes} node{'s' if nodes != 1 else ''} ({state['cpus_per_node']} CPU each, "
        f"{state['object_store_mb']:,} MB of object store each) is up at {state['address']}."
    )


def up(nodes: int, cpus_per_node: int, object_store_mb: int) -> int:
    path = state_path()
    running = _state(path)
    if running is not None:
        print(f"{_described(running)} Stop it first: dedup cluster down", file=sys.stderr)
        return 1
    try:
        import ray  # noqa: F401  (only to say what is missing before a process is started)
    except ImportError:
        print(
            "Error: dedup cluster needs Ray, which is not installed. Install the ray extra (make setup-ray "
            "in the project folder, or pip install -e '.[ray]' there).",
            file=sys.stderr,
        )
        return 2
    path.parent.mkdir(parents=True, exist_ok=True)
    log = path.with_suffix(".log")
    command = [
        sys.executable, "-m", "dedup_assets.launch.local_cluster", "serve",
        str(nodes), str(cpus_per_node), str(object_store_mb), str(path),
    ]
    with log.open("w") as output:
        server = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output, stderr=output, start_new_session=True)
    deadline = time.monotonic() + UP_TIMEOUT_S
    while time.monotonic() < deadline:
        state = _state(path)
        if state is not None:
            print(_described(state))
            print("Point runs at it:  export DEDUP_RAY_ADDRESS=$(dedup cluster address)")
            print("Stop it:           dedup cluster down")
            return 0
        if server.poll() is not None:
            break
        time.sleep(0.5)
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
    tail = log.read_text(errors="replace").strip().splitlines()[-15:]
    print(
        f"Error: the local cluster did not come up within {UP_TIMEOUT_S:.0f} s (its log, {log}, ends):\n"
        + "\n".join(f"  {line}" for line in tail),
        file=sys.stderr,
    )
    return 1


def down() -> int:
    path = state_path()
    state = _state(path)
    if state is None:
        print(f"No local cluster is up (no live one in {path}).")
        return 0
    os.kill(state["pid"], signal.SIGTERM)
    deadline = time.monotonic() + DOWN_TIMEOUT_S
    while alive(state["pid"], state["started"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    if alive(state["pid"], state["started"]):
        print(
            f"Error: the local cluster's process {state['pid']} did not stop within {DOWN_TIMEOUT_S:.0f} s; "
            f"stop it with: kill -9 {state['pid']}",
            file=sys.stderr,
        )
        return 1
    path.unlink(missing_ok=True)
    print(f"The local cluster at {state['address']} is down.")
    return 0


def status(address_only: bool) -> int:
    state = _state(state_path())
    if state is None:
        print("No local cluster is up. Start one: dedup cluster up", file=sys.stderr if address_only else sys.stdout)
        return 1
    print(state["address"] if address_only else _described(state))
    return 0


def serve(nodes: int, cpus_per_node: int, object_store_mb: int, path: Path) -> None:
    """Hold the cluster until SIGTERM or SIGINT; the state file exists while every node is up."""
    from ray.cluster_utils import Cluster

    from ..core.distributed.session import LOCAL_SYSTEM_CONFIG

    started = time.time()  # no later than this process started: its pid is its own while it lives
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    store = object_store_mb * 2**20
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": cpus_per_node, "object_store_memory": store, "include_dashboard": False,
            # idle workers kept, as a run's own local Ray keeps them: each run's steps start no new ones
            "_system_config": LOCAL_SYSTEM_CONFIG,
        },
    )
    try:
        for _ in range(nodes - 1):
            cluster.add_node(num_cpus=cpus_per_node, object_store_memory=store)
        cluster.wait_for_nodes()
        state = {
            "pid": os.getpid(), "started": started, "address": cluster.address, "nodes": nodes,
            "cpus_per_node": cpus_per_node, "object_store_mb": object_store_mb,
        }
        written = path.with_suffix(".writing")
        written.write_text(json.dumps(state))
        written.replace(path)  # whole, or not there: up reads it as soon as it appears
        while not stopping:
            signal.pause()
    finally:
        path.unlink(missing_ok=True)
        cluster.shutdown()


def command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="dedup cluster",
        description="Bring a local Ray cluster of several nodes up or down on this machine, for the ray "
        "engine (settings: engine ray); runs join it through DEDUP_RAY_ADDRESS. A real cluster is "
        "started with Ray's own tools (docs/scale-out.md).",
    )
    actions = parser.add_subparsers(dest="action", required=True)
    start = actions.add_parser("up", help="start the cluster and print its address")
    start.add_argument("--nodes", type=int, default=2, help="nodes, the head included (default: 2)")
    start.add_argument("--cpus-per-node", type=int, default=1, help="CPUs of each node (default: 1)")
    start.add_argument("--object-store-mb", type=int, default=1024, help="object store of each node (default: 1024)")
    actions.add_parser("down", help="stop the cluster that dedup cluster up started")
    actions.add_parser("status", help="say whether the cluster is up, and its address")
    actions.add_parser("address", help="print the cluster's address alone, for DEDUP_RAY_ADDRESS")
    arguments = parser.parse_args(argv)
    if arguments.action == "up":
        for name in ("nodes", "cpus_per_node", "object_store_mb"):
            if getattr(arguments, name) < 1:
                parser.error(f"--{name.replace('_', '-')} must be at least 1")
        return up(arguments.nodes, arguments.cpus_per_node, arguments.object_store_mb)
    return down() if arguments.action == "down" else status(address_only=arguments.action == "address")


if __name__ == "__main__":  # the detached process of dedup cluster up
    _, nodes, cpus, store, state = sys.argv[1:]
    serve(int(nodes), int(cpus), int(store), Path(state))
