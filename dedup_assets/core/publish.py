"""How a release reaches its folder: written whole in a staging folder beside it, flushed to
disk, then switched in at once, under a lock, so that a reader of the output folder always finds
one complete release (old or new) and never a mix.

Beside an output folder ``out`` live, hidden:

- ``.out.lock``, locked by the one run writing a release (it names that run);
- ``.out.staging-<pid>``, the release being written;
- ``.out.previous-<pid>``, the release just replaced, until it is deleted.

A killed run can leave the last two behind; the next run, once it holds the lock, deletes them and
says so. The switch is one atomic exchange of the two folders (Linux ``renameat2``); where the
file system cannot exchange, two renames, and a kill between them is repaired by the next run.
"""

from __future__ import annotations

import ctypes
import errno
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
from typing import TypeVar

import duckdb

from .ingest import confirmed_input
from .lsh import BucketPressure
from .places import OUTPUT_DIR, said_of_the_place
from .readers import InputFile
from .errors import DedupError
from .release import (
    BATCHES_FOLDER, KEPT_FOLDERS, MANIFEST_FILE, TUNING_FOLDER, is_release, write_files_and_manifest, write_release,
)
from .batches import key_path_name
from .settings import Settings
from .tables import Tables

Result = TypeVar("Result")
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


class ReleaseError(DedupError, RuntimeError):
    """The release cannot be written where it was asked to go; the message says what to do."""


class ReleaseLocked(ReleaseError):
    """Another run is writing a release to the same folder."""


def _sibling(output_dir: Path, kind: str) -> Path:
    return output_dir.with_name(f".{output_dir.name}.{kind}")


def remains(output_dir: Path) -> list[Path]:
    """What a killed run left beside the output folder (and nothing of another folder's)."""
    left = re.compile(rf"\.{re.escape(output_dir.name)}\.(staging|previous)-\d+")
    if not output_dir.parent.is_dir():
        return []
    return sorted(path for path in output_dir.parent.iterdir() if left.fullmatch(path.name))


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
    output_dir: Path, write: Callable[[Path], Result], database: str, log: Callable[[str], None]
) -> Result:
    """Run ``write(folder)`` on an empty staging folder and switch the result in as
    ``output_dir``; returns what ``write`` returned. Refuses an existing folder that is not a
    release, so that a mistyped output path never replaces unrelated files."""
    # a link's target is the folder swapped, so the link keeps pointing at the release, and two
    # spellings of one folder share one lock
    output_dir = output_dir.expanduser().resolve()
    with said_of_the_place(output_dir, OUTPUT_DIR, ReleaseError):
        output_dir.parent.mkdir(parents=True, exist_ok=True)
        with release_lock(output_dir, holder_for(database)):
            _clean_remains(output_dir, log)
            _refuse_unreplaceable(output_dir)
            staging = _sibling(output_dir, f"staging-{os.getpid()}")
            staging.mkdir()
            try:
                result = write(staging)
                _sync_tree(staging)
                _switch(staging, output_dir)
            except BaseException:
                _put_back_kept(staging, output_dir)
                shutil.rmtree(staging, ignore_errors=True)  # a kill skips this; the next run cleans up
                raise
            return result


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
    folder = output_dir.expanduser().resolve()
    home = Path.home().resolve()
    if folder in _SYSTEM_FOLDERS or folder == home:
        what = "the root folder" if folder == Path("/") else "your home folder" if folder == home else "a system folder"
        raise ReleaseError(
            f"{output_dir} is {what}, and a release replaces its whole folder. Set DEDUP_OUTPUT_DIR "
            f"(output_dir) to a folder of the release's own, e.g. {home / 'dedup-release'}."
        )
    with said_of_the_place(folder, OUTPUT_DIR, ReleaseError):
        _refuse_unreplaceable(folder)
    # the release is written beside the folder (its staging folder and lock), which the run
    # creates below the nearest folder that exists
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
    """Delete what a killed run left; a release that was moved aside but never replaced (a kill
    between the two renames) is put back first."""
    left = remains(output_dir)
    previous = [path for path in left if ".previous-" in path.name]
    if previous and not output_dir.exists():
        previous[0].rename(output_dir)
        log(f"put back the release {previous[0].name} that a killed run had moved aside")
        left.remove(previous[0])
    for path in left:  # a kill after the kept folders were moved into the new release
        moved = _put_back_kept(path, output_dir)
        if moved:
            log(f"put back {', '.join(f'{name}/' for name in moved)} that a killed run had moved into {path.name}")
    for path in left:
        shutil.rmtree(path)
    if left:
        log(f"removed what a killed run left beside {output_dir}: {', '.join(path.name for path in left)}")


