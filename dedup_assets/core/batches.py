"""Which batches a batch folder holds: each input file a reader reads is one batch, and so is each
subfolder. A batch's key is its name without the format's extensions (``2026-11-29.warc.gz`` is
``2026-11-29``); batches are ordered by key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .readers.registry import format_stem, matching_reader


class BatchError(ValueError):
    """The batch folder, or one batch in it, cannot be used; the message says what to do."""


@dataclass(frozen=True, order=True)
class Batch:
    key: str
    path: Path


@dataclass(frozen=True)
class BatchFolder:
    """The batches in key order; keys two or more entries share (each refused), with their
    entries' names; and names that are no batch (left alone)."""

    folder: Path
    batches: tuple[Batch, ...]
    collisions: dict[str, tuple[str, ...]]
    ignored: tuple[str, ...]

    def keys(self) -> list[str]:
        return [batch.key for batch in self.batches]

    def batch(self, key: str) -> Batch:
        """The batch with ``key``, refusing a key two entries share and a key with no entry."""
        if key in self.collisions:
            raise BatchError(collision_message(key, self.collisions[key], self.folder))
        for batch in self.batches:
            if batch.key == key:
                return batch
        raise BatchError(
            f"No batch {key!r} in {self.folder}: it holds "
            + (", ".join(self.keys()) or "no batch")
            + ". Put the batch's file (or folder) there, named after its key, e.g. "
            f"{key}.jsonl.gz."
        )

    def earlier(self, key: str) -> list[str]:
        """The keys before ``key``, colliding ones included (they cannot be added either)."""
        return sorted(k for k in {*self.keys(), *self.collisions} if k < key)


def batch_key(path: Path) -> str | None:
    """The key of a folder entry: a subfolder's name, or a readable file's name without its
    format's extensions; None for anything else (hidden names, other files)."""
    if path.name.startswith("."):
        return None
    if path.is_dir():
        return path.name
    if matching_reader(path) is None:
        return None
    return format_stem(path.name) or None


def collision_message(key: str, names: tuple[str, ...], folder: Path) -> str:
    return (
        f"Batch key {key!r} names more than one entry in {folder}: {' and '.join(names)}. A key "
        "must name one batch: rename or remove all but one of them."
    )


def find_batches(folder: Path) -> BatchFolder:
    """The batches of ``folder`` (none when it does not exist yet)."""
    folder = folder.expanduser()
    if not folder.is_dir():
        if folder.exists():
            raise BatchError(f"{folder}: DEDUP_BATCHES must name a folder of batch files, not a file.")
        return BatchFolder(folder, (), {}, ())
    by_key: dict[str, list[Path]] = {}
    ignored = []
    for path in sorted(folder.iterdir()):
        key = batch_key(path)
        if key is None:
            ignored.append(path.name)
        else:
            by_key.setdefault(key, []).append(path)
    collisions = {key: tuple(path.name for path in paths) for key, paths in by_key.items() if len(paths) > 1}
    batches = tuple(sorted(Batch(key, paths[0]) for key, paths in by_key.items() if key not in collisions))
    return BatchFolder(folder, batches, collisions, tuple(ignored))
