"""The batch folder's files as Dagster partitions: one dynamic partition per batch key.

Loading the definitions registers nothing: the keys are added to the Dagster instance by
``dedup register-batches`` (before `dagster asset materialize --partition KEY`) and by the
``new_batches`` sensor under `dagster dev`.
"""

from __future__ import annotations

from pathlib import Path

from dagster import DagsterInstance, DynamicPartitionsDefinition

from ..core.read.batches import BatchFolder, find_batches
from ..launch.environment import BATCHES as BATCHES_FOLDER

BATCHES = DynamicPartitionsDefinition(name="batches")


def batches_folder() -> Path:
    """The batch folder: env DEDUP_BATCHES, else ``batches`` in the working directory."""
    return BATCHES_FOLDER.path()


def folder_batches() -> BatchFolder:
    return find_batches(batches_folder())


def partition_keys(folder: BatchFolder) -> list[str]:
    """Every key of the folder, refused ones too: running one then fails saying why (naming
    both entries of a collision), instead of Dagster's word that the partition does not exist."""
    return sorted({*folder.keys(), *folder.blocked()})


def new_keys(instance: DagsterInstance, folder: BatchFolder) -> list[str]:
    known = set(instance.get_dynamic_partitions(BATCHES.name))
    return [key for key in partition_keys(folder) if key not in known]


def register_folder_batches(instance: DagsterInstance) -> tuple[BatchFolder, list[str]]:
    """Add the batch folder's new keys to ``instance``: the folder, and the keys added (raises
    BatchError when the folder cannot be read)."""
    folder = folder_batches()
    added = new_keys(instance, folder)
    if added:
        instance.add_dynamic_partitions(BATCHES.name, added)
    return folder, added
