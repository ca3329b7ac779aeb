"""No ray run waits forever (issue 51): on the tests' cluster of two one-CPU nodes the whole graph
finishes with the DuckDB engine's release, and a step that cannot get a CPU fails with what it
waits for."""

from __future__ import annotations

import time
from random import Random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dedup_assets.core.distributed.plan import ClusterOptions
from dedup_bench.corpus import generate

from .conftest import require_ray
from .test_ray_engine import _assert_same_release, run_both

pytestmark = pytest.mark.ray


@pytest.mark.slow
def test_the_whole_graph_on_two_one_cpu_nodes_gives_the_duckdb_release(ray_cluster, tmp_path):
    # 50,000 documents stalled in scored_pairs on two one-CPU nodes with 2 GB object stores before
    # every read took one block per file (docs/scale-out.md); a stall now fails the step
    corpus = tmp_path / "corpus.parquet"
    generate(50_000, corpus)
    _assert_same_release(*run_both(tmp_path, corpus, num_perm=128, rows_per_band=8))


@pytest.mark.slow
def test_a_dense_near_duplicate_group_larger_than_an_object_store_gives_the_duckdb_release(ray_cluster, tmp_path):
    # 150 variants of one 4,000-word page are 9,578 candidate pairs, each carrying a 25 KB body:
    # 240 MB in one documents file's take, over the fixture's 200 MB object stores. The stall
    # itself needed 800 variants (7 GB, docs/scale-out.md): at this size the takes as they were
    # also passed (1,149 s under load); this is the parity of a dense group, the parts are
    # test_positions_ray's
    random = Random(11)
    vocabulary = [f"w{index}" for index in range(5_000)]
    page = random.choices(vocabulary, k=4_000)
    bodies = []
    for _ in range(150):
        variant = list(page)
        for _ in range(40):
            variant[random.randrange(len(variant))] = random.choice(vocabulary)
        bodies.append(" ".join(variant))
    bodies += [" ".join(random.choices(vocabulary, k=random.randrange(30, 200))) for _ in range(300)]
    corpus = tmp_path / "dense.parquet"
    pq.write_table(pa.table({"doc_id": [f"doc-{index:04d}" for index in range(len(bodies))], "body": bodies}), corpus)
    duckdb_runner, ray_runner, result = run_both(tmp_path, corpus, {"stall_timeout_s": 120})
    _assert_same_release(duckdb_runner, ray_runner, result)
    assert duckdb_runner.manifest()["counts"]["candidate_pair_rows"] > 9_000  # the dense group is there


def test_an_execution_that_cannot_get_a_cpu_fails_naming_what_holds_them(ray_cluster, tmp_path):
    ray = require_ray()
    # the ray engine's modules import Ray: here, so that the lean install collects this file
    from dedup_assets.core.distributed.datasets import write_batches
    from dedup_assets.core.distributed.ray_tables import RayTables, arrow_map
    from dedup_assets.core.distributed.session import ray_session
    from dedup_assets.core.distributed.stall import RayStalled, watch_stalls

    tables = RayTables(tmp_path / "datasets", partitions=4)
    write_batches(tables.root, "documents", [pa.record_batch({"doc_id": ["a", "b"], "body": ["x y", "y z"]})], 1)

    def unchanged(batch: pa.Table) -> pa.Table:
        return batch

    # a dataset takes Ray Data's settings when it is made; planned while the CPUs are free
    # (reading a Parquet folder runs tasks of its own), run after
    with ray_session(None):  # the engine's Ray Data settings, on the fixture's cluster
        watch_stalls(5)
        dataset = arrow_map(tables.read("documents"), unchanged)

    @ray.remote(num_cpus=1)
    class CpuHolder:
        def ready(self) -> bool:
            return True

    # every CPU of the cluster held by another job's actors: the map's tasks can never start
    holders = [CpuHolder.remote() for _ in range(int(ray.cluster_resources()["CPU"]))]
    ray.get([holder.ready.remote() for holder in holders])
    try:
        with pytest.raises(RayStalled) as stalled:
            dataset.materialize()
    finally:
        watch_stalls(ClusterOptions().stall_timeout_s)
        for holder in holders:
            ray.kill(holder)
    message = str(stalled.value)
    assert "made no progress for" in message and "stall_timeout_s is 5" in message, message
    assert "MapBatches(unchanged)" in message and "needs 1 CPU" in message, message
    assert "0 of 2 CPUs free" in message and "CpuHolder (2 CPU)" in message, message
    assert "more CPUs" in message and "shuffle_partitions" in message, message


