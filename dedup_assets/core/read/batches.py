"""Which batches a batch folder holds: each input file a reader reads is one batch, and so is each
subfolder. A batch's key is its name without the format's extensions (``2026-11-29.warc.gz`` is
``2026-11-29``); batches are ordered by key.

A key may hold any character a file name can (``k*``, ``k[1]``); the files and folders made for
a batch are named by :func:`key_path_name`, which spells out the others.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from ..util.errors import DedupError
from .registry import format_stem, matching_reader

# kept as they are in a name made from a key; so are letters, digits and combining marks (as
# in a decomposed é) of any script
_PATH_SAFE = set("-_.+=,@~ ")
# a batch release's lock and staging folder, and a payload's temporary file, add up to 40 bytes
# to the name, and a file system takes 255 in one name
MAX_PATH_NAME = 200


class BatchError(DedupError, ValueError):
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
    # keys that cannot name the batch's files and folders (key_path_name), with why
    refused: dict[str, str] = field(default_factory=dict)

    def keys(self) -> list[str]:
        return [batch.key for batch in self.batches]

    def blocked(self) -> list[str]:
        """The keys of entries that are refused: they cannot run, and later batches wait."""
        return sorted({*self.collisions, *self.refused})

    def refusal(self, key: str) -> str | None:
        """Why batch ``key`` cannot run, when it is refused."""
        if key in self.collisions:
            return collision_message(key, self.collisions[key], self.folder)
        return self.refused.get(key)

    def batch(self, key: str) -> Batch:
        """The batch with ``key``, refusing a key two entries share, one that cannot name its
        files, and a key with no entry."""
        refusal = self.refusal(key)
        if refusal:
            raise BatchError(refusal)
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
        """The keys before ``key``, refused ones included (they cannot be added either)."""
        return sorted(k for k in {*self.keys(), *self.blocked()} if k < key)


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


def key_path_name(key: str) -> str:
    """The name of what is made for batch ``key`` (its release folder, its payload file): the
    key, with each character but letters, digits, marks, ``-_.+=,@~`` and space spelled as
    ``%XX`` of its UTF-8 bytes, ``%`` too, so that two keys never give one name. Nothing in it
    is then a glob mark, a shell or URL character, or a character some file system refuses."""
    return "".join(
        char
        if char.isalnum() or char in _PATH_SAFE or unicodedata.category(char).startswith("M")
        else "".join(f"%{byte:02X}" for byte in char.encode("utf-8"))
        for char in key
    )


def _same_place(name: str) -> str:
    """What a name made from a key is on a file system that tells neither case nor Unicode
    normal forms apart (macOS, Windows): two keys with one such name would share a folder."""
    return unicodedata.normalize("NFC", name).casefold()


def _refusals(keys: dict[str, str], folder: Path) -> dict[str, str]:
    """For the keys (each with its entry's name) that cannot name their batch's files: why."""
    refused = {}
    by_place: dict[str, list[str]] = {}
    for key, entry in keys.items():
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:  # undecodable bytes: DuckDB and Dagster take text only
            refused[key] = (
                f"{folder / entry}: the name is not valid UTF-8, so it cannot be a batch key. "
                "Rename it with UTF-8 characters only."
            )
            continue
        name = key_path_name(key)
        if len(name.encode("utf-8")) > MAX_PATH_NAME:
            refused[key] = (
                f"{folder / entry}: batch key {key!r} is too long to name the batch's release "
                f"folder and payload file ({len(name.encode('utf-8'))} bytes as {name!r}, at most "
                f"{MAX_PATH_NAME}). Rename it with a shorter name."
            )
            continue
        by_place.setdefault(_same_place(name), []).append(key)
    for shared in by_place.values():
        for key in shared if len(shared) > 1 else ():
            entries = " and ".join(keys[other] for other in sorted(shared))
            refused[key] = (
                f"Batch keys {', '.join(repr(other) for other in sorted(shared))} ({entries} in "
                f"{folder}) differ only in case or in how a character is encoded, so their release "
                "folders and payload files would be one on a file system that does not tell them "
                "apart. Rename all but one of them."
            )
    return refused


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
    refused = _refusals({key: paths[0].name for key, paths in by_key.items() if key not in collisions}, folder)
    batches = tuple(
        sorted(Batch(key, paths[0]) for key, paths in by_key.items() if key not in collisions and key not in refused)
    )
    return BatchFolder(folder, batches, collisions, tuple(ignored), refused)
