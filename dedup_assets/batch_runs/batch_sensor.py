"""The ``new_batches`` sensor: under `dagster dev`, new files in the batch folder become
partitions, and the batches not yet in the index are run one at a time, in key order."""

from __future__ import annotations

import json
from pathlib import Path

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

from ..assets.batch_graph import GROUP, TABLES
from ..core.read.batches import Batch, BatchError, key_path_name
from ..core.incremental.batch_order import batch_command, forget_command
from ..core.incremental.index_tables import indexed_batches
from ..core.release.files import BATCHES_FOLDER, MANIFEST_FILE
from ..settings_resource import DedupSettings
from ..stored_tables.warehouse import DuckDBWarehouse
from .batch_partitions import BATCHES, folder_batches, new_keys, partition_keys

VERSION_TAG = "dedup/batch_file"
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


def _indexed(database: str) -> dict[str, str] | None:
    """Each indexed batch's input sha256, in key order; None while another process holds the
    database for writing."""
    if not Path(database).expanduser().is_file():
        return {}
    try:
        with duckdb.connect(database, read_only=True) as connection:
            return {batch.key: batch.input_sha256 for batch in indexed_batches(connection, TABLES)}
    except duckdb.IOException:
        return None


def _released(output_dir: Path, key: str, input_sha256: str) -> bool:
    """Whether batch ``key``'s release is written, for the input the index holds: the run adds a
    batch to the index first and then writes its release."""
    try:
        release = output_dir / BATCHES_FOLDER / key_path_name(key)
        manifest = json.loads((release / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return manifest.get("input", {}).get("sha256") == input_sha256


@sensor(
    asset_selection=AssetSelection.groups(GROUP),
    minimum_interval_seconds=30,
    default_status=DefaultSensorStatus.RUNNING,
    description="Adds each new file of the batch folder (DEDUP_BATCHES) as a partition, and runs the "
    "first batch not yet in the index (or the latest, if its release was not written), one run "
    "at a time, in key order.",
)
def new_batches(context: SensorEvaluationContext, dedup: DedupSettings, warehouse: DuckDBWarehouse):
    try:
        folder = folder_batches()
    except BatchError as error:
        return SkipReason(str(error))
    ignored = f" (not batches: {', '.join(folder.ignored)})" if folder.ignored else ""
    keys = partition_keys(folder)
    if not keys:
        return SkipReason(f"{folder.folder} holds no batch{ignored}")
    added = new_keys(context.instance, folder)
    partitions = [AddDynamicPartitionsRequest(BATCHES.name, added)] if added else []

    def skip(reason: str) -> SensorResult:
        return SensorResult(dynamic_partitions_requests=partitions, skip_reason=reason)

    unfinished = [
        run for run in context.instance.get_runs(RunsFilter(statuses=_UNFINISHED), limit=50)
        if run.tags.get("dagster/partition") in keys
    ]
    if unfinished:
        return skip(f"waiting for run {unfinished[0].run_id} (batch {unfinished[0].tags.get('dagster/partition')})")
    indexed = _indexed(str(warehouse.path))
    if indexed is None:
        return skip(f"{warehouse.path} is open for writing in another process; trying again later")
    latest = max(indexed, default=None)
    waiting = [key for key in keys if key not in indexed]
    if latest in keys and not _released(dedup.output_folder(), latest, indexed[latest]):
        key = latest  # added, but its run failed before its release was written
    elif not waiting:
        return skip(f"every batch of {folder.folder} is in the index{ignored}")
    else:
        key = waiting[0]
    if latest is not None and key < latest:
        return skip(
            f"batch {key} sorts before batches already in the index (up to {latest}), so it cannot be "
            f"added after them. Take them out with `{forget_command(key)}` to add them all again in "
            f"key order, or move batch {key} out of {folder.folder}."
        )
    refusal = folder.refusal(key)
    if refusal:
        return skip(refusal + " Later batches wait for it.")
    # the index decides what is done; this tag lets a failed run hold its batch back until the
    # file changes (and a batch taken out with forget-batches runs again)
    version = f"{key}@{_fingerprint(folder.batch(key))}"
    last = context.instance.get_runs(RunsFilter(tags={VERSION_TAG: version}), limit=1)
    if last and last[0].status in (DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED):
        return skip(
            f"batch {key}'s run {last[0].run_id} did not succeed; later batches wait for it. Fix the "
            f"batch (a changed file is run again) or run it by hand: {batch_command(key)}"
        )
    return SensorResult(
        run_requests=[RunRequest(partition_key=key, tags={VERSION_TAG: version})],
        dynamic_partitions_requests=partitions,
    )
