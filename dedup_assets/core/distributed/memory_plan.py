"""What the clusters step will hold in memory, said before it runs, and refused when a node would
run out: connected components on the Dagster node (networkx) and the ranking, where one task
holds whole components (their rows, one body per distinct text and its shingle set).

The figures are estimates from what the run already has: edge and member counts, each text's
``shingle_count``, and the corpus's body bytes per shingle from the ``documents`` files'
Parquet footers (so a Chinese corpus, three bytes a character, is not taken for English).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import ray
import ray.data
from ray.data.aggregate import Count, Max, Sum

from ..verify.pairs import MemoryBudgetExceeded
from .datasets import table_folder
from .ray_tables import RayTables, arrow_map

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
    """Bytes of memory free on this node now, where the system says (Linux); else None."""
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


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
    shingles = tables.read("fingerprinted", ["shingle_count"]).sum("shingle_count") or 0
    return body / max(shingles, 1)


@dataclass(frozen=True)
class TaskMemory:
    """The largest ranking task: its bytes, documents and distinct texts, and the largest
    component's documents."""

    bytes: int
    documents: int
    texts: int
    largest_component: int


def ranking_memory(
    members: ray.data.Dataset, bucket: Callable[[pa.ChunkedArray], pa.Array], body_per_shingle: float
) -> TaskMemory:
    """The ranking's largest task, for ``members`` (``doc_id``, ``text_doc_id``, ``root_doc_id``,
    ``shingle_count``) grouped by ``bucket`` of their roots, the ranking's own grouping."""
    per_text = body_per_shingle + SHINGLE_BYTES

    def sized(batch: pa.Table) -> pa.Table:
        text = pc.equal(batch["doc_id"], batch["text_doc_id"]).to_numpy(zero_copy_only=False)
        shingles = batch["shingle_count"].to_numpy(zero_copy_only=False).astype(np.float64)
        return pa.table(
            {
                "root_doc_id": batch["root_doc_id"],
                "bytes": pa.array((ROW_BYTES + text * shingles * per_text).astype(np.int64)),
                "text": pa.array(text.astype(np.int64)),
            }
        )

    components = arrow_map(members, sized).groupby("root_doc_id").aggregate(
        Count(alias_name="documents"), Sum("bytes", alias_name="bytes"), Sum("text", alias_name="texts")
    )
    grouped = (
        arrow_map(components, lambda batch: batch.append_column("bucket", bucket(batch["root_doc_id"])))
        .groupby("bucket")
        .aggregate(
            Sum("bytes", alias_name="bytes"), Sum("documents", alias_name="documents"),
            Sum("texts", alias_name="texts"), Max("documents", alias_name="largest"),
        )
        .take_all()
    )
    if not grouped:
        return TaskMemory(0, 0, 0, 0)
    worst = max(grouped, key=lambda row: (row["bytes"], row["bucket"]))
    largest = max(row["largest"] for row in grouped)
    return TaskMemory(int(worst["bytes"]), int(worst["documents"]), int(worst["texts"]), int(largest))


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
        f"documents, {task.texts:,} distinct texts; the largest component has {task.largest_component:,} "
        f"documents) of the {node.per_task / 2**20:,.0f} MB a task has on node {node.node} "
        f"({node.memory / 2**20:,.0f} MB, {node.cpus:g} CPU)"
    )
    if task.bytes <= node.per_task:
        return plan
    if task.largest_component * 2 < task.documents:  # several components share the task: more, smaller groups help
        remedy = f"Raise the engine resource's shuffle_partitions (now {partitions:,}) so that fewer components share a task"
    else:
        remedy = (
            "One component fills the task: make LSH stricter (more rows_per_band, or a higher threshold) "
            "so that fewer documents join it"
        )
    raise MemoryBudgetExceeded(
        f"{plan}: it would not fit. {remedy}, or run on nodes with more memory per CPU."
    )
