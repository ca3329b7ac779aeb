"""How a release reaches its folder: written whole in a staging folder beside it, flushed to
disk, moved into the folder of releases and then linked as the output folder in one atomic
rename, under a lock, so that a reader who resolves the output folder once reads one whole
release (``pointer.py`` says where each part lives).

Beside an output folder ``out`` live, hidden:

- ``.out.lock``, locked by the one run writing a release (it names that run);
- ``.out.staging-<pid>``, the release being written;
- ``.out.releases/``, the releases, the one ``out`` links to and those before it.

A killed run can leave a staging folder behind, or a link not yet renamed into place
(``.out.pointer-<pid>``), or a release not yet linked or half removed; the next run, once it holds
the lock, deletes them and says so. It also takes over what an older version left: a release
folder in place of the link (moved into ``.out.releases``), and its ``.out.previous-<pid>`` (a
release moved aside by a killed switch: put back first).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import duckdb

from ..read.ingest import confirmed_input
from ..lsh.candidates import BucketPressure
from ..storage.places import OUTPUT_DIR, said_of_the_place
from ..read import InputFile
from ..util.errors import DedupError
from .files import (
    BATCHES_FOLDER, KEPT_FOLDERS, MANIFEST_FILE, TUNING_FOLDER, is_release, write_files_and_manifest, write_release,
)
from .pointer import (
    adopt, current_id, leftovers, pointer_path, prune, releases_folder, remove, restore, share_kept, switch_in, sync,
)
from ..read.batches import key_path_name
from ..settings.choices import DEFAULT_COMPRESSION, RELEASES_KEPT
from ..settings.model import Settings
from ..storage.tables import Tables

if TYPE_CHECKING:  # the engines' layer runs steps whose release is written here
    from ..pipeline.engines import Engine

Result = TypeVar("Result")


class ReleaseError(DedupError, RuntimeError):
    """The release cannot be written where it was asked to go; the message says what to do."""


class ReleaseLocked(ReleaseError):
    """Another run is writing a release to the same folder."""


def _sibling(output_dir: Path, kind: str) -> Path:
    return output_dir.with_name(f".{output_dir.name}.{kind}")


def remains(output_dir: Path) -> list[Path]:
    """What a killed run left beside the output folder and in its releases folder (and nothing
    of another folder's)."""
    left = re.compile(rf"\.{re.escape(output_dir.name)}\.(staging|previous|pointer)-\d+")
    if not output_dir.parent.is_dir():
        return []
    beside = [path for path in output_dir.parent.iterdir() if left.fullmatch(path.name)]
    return sorted(beside + leftovers(output_dir))


@contextmanager
def release_lock(output_dir: Path, holder: dict) -> Iterator[None]:
    """Hold the output folder's lock; another holder fails at once, named. The lock is the
    kernel's (``flock``), so a killed holder releases it with its process."""
    lock_path = _sibling(output_dir, "lock")
    handle = open(lock_path, "a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            raise ReleaseLocked(
                f"Another run is writing a release to {output_dir} ({_describe(handle.read())}). "
                "Wait for it to finish, or set DEDUP_OUTPUT_DIR (output_dir) to another folder."
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(holder, sort_keys=True))
        handle.flush()
        yield
    finally:
        handle.close()


def _describe(text: str) -> str:
    try:
        holder = json.loads(text)
    except json.JSONDecodeError:
        return "its lock file names no holder"
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(holder.get("started", 0)))
    return f"process {holder.get('pid')} on {holder.get('host')}, since {started}, database {holder.get('database')}"


def holder_for(database: str) -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(), "started": int(time.time()), "database": database}


def publish(
    output_dir: Path, write: Callable[[Path], Result], database: str, log: Callable[[str], None],
    keep: int = RELEASES_KEPT,
) -> Result:
    """Run ``write(folder)`` on an empty staging folder and make the result the release
    ``output_dir`` links to, keeping the newest ``keep`` releases; returns what ``write``
    returned. Refuses an existing folder that is not a release, so that a mistyped output path
    never takes unrelated files away."""
    output_dir = pointer_path(output_dir)
    with said_of_the_place(output_dir, OUTPUT_DIR, ReleaseError):
        output_dir.parent.mkdir(parents=True, exist_ok=True)
        with release_lock(output_dir, holder_for(database)):
            _ready(output_dir, log)
            return _switched_in(output_dir, write, keep)


