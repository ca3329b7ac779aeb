"""No ray run waits forever (issue 51): on the tests' cluster of two one-CPU nodes the whole graph
finishes with the DuckDB engine's release, and a step that cannot get a CPU fails with what it
waits for."""

from __future__ import annotations

import pyarrow as pa
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
