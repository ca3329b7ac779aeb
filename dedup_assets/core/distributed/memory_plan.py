"""What the clusters step will hold in memory, said before it runs, and refused when a node would
run out: connected components on the Dagster node (networkx) and the ranking, where one task
holds whole components (their rows, one body per distinct text and its shingle set).

The figures are estimates from what the run already has: edge and member counts, each text's
``shingle_count``, and the corpus's body bytes per shingle from the ``documents`` files'
Parquet footers (so a Chinese corpus, three bytes a character, is not taken for English).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import daft
import pyarrow.parquet as pq
import ray
from daft import DataType, col

from ..verify.pairs import MemoryBudgetExceeded
from .daft_tables import frame
from .datasets import table_folder
from .ray_tables import RayTables

# measured: networkx's graph and the components of 300,000 random edges between 12-byte ids took
# 622 bytes of Python objects per edge (tracemalloc)
DRIVER_BYTES_PER_EDGE = 640
# a member's narrow row as read, joined and written again (ids, file, position, keep columns)
ROW_BYTES = 256
# a shingled text: its 8-byte hashes, their sorted copy and the kernel's scratch
SHINGLE_BYTES = 24


def driver_components_bytes(edges: int) -> int:
    """Bytes the Dagster node holds for networkx's components of ``edges`` edges."""
    return edges * DRIVER_BYTES_PER_EDGE


def available_memory() -> int | None:
    """Bytes of memory this node can give now (Linux's MemAvailable, page cache counted as
    free), within the container's cgroup limit where there is one; None where unknown."""
    try:
        meminfo = Path("/proc/meminfo").read_text()
        available = int(re.search(r"^MemAvailable:\s+(\d+) kB", meminfo, re.M).group(1)) * 1024
    except (OSError, AttributeError):
        return None
    try:  # cgroup v2: the limit and what the group uses now
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            used = int(Path("/sys/fs/cgroup/memory.current").read_text())
            available = min(available, int(limit) - used)
    except (OSError, ValueError):
        pass
    return available


def components_here(edges: int, driver_edges: int, available: int | None) -> tuple[bool, str]:
    """Whether connected components of ``edges`` edges run on this node, and the log line that
    says where and why: here up to ``driver_edges`` edges while networkx would take at most half
    of the ``available`` memory, else on the cluster."""
    needed = driver_components_bytes(edges) / 2**20
    if edges > driver_edges:
        return False, f"connected components: {edges:,} edges, on the cluster (over {driver_edges:,} for this node)"
    if available is not None and needed > available / 2**21:
        return False, (
            f"connected components: {edges:,} edges, on the cluster: on this node they would take about "
            f"{needed:,.0f} MB, over half of the {available / 2**20:,.0f} MB free here"
        )
    return True, f"connected components: {edges:,} edges, on this node (at most {driver_edges:,} here), about {needed:,.0f} MB"


def body_bytes_per_shingle(tables: RayTables) -> float:
    """The corpus's body bytes (uncompressed, from the footers) per shingle."""
    body = 0
    for path in table_folder(tables.root, "documents").glob("*.parquet"):
        metadata = pq.ParquetFile(path).metadata
        index = metadata.schema.to_arrow_schema().get_field_index("body")
        body += sum(metadata.row_group(group).column(index).total_uncompressed_size for group in range(metadata.num_row_groups))
    shingles = frame(tables.root, "fingerprinted", ["shingle_count"]).sum("shingle_count").to_pydict()["shingle_count"][0] or 0
    return body / max(shingles, 1)


@dataclass(frozen=True)
class TaskMemory:
    """The largest ranking task: its bytes, documents and distinct texts, and its largest
    component's documents and bytes."""

    bytes: int
    documents: int
    texts: int
    component_documents: int
    component_bytes: int


