"""The ``engine`` resource: where the run's engine runs when it runs on a cluster (a local Ray, or
a cluster's address) and where its tables' Parquet folders live. The settings' ``engine`` names
the engine and the library opens it (``core/pipeline/engines.py``, ``for_settings``); this resource only
configures it, so an engine that needs none of it (duckdb) never reads it.

What the engine starts (a Ray session) is opened on first use and held for the run: the run's
steps execute one at a time in one process (the in-process executor), so each step's work
reuses it.
"""

from __future__ import annotations

from contextlib import ExitStack

from dagster import ConfigurableResource, InitResourceContext
from pydantic import Field, PrivateAttr

from .core.pipeline import engines
from .core.distributed.plan import PARTITION_BYTES, ClusterOptions, Shuffle
from .core.settings.model import Settings
from .core.storage.tables import SCHEMA

DEFAULTS = ClusterOptions()


class EngineResource(ConfigurableResource):
    """Where the run's engine runs and keeps its tables (resource key ``engine``)."""

    address: str | None = Field(
        default=DEFAULTS.address,
        description="The Ray cluster to run on (env DEDUP_RAY_ADDRESS): ray://head:10001 for a "
        "remote cluster's client port, auto or host:6379 inside the cluster. Unset: a local Ray "
        "is started for the run and stopped after it.",
    )
    dataset_root: str | None = Field(
        default=DEFAULTS.dataset_root,
        description="Folder of the tables' Parquet folders (env DEDUP_DATASETS); every Ray node "
        "must see it at the same path (a shared file system). Unset: beside the DuckDB file, as "
        "<database>.datasets.",
    )
    shuffle_partitions: int = Field(
        default=DEFAULTS.shuffle_partitions,
        ge=0,
        description="Partitions of Daft's groupings and of the clusters step's ranking (its "
        "components are grouped into four times as many buckets). 0: Daft's own number for its "
        "groupings, and for the ranking twice the cluster's CPUs, or one "
        f"per {PARTITION_BYTES // 2**20} MB of the documents table's Parquet files if that is "
        "more.",
    )
    shuffle: Shuffle = Field(
        default=DEFAULTS.shuffle,
        description="Where Daft's joins and groupings move rows: Ray's object store (spilled to "
        "disk by Ray when full), or files on each node's disk (Daft's flight shuffle). auto: disk "
        "when the documents table's Parquet files are larger than the cluster's object store memory.",
    )
    components_on_driver_up_to_edges: int = Field(
        default=DEFAULTS.components_on_driver_up_to_edges,
        ge=0,
        description="Connected components of the accepted edges run on the Dagster node (networkx, "
        "as on engine duckdb) while there are at most this many edges; above it, large-star / "
        "small-star rounds on the cluster. 0: always on the cluster.",
    )
    stall_timeout_s: float = Field(
        default=DEFAULTS.stall_timeout_s,
        ge=0,
        description="A ray step whose Daft query runs this many seconds without a task of the run "
        "finishing is ended and fails, naming what waits for resources, the free CPUs and the "
        "actors holding them, and what to do. 0: wait forever.",
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

    def for_settings(self, settings: Settings, database: str, schema: str = SCHEMA) -> engines.Engine:
        """The run's engine (``engines.for_settings``) for a step on the DuckDB file ``database``
        over tables in ``schema``, with what it starts held until the run ends."""
        if self._session is None:
            self._session = ExitStack()
        cluster = ClusterOptions(
            address=self.address,
            dataset_root=self.dataset_root,
            shuffle_partitions=self.shuffle_partitions,
            shuffle=self.shuffle,
            components_on_driver_up_to_edges=self.components_on_driver_up_to_edges,
            stall_timeout_s=self.stall_timeout_s,
        )
        return engines.for_settings(settings, database, self._session, cluster, schema)