def _switched_in(output_dir: Path, write: Callable[[Path], Result], keep: int) -> Result:
    """Under the lock: ``write`` on an empty staging folder, made the current release; the
    newest ``keep`` releases kept."""
    staging = _sibling(output_dir, f"staging-{os.getpid()}")
    staging.mkdir()
    try:
        result = write(staging)
        switch_in(staging, output_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # a kill skips this; the next run cleans up
        raise
    prune(output_dir, keep)
    return result


def _ready(output_dir: Path, log: Callable[[str], None]) -> None:
    """Under the lock: clean what a killed run left, refuse a folder a release must not replace,
    and make an older version's release folder the first of the releases."""
    _clean_remains(output_dir, log)
    _refuse_unreplaceable(output_dir)
    if _older_versions(output_dir):
        release = adopt(output_dir)
        log(
            f"moved the release in {output_dir} to {releases_folder(output_dir).name}/{release}, which "
            f"{output_dir.name} now links to: each release has a folder of its own there"
        )


def _ready_root(output_dir: Path, name: str, log: Callable[[str], None]) -> Path:
    """:func:`_ready`, then the kept folder ``name`` shared and linked from the current release
    (an empty release when there is none yet, for a folder of batch releases only). Returns the
    shared folder."""
    _ready(output_dir, log)
    if not output_dir.exists():  # no release at all (one left without a link is linked by now)
        _switched_in(output_dir, lambda folder: None, RELEASES_KEPT)
    share_kept(releases_folder(output_dir) / current_id(output_dir), name)
    return releases_folder(output_dir) / name


# folders a release, which replaces its whole folder, must never be: the root, the system's own,
# and where every user's files live
_SYSTEM_FOLDERS = frozenset(
    Path(name) for name in (
        "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/media", "/mnt", "/opt", "/proc",
        "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var",
    )
)


def check_output_folder(output_dir: Path) -> None:
    """Refuse, when a run starts and before any step, an output folder the release could not
    replace: the root or a system folder, the home folder, a file, a folder of other files, a
    mount point, or one under a folder that cannot be written. (The manifest step finds the
    same, but only after every other step has run.)"""
    folder = pointer_path(output_dir)
    home = Path.home().resolve()
    if folder in _SYSTEM_FOLDERS or folder == home:
        what = "the root folder" if folder == Path("/") else "your home folder" if folder == home else "a system folder"
        raise ReleaseError(
            f"{output_dir} is {what}, and a release replaces its whole folder. Set DEDUP_OUTPUT_DIR "
            f"(output_dir) to a folder of the release's own, e.g. {home / 'dedup-release'}."
        )
    with said_of_the_place(folder, OUTPUT_DIR, ReleaseError):
        _refuse_unreplaceable(folder)
    # the release is written beside the folder (its staging folder, releases and lock), which
    # the run creates below the nearest folder that exists
    beside = next(parent for parent in folder.parents if parent.exists())
    if not os.access(beside, os.W_OK | os.X_OK):
        raise ReleaseError(
            f"{output_dir}: {beside} cannot be written by this user, and the release is written there "
            "and then switched in. Fix the folder's permissions, or set DEDUP_OUTPUT_DIR (output_dir) to "
            "a folder you can write."
        )


def _refuse_unreplaceable(output_dir: Path) -> None:
    """Refuse an output path that a release must not, or cannot, replace."""
    if not output_dir.exists():
        return
    if not output_dir.is_dir():
        raise ReleaseError(
            f"{output_dir} is a file, not a folder. Set DEDUP_OUTPUT_DIR (output_dir) to a folder."
        )
    if os.path.ismount(output_dir):
        raise ReleaseError(
            f"{output_dir} is a mount point, which cannot be swapped with the new release written "
            f"beside it. Set DEDUP_OUTPUT_DIR (output_dir) to a folder inside it, e.g. {output_dir / 'release'}."
        )
    if not is_release(output_dir):
        raise ReleaseError(
            f"{output_dir} exists and is not a dedup-assets release (its files are not exactly "
            f"those its {MANIFEST_FILE} lists). A release replaces the whole folder: move "
            "those files away, or set DEDUP_OUTPUT_DIR (output_dir) to a new or empty folder."
        )


def _clean_remains(output_dir: Path, log: Callable[[str], None]) -> None:
    """Put back what a killed run had moved, link the newest release where a kill left no link,
    then delete what it left."""
    releases = releases_folder(output_dir)
    previous = [path for path in remains(output_dir) if ".previous-" in path.name]
    # an older version's switch by two renames, killed between them
    if previous and not os.path.lexists(output_dir) and not releases.exists():
        previous[0].rename(output_dir)
        log(f"put back the release {previous[0].name} that a killed run had moved aside")
    linked = restore(output_dir)
    if linked:
        log(f"linked {output_dir} to the newest release, {releases.name}/{linked}, as a killed run had left no link")
    left = remains(output_dir)
    for path in left:  # an older version's kill after it moved the kept folders into the new release
        moved = _put_back_kept(path, output_dir if _older_versions(output_dir) else releases)
        if moved:
            log(f"put back {', '.join(f'{name}/' for name in moved)} that a killed run had moved into {path.name}")
    for path in left:
        remove(path)
    if left:
        log(f"removed what a killed run left beside {output_dir}: {', '.join(_named(path, output_dir) for path in left)}")
    current = current_id(output_dir)
    for name in KEPT_FOLDERS if current else ():  # put back above, or a conversion killed part way
        if (releases / name).is_dir() or (releases / current / name).is_dir():
            share_kept(releases / current, name)


def _older_versions(output_dir: Path) -> bool:
    """Whether the output folder is a folder holding the release, as an older version left it."""
    return output_dir.is_dir() and not output_dir.is_symlink()


def _named(path: Path, output_dir: Path) -> str:
    return str(path.relative_to(output_dir.parent))


def _put_back_kept(folder: Path, home: Path) -> list[str]:
    """Move the kept folders that an older version's switch, which did not happen, had moved
    into ``folder`` back to ``home``, where they live now; the names of those moved."""
    moved = []
    for name in KEPT_FOLDERS:
        if not (folder / name).is_dir() or (folder / name).is_symlink():
            continue
        if (home / name).is_dir() and not (home / name).is_symlink() and not any((home / name).iterdir()):
            (home / name).rmdir()  # an empty one made meanwhile
        if not os.path.lexists(home / name):
            home.mkdir(exist_ok=True)
            (folder / name).rename(home / name)
            moved.append(name)
    return moved


def publish_release(
    connection: duckdb.DuckDBPyConnection,
    tables: Tables,
    output_dir: Path,
    settings: Settings,
    input_file: InputFile,
    pressure: BucketPressure,
    *,
    database: str,
    log: Callable[[str], None],
    settings_sources: dict,
    engine: Engine | None = None,
) -> dict:
    """:func:`write_release` through :func:`publish`: the manifest of the release switched in,
    its large files written where ``engine`` writes them (None: here). A release whose input
    has changed since documents read it is refused before the switch
    (:func:`ingest.confirmed_input`)."""
    return publish(
        output_dir,
        lambda folder: confirmed_input(
            input_file, settings.source_format,
            write_release(connection, tables, folder, settings, input_file, pressure, settings_sources, log, engine),
            log,
        ),
        database,
        log,
        settings.releases_kept,
    )


def publish_batch_release(
    connection: duckdb.DuckDBPyConnection,
    output_root: Path,
    key: str,
    queries: dict[str, str],
    manifest: dict,
    *,
    database: str,
    log: Callable[[str], None],
    compression: str = DEFAULT_COMPRESSION,
    keep: int = RELEASES_KEPT,
) -> dict:
    """A batch's release files (each query binds the key as $batch_key, Parquet compressed with
    ``compression``) into ``output_root/batches/NAME`` (:func:`key_path_name`) through
    :func:`publish`, keeping the newest ``keep`` of them, holding the output root's lock too, so
    that a one-shot release never switches meanwhile."""
    output_root = pointer_path(output_root)
    with said_of_the_place(output_root, OUTPUT_DIR, ReleaseError):
        output_root.parent.mkdir(parents=True, exist_ok=True)
        with release_lock(output_root, holder_for(database)):
            batches = _ready_root(output_root, BATCHES_FOLDER, log)
            return publish(
                batches / key_path_name(key),
                lambda folder: write_files_and_manifest(connection, queries, {"batch_key": key}, folder, manifest, compression),
                database,
                log,
                keep,
            )


def publish_tuning_files(
    output_root: Path,
    files: dict[str, Callable[[Path], object]],
    *,
    database: str,
    log: Callable[[str], None],
) -> Path:
    """Write each file of ``files`` into ``output_root/tuning`` with its function: to a temporary
    name, flushed, then renamed into place, so a reader finds the old file or the new one. Holds
    the output root's lock, so a one-shot release never switches meanwhile. Returns the folder,
    as ``output_root/tuning``."""
    output_root = pointer_path(output_root)
    with said_of_the_place(output_root, OUTPUT_DIR, ReleaseError):
        # the same folders as a release: a folder the next release could not replace is refused now
        _refuse_unreplaceable(output_root)
        output_root.parent.mkdir(parents=True, exist_ok=True)
        with release_lock(output_root, holder_for(database)):
            folder = _ready_root(output_root, TUNING_FOLDER, log)
            left = sorted(folder.glob(".*.tmp-*"))
            for path in left:  # under the lock, only a killed run's
                path.unlink()
            if left:
                log(f"removed what a killed run left in {folder}: {', '.join(path.name for path in left)}")
            for name, write in files.items():
                temporary = folder / f".{name}.tmp-{os.getpid()}"
                try:
                    write(temporary)
                    sync(temporary)
                    os.replace(temporary, folder / name)
                finally:
                    temporary.unlink(missing_ok=True)
            sync(folder)
    return output_root / TUNING_FOLDER
