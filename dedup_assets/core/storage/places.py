"""Errors about the place written to, not the data (a full disk, a used-up quota, a read-only
file system, no permission): said in one sentence naming the path, what was being written and
the setting that moves it elsewhere, instead of a traceback.

Every writer of the project says them through :func:`place_error`: the database (its file, WAL
and spill folder), the incremental payload files beside it, and the release folder.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

_PLACE_ERRORS = {
    errno.ENOSPC: "no space is left on the device",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission is denied",
    errno.EPERM: "permission is denied",
}
# a full disk only: where reading happens too, a denied permission may be the input's
SPACE = (errno.ENOSPC, errno.EDQUOT)
# what to set instead, by the place: the database's WAL, spill folder (.tmp) and payload files
# (.payloads) sit beside its file, so they all move with DEDUP_DATABASE
OUTPUT_DIR = "DEDUP_OUTPUT_DIR (output_dir) to a writable folder"
DATABASE = "DEDUP_DATABASE to a file on a disk with room (its .wal, .tmp and .payloads sit beside it)"


def place_error(
    error: BaseException, path: Path | str, setting: str = OUTPUT_DIR, what: str = "",
    codes=tuple(_PLACE_ERRORS),
) -> str | None:
    """The user's sentence for an error that is about the place written to (one of ``codes``,
    errno values), or None."""
    code = getattr(error, "errno", None)
    if code not in codes:  # Arrow and DuckDB keep only the system's message
        code = next((known for known in codes if os.strerror(known) in str(error)), None)
    if code is None:
        return None
    where = getattr(error, "filename", None) or path
    return (
        f"Cannot write {f'{what} to ' if what else ''}{where}: {_PLACE_ERRORS[code]}. Free space or fix "
        f"the folder's permissions, or set {setting}, then run again."
    )


@contextmanager
def said_of_the_place(
    path: Path | str, setting: str, error_type: Callable[[str], BaseException], what: str = "",
    codes=tuple(_PLACE_ERRORS),
) -> Iterator[None]:
    """An error about the place written to as ``error_type(sentence)``; any other error as it is."""
    try:
        yield
    except (OSError, duckdb.Error) as error:
        problem = place_error(error, path, setting, what, codes)
        if problem is None:
            raise
        raise error_type(problem) from None