def _put_back_kept(folder: Path, output_dir: Path) -> list[str]:
    """Move the kept folders that a switch which did not happen had moved into ``folder`` back
    into the output folder; the names of those moved."""
    moved = []
    for name in KEPT_FOLDERS:
        if (folder / name).is_dir() and output_dir.is_dir() and not (output_dir / name).exists():
            (folder / name).rename(output_dir / name)
            moved.append(name)
    return moved


def _sync_tree(folder: Path) -> None:
    """Every file of the folder and of the folders in it (the deduped documents' parts), and the
    folders themselves, on disk before it is switched in, so a power cut cannot leave a
    switched-in release with empty files."""
    for path in folder.iterdir():
        if path.is_dir() and not path.is_symlink():
            _sync_tree(path)
        else:
            _sync(path)
    _sync(folder)


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _switch(staging: Path, output_dir: Path) -> None:
    if not output_dir.exists():
        staging.rename(output_dir)
        _sync(output_dir.parent)
        return
    # the kept folders live inside the one-shot release folder and stay when it is replaced
    for name in KEPT_FOLDERS:
        if (output_dir / name).is_dir():
            (output_dir / name).rename(staging / name)
    if _exchange(staging, output_dir):
        shutil.rmtree(staging)  # now holds the replaced release
    else:
        previous = _sibling(output_dir, f"previous-{os.getpid()}")
        output_dir.rename(previous)
        try:
            staging.rename(output_dir)
        except BaseException:
            previous.rename(output_dir)
            raise
        shutil.rmtree(previous)
    _sync(output_dir.parent)


def _exchange(first: Path, second: Path) -> bool:
    """Swap two folders in one step; False where the system or file system cannot."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(second))


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
) -> dict:
    """:func:`write_release` through :func:`publish`: the manifest of the release switched in. A
    release whose input has changed since documents read it is refused before the switch
    (:func:`ingest.confirmed_input`)."""
    return publish(
        output_dir,
        lambda folder: confirmed_input(
            input_file, settings.source_format,
            write_release(connection, tables, folder, settings, input_file, pressure, settings_sources, log),
        ),
        database,
        log,
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
    compression: str = "snappy",
) -> dict:
    """A batch's release files (each query binds the key as $batch_key, Parquet compressed with
    ``compression``) into ``output_root/batches/NAME``
    (:func:`key_path_name`) through :func:`publish`, holding the output root's lock too: a
    one-shot release, which
    carries the batch releases over when it replaces the root, never switches meanwhile."""
    output_root = output_root.expanduser().resolve()
    with said_of_the_place(output_root, OUTPUT_DIR, ReleaseError):
        output_root.parent.mkdir(parents=True, exist_ok=True)
        with release_lock(output_root, holder_for(database)):
            return publish(
                output_root / BATCHES_FOLDER / key_path_name(key),
                lambda folder: write_files_and_manifest(connection, queries, {"batch_key": key}, folder, manifest, compression),
                database,
                log,
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
    the output root's lock, so a one-shot release, which carries the folder over when it replaces
    the root, never switches meanwhile. Returns the folder."""
    output_root = output_root.expanduser().resolve()
    folder = output_root / TUNING_FOLDER
    with said_of_the_place(output_root, OUTPUT_DIR, ReleaseError):
        # the same folders as a release: a folder the next release could not replace is refused now
        _refuse_unreplaceable(output_root)
        output_root.parent.mkdir(parents=True, exist_ok=True)
        with release_lock(output_root, holder_for(database)):
            _clean_remains(output_root, log)  # a release a killed switch moved aside comes back first
            folder.mkdir(parents=True, exist_ok=True)
            left = sorted(folder.glob(".*.tmp-*"))
            for path in left:  # under the lock, only a killed run's
                path.unlink()
            if left:
                log(f"removed what a killed run left in {folder}: {', '.join(path.name for path in left)}")
            for name, write in files.items():
                temporary = folder / f".{name}.tmp-{os.getpid()}"
                try:
                    write(temporary)
                    _sync(temporary)
                    os.replace(temporary, folder / name)
                finally:
                    temporary.unlink(missing_ok=True)
            _sync(folder)
    return folder
