"""The batch folder's files as Dagster partitions: one dynamic partition per batch key.

The keys are added to the Dagster instance whenever the definitions are loaded (so `dagster
asset materialize --partition KEY` finds a file put in the folder a moment ago, with nothing to
set up) and by the ``new_batches`` sensor under `dagster dev`, whose definitions stay loaded.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from dagster import AssetsDefinition, DagsterInstance, DynamicPartitionsDefinition

from .core.batches import BatchError, BatchFolder, find_batches

BATCHES = DynamicPartitionsDefinition(name="batches")
DEFAULT_BATCHES_DIR = "batches"
_log = logging.getLogger("dedup_assets")


def batches_folder() -> Path:
    """The batch folder: env DEDUP_BATCHES, else ``batches`` in the working directory."""
    return Path(os.environ.get("DEDUP_BATCHES") or DEFAULT_BATCHES_DIR).expanduser().resolve()


def folder_batches() -> BatchFolder:
    return find_batches(batches_folder())


def partition_keys(folder: BatchFolder) -> list[str]:
    """Every key of the folder, refused ones too: running one then fails saying why (naming
    both entries of a collision), instead of Dagster's word that the partition does not exist."""
    return sorted({*folder.keys(), *folder.blocked()})


def new_keys(instance: DagsterInstance, folder: BatchFolder) -> list[str]:
    known = set(instance.get_dynamic_partitions(BATCHES.name))
    return [key for key in partition_keys(folder) if key not in known]


def register_folder_batches() -> None:
    """Add the folder's new keys to the instance of DAGSTER_HOME, when it is set. Never fails the
    load of the definitions: the one-shot graph does not need the batches."""
    try:
        folder = folder_batches()
    except BatchError as error:
        _log.warning(str(error))
        return
    if not partition_keys(folder):
        return
    if not os.environ.get("DAGSTER_HOME"):
        _log.warning(
            f"{folder.folder} holds batches, but DAGSTER_HOME is not set, so they are not registered "
            "as partitions and `--partition KEY` will not find them. Run `. ./env.sh` first (it sets "
            "DAGSTER_HOME), or use `make dev`."
        )
        return
    try:
        with DagsterInstance.get() as instance:
            added = new_keys(instance, folder)
            if added:
                instance.add_dynamic_partitions(BATCHES.name, added)
    except Exception as error:  # a broken instance is Dagster's to report; the definitions still load
        _log.warning(f"could not register the batches of {folder.folder} as partitions: {error}")


def warn_if_partition_missing(argv: list[str], batch_assets: list[AssetsDefinition]) -> None:
    """Dagster's CLI refuses, with a traceback, a selection that takes in a batch asset without
    `--partition` (such as `--select '*'`); say first what to select instead. Nothing upstream
    or downstream of a one-shot asset is a batch asset, so only `*` alone, the group or a batch
    asset's name can take one in."""
    if len(argv) < 3 or Path(argv[0]).name != "dagster" or argv[1:3] != ["asset", "materialize"]:
        return
    if any(arg.startswith("--partition") for arg in argv):
        return
    selection = next((argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "--select"), None)
    if selection is None:
        return
    names = {part.strip().strip("*+") for part in selection.split(",")}
    batch_names = {key.to_user_string() for asset in batch_assets for key in asset.keys}
    if selection.strip() == "*" or "group:incremental" in names or names & batch_names:
        _log.warning(
            f"--select {selection!r} takes in the incremental assets, which run one batch at a time "
            "and need --partition KEY. For the one-shot graph use --select 'group:deduplication'; "
            "for a batch, --select 'group:incremental' --partition KEY."
        )
