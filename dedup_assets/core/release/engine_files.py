"""The release's large files that the run's engine writes on its cluster (``Engine.release_files``):
which of them the Dagster node lists in the manifest, and which it writes itself. A release is
written either way: a file the cluster could not write, or that this node does not find where
the cluster says it wrote it, is written here, and the log says why and what to change."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

# what lets the workers write the large files: said when they could not
SHARED_OUTPUT = (
    "To have the cluster's workers write them, set output_dir (DEDUP_OUTPUT_DIR) to a path every node "
    "sees, on shared storage as the engine's dataset_root (DEDUP_DATASETS) is."
)


def accepted_files(
    cluster: Future, asked: list[str], output_dir: Path, log: Callable[[str], None]
) -> dict[str, list[dict]]:
    """The outputs (file, rows, sha256; a folder's part by part), by name, of the files of
    ``asked`` that the cluster's call (``cluster``, a future of its outputs by name) wrote and
    this node finds in ``output_dir``; the others, their leftovers removed, are the caller's to
    write here. Each is said in ``log``."""
    try:
        written = cluster.result()
    except Exception as error:  # the cluster's failure costs the release time, not the release
        log(f"manifest: the cluster's workers failed to write {', '.join(asked)} ({error}); writing them on this node.")
        written = {}
    accepted = {}
    for name in asked:
        outputs = written.get(name)
        missing = [output["file"] for output in outputs or () if not (output_dir / output["file"]).is_file()]
        if outputs is not None and not missing:
            rows = sum(output["rows"] for output in outputs)
            parts = f" in {len(outputs)} part{'s' if len(outputs) != 1 else ''}" if (output_dir / name).is_dir() else ""
            log(f"manifest: {name} written on the cluster, {rows:,} rows{parts}")
            accepted[name] = outputs
            continue
        if missing:
            log(
                f"manifest: the cluster's workers wrote {name}, but this node does not find {missing[0]} in "
                f"{output_dir}: they see another folder at that path. Writing it on this node. {SHARED_OUTPUT}"
            )
        remove_output(output_dir / name)
    return accepted


def remove_output(path: Path) -> None:
    """A release file or folder of parts, or what a call that failed half way left of it."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
