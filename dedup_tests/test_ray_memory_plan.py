"""The clusters step's memory plan on ray (issue 51): the largest ranking task's estimate, said in
the run's log before it runs, and a refusal naming the setting when a node would run out."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.settings.model import Settings

from .conftest import HARD_FIXTURE, require_ray

pytestmark = pytest.mark.ray


def _members(components: dict[str, int], shingles: int, copies_of_first: int = 0) -> pa.Table:
    """Members of components named by root, each of its given number of distinct texts, and
    ``copies_of_first`` copies of the first component's root text."""
    doc_id, text, root = [], [], []
    for name, size in components.items():
        for index in range(size):
            doc_id.append(f"{name}-{index:06d}")
            text.append(doc_id[-1])
            root.append(f"{name}-000000")
    first = next(iter(components))
    for index in range(copies_of_first):
        doc_id.append(f"{first}-copy-{index:06d}")
        text.append(f"{first}-000000")
        root.append(f"{first}-000000")
    return pa.table({"doc_id": doc_id, "text_doc_id": text, "root_doc_id": root, "shingle_count": [shingles] * len(doc_id)})


def test_the_largest_task_holds_its_share_of_the_largest_buckets_and_one_bucket_of_shingle_sets(ray_cluster):
    require_ray()
    import daft

    from dedup_assets.core.distributed.memory_plan import ROW_BYTES, SHINGLE_BYTES, ranking_memory
    from dedup_assets.core.distributed.session import ray_session

    # a giant component of 3,000 texts and 500 copies of one, in bucket 3; 50 pairs of texts
    # spread over buckets 0-2
    members = _members({"giant": 3_000, **{f"small{n:03d}": 2 for n in range(50)}}, shingles=100, copies_of_first=500)
    bucket = [3 if root.startswith("giant") else int(root[5:8]) % 3 for root in members["root_doc_id"].to_pylist()]
    members = daft.from_arrow(members.append_column("bucket", pa.array(bucket, pa.int64()))).into_partitions(4)

    small = {b: sum(1 for n in range(50) if n % 3 == b) * 2 for b in range(3)}  # texts per small bucket
    with ray_session(None):  # Daft's runner on the fixture's cluster
        # 4 buckets over 2 partitions: a task is taken to hold the two largest buckets' rows and bodies
        task = ranking_memory(members, 4, 2, body_per_shingle=6.0)
        # one partition: every bucket's rows in the task
        whole = ranking_memory(members, 4, 1, body_per_shingle=6.0)
    second = max(small.values())
    assert (task.documents, task.texts) == (3_500 + second, 3_000 + second)
    assert (task.component_documents, task.component_bytes) == (3_500, 3_500 * ROW_BYTES + 3_000 * 100 * (6 + SHINGLE_BYTES))
    rows = (3_500 + second) * ROW_BYTES + (3_000 + second) * 100 * 6
    assert task.bytes == rows + 3_000 * 100 * SHINGLE_BYTES  # the giant bucket's sets, the largest
    assert whole.documents == 3_600 and whole.texts == 3_100


@pytest.mark.parametrize("keys_hashed", [False, True], ids=["keys-broadcast", "keys-hashed"])
def test_a_copy_group_holds_one_body_on_its_first_copys_row(ray_cluster, tmp_path, monkeypatch, keys_hashed):
    require_ray()
    import daft

    from dedup_assets.core.distributed import daft_tables
    from dedup_assets.core.distributed.daft_tables import frame, write_frames

    if keys_hashed:  # more members than the bodies' lookup broadcasts
        monkeypatch.setattr(daft_tables, "BROADCAST_KEYS", 0)
    from dedup_assets.core.distributed.datasets import write_batches
    from dedup_assets.core.distributed.ray_clusters import _one_body_per_text
    from dedup_assets.core.distributed.ray_tables import RayTables
    from dedup_assets.core.distributed.session import ray_session

    tables = RayTables(tmp_path / "datasets", 2)
    # a page and its 3,000 copies, and a near copy of it: two texts
    members = _members({"page": 2}, shingles=10, copies_of_first=3_000)
    bodies = {"page-000000": "the page", "page-000001": "the page, nearly"}
    documents = pa.table({"doc_id": members["doc_id"], "body": [bodies.get(doc, "the page") for doc in members["doc_id"].to_pylist()]})
    write_batches(tables.root, "documents", documents.to_batches(max_chunksize=1_000), 1_000)
    with ray_session(None):  # Daft's runner on the fixture's cluster
        # read from Parquet files, as the step reads its members
        write_frames(tables.root, "members", [daft.from_arrow(members)], members.schema)
        bodied = _one_body_per_text(tables, frame(tables.root, "members"), members.num_rows, 2).to_arrow()
    with_body = {doc: body for doc, body in zip(bodied["doc_id"].to_pylist(), bodied["body"].to_pylist()) if body is not None}
    assert bodied.num_rows == members.num_rows
    assert with_body == bodies


def test_the_plan_fits_or_names_what_to_change(ray_cluster):
    require_ray()
    from dedup_assets.core.distributed.memory_plan import NodeMemory, TaskMemory, ensure_ranking_fits, smallest_node
    from dedup_assets.core.verify.pairs import MemoryBudgetExceeded

    node = smallest_node()  # the fixture's nodes: one CPU each, the machine's memory
    assert node.cpus == 1 and node.per_task == node.memory > 0
    assert "the largest ranking task holds about 1 MB" in ensure_ranking_fits(TaskMemory(2**20, 10, 10, 5, 2**19), node, 8)
    small = NodeMemory("10.0.0.7", 512 * 2**20, 4)  # 128 MB a task
    with pytest.raises(MemoryBudgetExceeded) as many:
        ensure_ranking_fits(TaskMemory(300 * 2**20, 90_000, 80_000, 2_000, 20 * 2**20), small, 8)
    assert "(512 MB, 4 CPU)" in str(many.value)
    assert "Raise the engine resource's shuffle_partitions above the 8 this run used" in str(many.value)
    with pytest.raises(MemoryBudgetExceeded) as one:
        ensure_ranking_fits(TaskMemory(300 * 2**20, 90_000, 80_000, 85_000, 280 * 2**20), small, 8)
    assert "One component fills the task: raise jaccard_threshold" in str(one.value)
    assert "shuffle_partitions" not in str(one.value)


def test_components_leave_this_node_when_networkx_would_take_over_half_its_free_memory(ray_cluster):
    require_ray()
    from dedup_assets.core.distributed.memory_plan import components_here

    assert components_here(100_000, 5_000_000, 2**30) == (
        True, "connected components: 100,000 edges, on this node (at most 5,000,000 here), about 61 MB"
    )
    assert components_here(100_000, 5_000_000, None)[0]  # no figure from the system: the setting decides
    here, where = components_here(1_000_000, 5_000_000, 1_000 * 2**20)  # 610 MB needed, 1,000 MB free
    assert not here and where.endswith("about 610 MB, over half of the 1,000 MB free here")
    here, where = components_here(6_000_000, 5_000_000, 2**40)
    assert not here and "on the cluster (over 5,000,000 for this node)" in where


def test_a_ray_run_says_its_memory_plan_before_ranking(ray_cluster, tmp_path):
    require_ray()
    lines: list[str] = []
    run_library(str(HARD_FIXTURE), str(tmp_path / "run.duckdb"), None, Settings(engine="ray"), log=lines.append)
    plans = [line for line in lines if line.startswith("clusters: the largest ranking task holds about")]
    assert len(plans) == 1 and ", 1 CPU)" in plans[0]
    assert any(line.startswith("connected components:") and line.endswith(" MB") for line in lines)
