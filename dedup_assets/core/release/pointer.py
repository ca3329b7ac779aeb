"""The output folder as a link to its current release, so that a reader who resolves it once
reads one whole release for as long as it likes.

Beside an output folder ``out`` (``publish.py`` writes and locks; this module places):

- ``out``, a link to ``.out.releases/ID``, the current release. It is replaced in one atomic
  rename: a new link is made as ``.out.pointer-<pid>`` and renamed over it;
- ``.out.releases/ID``, each release: written whole in a staging folder, flushed, moved here, and
  never changed after (but for a link to a kept folder made later). The newest ``releases_kept``
  stay, the current one always; older ones are removed by a run that publishes, under the lock;
- ``.out.releases/batches`` and ``.out.releases/tuning``, the kept folders. The batch releases
  and the parameter sweep write them in place, independently of the one-shot release, so they
  live beside the releases and each release links to them (``ID/batches -> ../batches``): every
  release, the current one and those a reader holds, reaches the same ones, and publishing a
  release never moves them.

An ID is a counter, one more than the highest in the folder, then the UTC time it was made
(``000042-20261206T062547Z``): IDs sort in the order published whatever the clock does, and say
when. A release folder of an older version (``out`` a folder holding the release) is moved into
``.out.releases`` by one exchange with the new link, so a reader finds a whole release throughout.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
import time
from pathlib import Path

from .files import KEPT_FOLDERS

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_ID = re.compile(r"(\d{6,})-\d{8}T\d{6}Z")
_RELEASES = re.compile(r"\.(.+)\.releases")
# a release being removed: renamed first, so that a kill part way leaves a name the next run
# removes, never half a release under its ID
_REMOVING = ".removing-"


def releases_folder(output_dir: Path) -> Path:
    return output_dir.with_name(f".{output_dir.name}.releases")


def pointer_path(output_dir: Path) -> Path:
    """Where the output folder's link is: the folders above it resolved, and a link of the user's
    in its place followed (the releases go where it points, and two spellings of one folder
    share one lock), but not our own link. A release of ours stands for the output folder that
    links to it: a caller that resolved the output folder's path gets it."""
    path = Path(os.path.abspath(output_dir.expanduser()))
    for _ in range(40):  # as the kernel does, a longer chain of links is a loop
        path = path.parent.resolve() / path.name
        releases = _RELEASES.fullmatch(path.parent.name)
        if releases and _ID.fullmatch(path.name):
            return path.parent.with_name(releases[1])
        if not path.is_symlink() or current_id(path) is not None:
            return path
        path = Path(os.path.abspath(path.parent / os.readlink(path)))
    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(output_dir))


def current_id(output_dir: Path) -> str | None:
    """The ID of the release the output folder links to; None when it is not our link."""
    try:
        target = os.readlink(output_dir)
    except OSError:
        return None
    folder, _, name = target.partition("/")
    return name if folder == releases_folder(output_dir).name and _ID.fullmatch(name) else None


def release_ids(output_dir: Path) -> list[str]:
    """The IDs of the releases kept beside the output folder, oldest first."""
    releases = releases_folder(output_dir)
    if not releases.is_dir():
        return []
    found = [path.name for path in releases.iterdir() if _ID.fullmatch(path.name) and not path.is_symlink()]
    return sorted(found, key=_counter)


def _counter(release_id: str) -> int:
    return int(_ID.fullmatch(release_id)[1])


def leftovers(output_dir: Path) -> list[Path]:
    """What a killed run left in the releases folder: a release being removed, a link of a
    conversion that never happened, and a release written but never linked (newer than the
    current one)."""
    releases = releases_folder(output_dir)
    if not releases.is_dir():
        return []
    current = current_id(output_dir)
    left = []
    for path in releases.iterdir():
        named = _ID.fullmatch(path.name)
        if path.name.startswith(_REMOVING) or (named and path.is_symlink()):
            left.append(path)
        elif named and current is not None and _counter(path.name) > _counter(current):
            left.append(path)
    return sorted(left)