def ranking_memory(members: daft.DataFrame, buckets: int, partitions: int, body_per_shingle: float) -> TaskMemory:
    """The ranking's largest task, for ``members`` (``doc_id``, ``text_doc_id``, ``root_doc_id``,
    ``shingle_count``, and ``bucket``: one of ``buckets``, the same for a component's members)
    grouped by bucket into ``partitions`` tasks, the ranking's own grouping. A task holds its
    partition's rows and bodies (taken as its share of the largest buckets: how buckets are
    hashed to partitions is Daft's own) and one bucket's shingle sets at a time."""
    text = (col("doc_id") == col("text_doc_id")).cast(DataType.int64())
    shingles = col("shingle_count").cast(DataType.float64()) * text.cast(DataType.float64())
    sized = members.select(
        col("root_doc_id"),
        col("bucket"),
        # whole bytes, as numpy's astype(int64) truncates (never negative)
        (shingles * body_per_shingle + ROW_BYTES).floor().cast(DataType.int64()).alias("rows"),
        (shingles * SHINGLE_BYTES).floor().cast(DataType.int64()).alias("sets"),
        text.alias("text"),
    )
    components = sized.groupby("root_doc_id", "bucket").agg(
        col("root_doc_id").count().alias("documents"), col("rows").sum(), col("sets").sum(), col("text").sum().alias("texts")
    )
    grouped = (
        components.with_column("size", col("rows") + col("sets"))
        .groupby("bucket")
        .agg(
            col("rows").sum(), col("sets").sum(), col("documents").sum(), col("texts").sum(),
            col("size").max().alias("component_bytes"), col("documents").max().alias("component_documents"),
        )
        .to_pylist()
    )
    if not grouped:
        return TaskMemory(0, 0, 0, 0, 0)
    share = sorted(grouped, key=lambda row: (-row["rows"], row["bucket"]))[: -(-buckets // max(partitions, 1))]
    return TaskMemory(
        bytes=int(sum(row["rows"] for row in share) + max(row["sets"] for row in grouped)),
        documents=int(sum(row["documents"] for row in share)),
        texts=int(sum(row["texts"] for row in share)),
        component_documents=int(max(row["component_documents"] for row in grouped)),
        component_bytes=int(max(row["component_bytes"] for row in grouped)),
    )


@dataclass(frozen=True)
class NodeMemory:
    """The node with the least memory per CPU: what one task there may hold."""

    node: str
    memory: int
    cpus: float

    @property
    def per_task(self) -> int:
        return int(self.memory / max(self.cpus, 1))


def smallest_node() -> NodeMemory:
    """The alive node whose memory per CPU is smallest (Ray runs a task per CPU at once)."""
    nodes = [
        NodeMemory(node["NodeManagerAddress"], int(node["Resources"].get("memory", 0)), node["Resources"].get("CPU", 0))
        for node in ray.nodes()
        if node["Alive"] and node["Resources"].get("CPU", 0) > 0
    ]
    return min(nodes, key=lambda node: (node.per_task, node.node))


def ensure_ranking_fits(task: TaskMemory, node: NodeMemory, partitions: int) -> str:
    """The plan's line for the run's log; raises MemoryBudgetExceeded when the largest task
    would not fit in what one task has on ``node``."""
    plan = (
        f"clusters: the largest ranking task holds about {task.bytes / 2**20:,.0f} MB ({task.documents:,} "
        f"documents, {task.texts:,} distinct texts; the largest component has {task.component_documents:,} "
        f"documents, about {task.component_bytes / 2**20:,.0f} MB) of the {node.per_task / 2**20:,.0f} MB a "
        f"task has on node {node.node} ({node.memory / 2**20:,.0f} MB, {node.cpus:g} CPU)"
    )
    if task.bytes <= node.per_task:
        return plan
    if task.component_bytes * 2 <= node.per_task:  # many components share the task: more, smaller tasks help
        remedy = (
            f"Raise the engine resource's shuffle_partitions above the {partitions:,} this run used, so that "
            "fewer components share a task"
        )
    else:
        remedy = (
            "One component fills the task: raise jaccard_threshold so that fewer pairs join it (or leave "
            "out the shared text that chains it, with ignored_passages)"
        )
    raise MemoryBudgetExceeded(f"{plan}: it would not fit. {remedy}, or run on nodes with more memory per CPU.")
