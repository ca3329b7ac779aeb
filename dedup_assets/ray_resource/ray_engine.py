"""The ``ray_engine`` resource: where the ``ray`` engine runs (a local Ray, or a cluster's
address) and where its tables' Parquet folders live. Only runs with ``engine: ray`` use it; Ray
is imported then, so the default install does not need it.

The session is opened on first use and held for the run: the run's steps execute one at a time
in one process (the in-process executor), so each step's Ray work reuses it.
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from pathlib import Path

from dagster import ConfigurableResource, InitResourceContext
from pydantic import Field, PrivateAttr

from ..core.distributed.plan import PARTITION_BYTES, Shuffle, shuffle_plan
from ..core.engines import DuckDBEngine
from ..launch.user_messages import refusal

RAY_EXTRA = "make setup-ray in the project folder, or pip install -e '.[ray]' there"


class RayEngine(ConfigurableResource):
    """The ray engine's cluster and table folders (resource key ``ray_engine``)."""

    address: str | None = Field(
        default=None,
        description="The Ray cluster to run on (env DEDUP_RAY_ADDRESS): ray://head:10001 for a "
        "remote cluster's client port, auto or host:6379 inside the cluster. Unset: a local Ray "
        "is started for the run and stopped after it.",
    )
    dataset_root: str | None = Field(
        default=None,
        description="Folder of the tables' Parquet folders (env DEDUP_DATASETS); every Ray node "
        "must see it at the same path (a shared file system). Unset: beside the DuckDB file, as "
        "<database>.datasets.",
    )
    shuffle_partitions: int = Field(
        default=0,
        ge=0,
        description="Partitions of each join and grouping. 0: twice the cluster's CPUs, or one "
        f"per {PARTITION_BYTES // 2**20} MB of the documents table's Parquet files if that is "
        "more, so that each partition's share of a join stays small.",
    )
    shuffle: Shuffle = Field(
        default="auto",
        description="Where joins and groupings move rows: Ray's object store, or files on each "
        "node's disk (Ray Data's disk-based hash shuffle, for tables larger than the cluster's "
        "object store). auto: disk when the documents table's Parquet files are larger than the "
        "cluster's object store memory. It overrides RAY_DATA_ENABLE_DISK_SHUFFLE.",
    )

    components_on_driver_up_to_edges: int = Field(
        default=5_000_000,
        ge=0,
        description="Connected components of the accepted edges run on the Dagster node (networkx, "
        "as on engine duckdb) while there are at most this many edges; above it, large-star / "
        "small-star rounds on the cluster. 0: always on the cluster.",
    )
    compare_up_to_documents: int = Field(
        default=200_000,
        ge=0,
        description="The engine_matches_duckdb check runs the DuckDB engine again over corpora of up "
        "to this many documents, on this node, and compares; above it the check warns that it did not.",
    )

    _session: ExitStack | None = PrivateAttr(default=None)

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def library(self):
        """The library's ray engine (``core/distributed/``), imported on first use."""
        try:
            from ..core.distributed import engine
        except ImportError as error:
            raise refusal(
                f"engine ray needs Ray, which is not installed ({error}). Install the "
                f"ray extra ({RAY_EXTRA}), or set engine: duckdb."
            ) from None
        return engine

    def engine(self, name: str, database: str):
        """The run's engine (``core/engines.py``) by its name in the settings, the one place that
        asks which engine runs: ray's with Ray started or joined on first use."""
        if name == "duckdb":
            return DuckDBEngine()
        return self.library().RayStepsEngine(self.tables(database), self.components_on_driver_up_to_edges)

    def tables(self, database: str):
        """The run's ``RayTables``, with Ray started or joined on first use."""
        library = self.library()
        from ..core.distributed.datasets import table_bytes
        from ..core.distributed.session import (
            RayUnavailable, cluster_cpus, cluster_object_store, ray_session, use_disk_shuffle,
        )

        if self._session is None:
            session = ExitStack()
            try:
                session.enter_context(ray_session(self.address or os.environ.get("DEDUP_RAY_ADDRESS") or None))
            except RayUnavailable as error:
                raise refusal(str(error)) from None
            self._session = session
        root = self.dataset_root or os.environ.get("DEDUP_DATASETS") or f"{Path(database).expanduser()}.datasets"
        root = Path(root).expanduser().resolve()
        plan = shuffle_plan(
            self.shuffle, self.shuffle_partitions, table_bytes(root, "documents"), cluster_cpus(), cluster_object_store()
        )
        use_disk_shuffle(plan.disk)
        return library.RayTables(root, plan.partitions)