def switch_in(staging: Path, output_dir: Path) -> str:
    """Make the release written in ``staging`` the current one: linked to the kept folders,
    flushed, moved into the releases folder under a new ID, then linked as the output folder.
    Returns its ID. On failure it is back in ``staging``."""
    releases = releases_folder(output_dir)
    releases.mkdir(exist_ok=True)
    for name in KEPT_FOLDERS:
        if (releases / name).is_dir():
            (staging / name).symlink_to(f"../{name}")  # its text is right where it goes
    sync_tree(staging)
    release = releases / _new_id(releases)
    staging.rename(release)
    try:
        sync(releases)
        point(output_dir, release.name)
    except BaseException:
        if current_id(output_dir) != release.name:
            release.rename(staging)
        raise
    return release.name


def _new_id(releases: Path) -> str:
    highest = max((_counter(path.name) for path in releases.iterdir() if _ID.fullmatch(path.name)), default=0)
    return f"{highest + 1:06d}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"


def point(output_dir: Path, release_id: str) -> None:
    """Link the output folder to a release in one atomic rename of a new link over it."""
    link = output_dir.with_name(f".{output_dir.name}.pointer-{os.getpid()}")
    link.unlink(missing_ok=True)
    link.symlink_to(f"{releases_folder(output_dir).name}/{release_id}")  # relative: the folder may move
    os.replace(link, output_dir)
    sync(output_dir.parent)


def adopt(output_dir: Path) -> str:
    """Move an older version's release folder into the releases folder and leave the link to it
    in its place, in one exchange; its kept folders become the shared ones. Returns its ID."""
    releases = releases_folder(output_dir)
    releases.mkdir(exist_ok=True)
    release = releases / _new_id(releases)
    release.symlink_to(f"{releases.name}/{release.name}")  # its text is right once at output_dir
    if not exchange(release, output_dir):
        release.unlink()
        output_dir.rename(release)  # a kill here leaves no output folder: the next run links the release
        point(output_dir, release.name)
    sync(releases)
    sync(output_dir.parent)
    for name in KEPT_FOLDERS:
        if (release / name).is_dir():
            share_kept(release, name)
    return release.name


def share_kept(release: Path, name: str) -> None:
    """Make ``release/name`` a link to the shared kept folder: a folder there (an older
    version's) becomes the shared one by one exchange with the link, so a reader of
    ``out/name`` finds it throughout; none, and the shared folder is made."""
    inside, shared = release / name, release.parent / name
    if inside.is_symlink():
        return
    if shared.is_symlink():  # a killed run's link that was never exchanged
        shared.unlink()
    if not inside.is_dir():
        shared.mkdir(exist_ok=True)
        inside.symlink_to(f"../{name}")
        return
    if shared.is_dir():
        shared.rmdir()  # made empty by a release meanwhile; a full one is never replaced
    shared.symlink_to(f"../{name}")  # its text is right once in the release
    if not exchange(shared, inside):
        shared.unlink()
        inside.rename(shared)
        inside.symlink_to(f"../{name}")


def restore(output_dir: Path) -> str | None:
    """Link the output folder to the newest release where a kill left it without a link (or
    with one to nothing); the release's ID, or None when there was nothing to do."""
    ids = release_ids(output_dir)
    if output_dir.exists() or not ids or (os.path.lexists(output_dir) and current_id(output_dir) is None):
        return None
    point(output_dir, ids[-1])
    return ids[-1]


def prune(output_dir: Path, keep: int) -> None:
    """Remove all but the newest ``keep`` releases, and never the current one. Run under the
    lock, so no run is writing."""
    current = current_id(output_dir)
    releases = releases_folder(output_dir)
    for old in release_ids(output_dir)[:-keep]:
        if old != current:
            remove(releases / old)


def remove(path: Path) -> None:
    """Remove a release, or what a killed run left, so that a kill part way leaves no partial
    release under a release's name."""
    if path.is_symlink() or not path.is_dir():
        path.unlink()
        return
    if _ID.fullmatch(path.name):
        path = path.rename(path.with_name(_REMOVING + path.name))
    shutil.rmtree(path)


def sync_tree(folder: Path) -> None:
    """Every file of the folder and of the folders in it (the deduped documents' parts), and the
    folders themselves, on disk before it is switched in, so a power cut cannot leave a
    switched-in release with empty files. A link is in its folder, flushed with it."""
    for path in folder.iterdir():
        if path.is_symlink():
            continue
        if path.is_dir():
            sync_tree(path)
        else:
            sync(path)
    sync(folder)


def sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def exchange(first: Path, second: Path) -> bool:
    """Swap two names in one step (a folder and a link too); False where the system or file
    system cannot."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(second))