def test_a_task_that_waits_on_an_object_with_every_cpu_free_is_not_said_to_wait_for_cpus(ray_cluster, tmp_path):
    ray = require_ray()
    from dedup_assets.core.distributed.datasets import write_batches
    from dedup_assets.core.distributed.ray_tables import RayTables, arrow_map
    from dedup_assets.core.distributed.session import ray_session
    from dedup_assets.core.distributed.stall import RayStalled, watch_stalls

    tables = RayTables(tmp_path / "datasets", partitions=4)
    write_batches(tables.root, "documents", [pa.record_batch({"doc_id": ["a"], "body": ["x y"]})], 1)

    @ray.remote(num_cpus=0)
    class Never:
        def result(self) -> None:
            time.sleep(3_600)

    never = Never.remote()

    def blocked(batch: pa.Table) -> pa.Table:
        ray.get(never.result.remote())  # a task blocked in ray.get gives its CPU back
        return batch

    with ray_session(None):
        # long enough for a worker to start on a loaded machine: a task not yet started holds its CPU
        watch_stalls(30)
        dataset = arrow_map(tables.read("documents"), blocked)
    try:
        with pytest.raises(RayStalled) as stalled:
            dataset.materialize()
    finally:
        watch_stalls(ClusterOptions().stall_timeout_s)
        ray.kill(never)
    message = str(stalled.value)
    assert "MapBatches(blocked)" in message, message
    assert "Every CPU of the cluster (2) is free, so no task waits for one" in message, message
    assert "of object store it may use" in message and "CPUs free" not in message, message


def _sorted_query(daft):
    # a sort over partitions asks Ray for a task of its own (the sample boundaries), which wants a CPU
    return daft.from_pydict({"a": list(range(1_000))}).repartition(4, "a").sort("a")


def test_a_daft_query_that_cannot_get_a_cpu_fails_naming_what_it_waits_for_and_the_next_one_runs(ray_cluster):
    ray = require_ray()
    import daft

    from dedup_assets.core.distributed.daft_watch import RayStalled, watched
    from dedup_assets.core.distributed.session import ray_session

    @ray.remote(num_cpus=1)
    class CpuHolder:
        def ready(self) -> bool:
            return True

    with ray_session(None):  # Daft's runner on the fixture's cluster
        # every CPU of the cluster held by another job's actors
        holders = [CpuHolder.remote() for _ in range(int(ray.cluster_resources()["CPU"]))]
        ray.get([holder.ready.remote() for holder in holders])
        try:
            with pytest.raises(RayStalled) as stalled, watched("candidate_pairs", 10):
                _sorted_query(daft).collect()
        finally:
            for holder in holders:
                ray.kill(holder)
        with watched("candidate_pairs", 10):  # the same process's next query runs
            assert _sorted_query(daft).to_pydict()["a"] == list(range(1_000))
    message = str(stalled.value)
    assert message.startswith("candidate_pairs: a Daft query made no progress for 1"), message
    assert "stall_timeout_s is 10" in message and "The query was ended" in message, message
    assert "Waiting for resources: 1 task(s) or actor(s) each wanting 1 CPU" in message, message
    assert "0 of 2 CPUs free; actors holding CPUs: CpuHolder (2 CPU)" in message, message
    assert "more CPUs" in message and "raise stall_timeout_s (0 turns this off)" in message, message
    assert "dagster asset materialize --select 'candidate_pairs*'" in message, message
