"""The ``new_batches`` sensor: under `dagster dev`, new files in the batch folder become
partitions, and the batches not yet in the index are run one at a time, in key order."""

from __future__ import annotations

import duckdb
from dagster import (
    AddDynamicPartitionsRequest,
    AssetSelection,
    DagsterRunStatus,
    DefaultSensorStatus,
    RunRequest,
    RunsFilter,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from .assets.incremental import GROUP, TABLES
from .batch_partitions import BATCHES, folder_batches, new_keys
from .core.batches import Batch, BatchError, collision_message
from .core.incremental import BATCH_COMMAND, indexed_batches
from .warehouse import DuckDBWarehouse

_UNFINISHED = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
    DagsterRunStatus.CANCELING,
]


def _fingerprint(batch: Batch) -> str:
    """Changes when the batch's file (or a file in its folder) changes, so a fixed batch runs again."""
    paths = sorted(batch.path.rglob("*")) if batch.path.is_dir() else [batch.path]
    stats = [(path.name, path.stat()) for path in paths if path.is_file()]
    return ",".join(f"{name}:{stat.st_size}:{stat.st_mtime_ns}" for name, stat in stats)


def _indexed_keys(database: str) -> set[str] | None:
    """The keys in the index; None while another process holds the database for writing."""
    try:
        with duckdb.connect(database, read_only=True) as connection:
            return {batch.key for batch in indexed_batches(connection, TABLES)}
    except duckdb.IOException as error:
        if "No such file" in str(error) or "does not exist" in str(error):
            return set()
        return None


@sensor(
    asset_selection=AssetSelection.groups(GROUP),
    minimum_interval_seconds=30,
    default_status=DefaultSensorStatus.RUNNING,
    description="Adds each new file of the batch folder (DEDUP_BATCHES) as a partition, and runs the "
    "first batch not yet in the index, one run at a time, in key order.",
)
def new_batches(context: SensorEvaluationContext, warehouse: DuckDBWarehouse):
    try:
        folder = folder_batches()
    except BatchError as error:
        return SkipReason(str(error))
    added = new_keys(context.instance, folder)
    partitions = [AddDynamicPartitionsRequest(BATCHES.name, added)] if added else []

    def skip(reason: str) -> SensorResult:
        return SensorResult(dynamic_partitions_requests=partitions, skip_reason=reason)

    keys = {*folder.keys(), *folder.collisions}
    unfinished = [
        run for run in context.instance.get_runs(RunsFilter(statuses=_UNFINISHED), limit=50)
        if run.tags.get("dagster/partition") in keys
    ]
    if unfinished:
        return skip(f"waiting for run {unfinished[0].run_id} (batch {unfinished[0].tags.get('dagster/partition')})")
    indexed = _indexed_keys(str(warehouse.database))
    if indexed is None:
        return skip(f"{warehouse.database} is open for writing in another process; trying again later")
    waiting = sorted(key for key in keys if key not in indexed)
    if not waiting:
        return skip(f"every batch of {folder.folder} is in the index")
    key = waiting[0]
    if key in folder.collisions:
        return skip(collision_message(key, folder.collisions[key], folder.folder) + " Later batches wait for it.")
    run_key = f"{key}@{_fingerprint(folder.batch(key))}"
    failed = context.instance.get_runs(
        RunsFilter(statuses=[DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED], tags={"dagster/run_key": run_key}),
        limit=1,
    )
    if failed:
        return skip(
            f"batch {key}'s run {failed[0].run_id} did not succeed; later batches wait for it. Fix the "
            f"batch (a changed file is run again) or run it by hand: {BATCH_COMMAND.format(key=key)}"
        )
    return SensorResult(
        run_requests=[RunRequest(run_key=run_key, partition_key=key)],
        dynamic_partitions_requests=partitions,
    )
