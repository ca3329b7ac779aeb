"""Which files an input is (one file, a folder or a glob), whether each can be read, and the
input's identity for lineage: its size and sha256, and each file's stamp and sha256, which tell
at release whether it has changed since."""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import shlex
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..storage.tables import GLOB_MARK
from .encoding import refuse_wide_encoding
from .input_contract import REQUIRED_COLUMNS
from .protocol import INPUT_SETTING, InputError
from .registry import NAMED_FORMATS, SUPPORTED_NAMES, format_stem, matching_reader, reader_for

_TEXT_FORMATS = ("csv", "jsonl")
_SKIPPED_SHOWN = 3


@dataclass(frozen=True)
class InputFile:
    path: str
    byte_size: int
    sha256: str
    # the files of an input folder that no reader reads, left out (relative to the folder)
    skipped: tuple[str, ...] = ()
    # each file's (path, bytes, mtime_ns, inode, ctime_ns, sha256), its stamp taken before it was
    # hashed: a file whose stamp differs later may have changed since, and is hashed again
    # (input_changes); tables of an older version hold no stamps, or stamps without the sha256
    stamps: tuple[tuple[str, int, int, int, int, str], ...] = ()


# what a stamp records after the path, named as a message names them
STAMP_FIELDS = ("size", "modification time", "inode", "change time")


@dataclass(frozen=True)
class FileChange:
    """An input file whose stamp differs from the one taken when documents read it."""

    path: str
    fields: tuple[str, ...]  # of STAMP_FIELDS; ("gone",) when it can no longer be read; () unknown
    edited: bool  # its sha256 differs too (or it is gone)


def file_stamp(path: Path) -> tuple[str, int, int, int, int]:
    found = path.stat()
    return str(path), found.st_size, found.st_mtime_ns, found.st_ino, found.st_ctime_ns


def _stamp_fields(stamp: tuple) -> tuple[str, ...]:
    """The fields of ``stamp`` that differ from the file now; ("gone",) when it cannot be read."""
    try:
        now = file_stamp(Path(stamp[0]))
    except OSError:
        return ("gone",)
    return tuple(name for name, was, found in zip(STAMP_FIELDS, stamp[1:5], now[1:]) if was != found)


def input_changes(input_file: InputFile, source_format: str | None = None) -> list[FileChange]:
    """The input's files whose stamp differs from the one documents took, each hashed again to
    tell a touch from an edit. Files whose stamp is the same are not read: an unchanged input
    costs a stat per file. Without stamps with their sha256 (tables of an older version), the
    whole input is hashed again and is one change, edited or not."""
    if not input_file.stamps or any(len(stamp) < 6 for stamp in input_file.stamps):
        try:
            now = describe_input(Path(input_file.path), source_format).sha256
        except InputError:  # a file gone, or no longer readable
            now = None
        return [FileChange(input_file.path, (), now != input_file.sha256)]
    changes = []
    for stamp in input_file.stamps:
        fields = _stamp_fields(stamp)
        if fields:
            try:
                edited = fields == ("gone",) or file_sha256(Path(stamp[0])) != stamp[5]
            except OSError:  # gone or unreadable since the stat
                fields, edited = ("gone",), True
            changes.append(FileChange(stamp[0], fields, edited))
    return changes


# A release folder (core/release/files.py writes it) given as input is read as its kept documents:
# the Parquet parts of this folder beside its manifest, not its other tables and reports
RELEASE_MANIFEST, RELEASE_KEPT = "manifest.json", "deduped_documents"


def release_parts(folder: Path) -> list[Path]:
    """The kept documents' parts of a release folder, in order; empty for any other folder."""
    kept = folder / RELEASE_KEPT
    if not (folder / RELEASE_MANIFEST).is_file() or not kept.is_dir():
        return []
    return sorted(kept.glob("part-*.parquet"))


def is_release_part(path: Path) -> bool:
    return path.parent.name == RELEASE_KEPT and (path.parent.parent / RELEASE_MANIFEST).is_file()


def file_sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def describe_input(source: Path, source_format: str | None = None) -> InputFile:
    """Size and sha256 of the input; for a folder or glob, a sha256 over each file's name and
    sha256, so any change to any file changes it. Checks every file first."""
    skipped: list[Path] = []
    paths = input_files(source, source_format, skipped=skipped)
    for path in paths:
        check_file(path, source_format)
    # every stamp before any hash, as the reader starts: a change while it reads shows at release
    stamps = [file_stamp(path) for path in paths]
    hashes = [file_sha256(path) for path in paths]
    # a file changed while hashed has no hash of what documents read: the release refuses it
    stamps = [(*stamp, "" if _stamp_fields(stamp) else sha256) for stamp, sha256 in zip(stamps, hashes)]
    if paths == [source]:
        return InputFile(str(source), stamps[0][1], hashes[0], stamps=tuple(stamps))
    digest = hashlib.sha256()
    for path, sha256 in zip(paths, hashes):
        digest.update(f"{path}\0{sha256}\n".encode("utf-8"))
    names = tuple(str(path.relative_to(source)) for path in skipped)
    return InputFile(str(source), sum(stamp[1] for stamp in stamps), digest.hexdigest(), names, tuple(stamps))


def skipped_files_line(skipped: list[Path]) -> str:
    """One line on the files of an input folder that were not read: how many, of which kinds,
    and the first few names."""
    kinds = Counter(path.suffix.lower() or "(no extension)" for path in skipped)
    shown = ", ".join(path.name for path in skipped[:_SKIPPED_SHOWN]) + (", …" if len(skipped) > _SKIPPED_SHOWN else "")
    return (
        f"skipped {len(skipped):,} file{'s' if len(skipped) > 1 else ''} that "
        f"{'are' if len(skipped) > 1 else 'is'} not {NAMED_FORMATS}: "
        + ", ".join(f"{count:,} {kind}" for kind, count in sorted(kinds.items(), key=lambda item: (-item[1], item[0])))
        + f" ({shown})"
    )


def input_files(
    source: Path,
    source_format: str | None = None,
    left_out: list[Path] | None = None,
    skipped: list[Path] | None = None,
) -> list[Path]:
    """The files of an input: one file, every file a reader reads under a folder (every file,
    when ``source_format`` is set; the others are added to ``skipped``), or a glob's matches,
    in sorted order. A file reached by more than one path (through symlinks or hard links) is
    one file, named by its first path.

    ``source`` is a glob only when it has ``*``, ``?`` or ``[`` and names no file or folder as
    it is; a file or folder is then read under its own name, whatever it holds. What the
    pipeline writes (:func:`_is_output`) is never read as input: it is added to ``left_out``."""
    left_out = [] if left_out is None else left_out
    try:
        exists = source.exists()
    except PermissionError:  # a folder above it cannot be entered
        raise unreadable(source) from None
    if GLOB_MARK.search(str(source)) and not exists:
        parts = source.parts
        fixed = next(index for index, part in enumerate(parts) if GLOB_MARK.search(part))
        root = Path(*parts[:fixed]) if fixed else Path(".")
        matches = _each_once(path for path in _walk(root, left_out, parts[fixed:]) if path.is_file())
        files = _not_databases(matches, left_out)
        if not files:
            raise InputError(
                f"{source}: no such file or folder, and as a pattern it matches no file. Check "
                f"{INPUT_SETTING} (in a pattern, [*], [?] and [[] match the mark itself)."
            )
        return files
    try:
        is_folder = source.is_dir()
        parts = release_parts(source) if is_folder else []
    except PermissionError:  # a folder above it, or the folder itself, cannot be entered
        raise unreadable(source) from None
    if parts:
        return parts
    if is_folder:
        written: list[Path] = []
        found = [(path, matching_reader(path, source_format)) for path in _walk(source, written) if path.is_file()]
        files = _each_once(path for path, reader in found if reader)
        if skipped is not None:  # the pipeline's own databases aside, as it never reads them
            skipped += _not_databases([path for path, reader in found if reader is None], [])
        left_out += [path for path in written if path.is_dir() or matching_reader(path, source_format)]
        files = _not_databases(files, left_out)
        if not files:
            raise InputError(f"{source}: the folder has no {SUPPORTED_NAMES} file. Check {INPUT_SETTING}.")
        return files
    return [source]


def _walk(root: Path, left_out: list[Path], pattern: tuple[str, ...] | None = None) -> Iterator[Path]:
    """The paths of everything but folders under ``root``; with a glob ``pattern`` (its parts
    below ``root``), those it matches, as ``glob.glob(recursive=True)`` would. What the
    pipeline wrote is not entered or given, but added to ``left_out``.

    Symlinked folders are followed, but a folder (by device and inode) is entered once per set
    of pattern parts still to match, so a symlink loop ends (``glob`` follows one until the path
    is too long) while a folder reached under another name still
    matches by that name. Folders are entered in sorted order, depth first, so the first path
    to reach a file is the first in sorted order."""
    entered: set[tuple[int, int, frozenset[int]]] = set()
    pending = [(root, _skip_globstars(pattern, {0}) if pattern else frozenset())]
    while pending:
        folder, states = pending.pop()
        try:
            identity = folder.stat()
            if (identity.st_dev, identity.st_ino, states) in entered:
                continue
            entered.add((identity.st_dev, identity.st_ino, states))
            entries = sorted(os.scandir(folder), key=lambda entry: _name_order(entry.name))
        except PermissionError:
            raise unreadable(folder) from None
        except (FileNotFoundError, NotADirectoryError):  # gone meanwhile: nothing of the input is in it
            continue
        except OSError as error:
            raise InputError(
                f"{folder}: cannot be listed ({error.strerror}), so its files cannot be read. Check "
                "the disk or mount, or leave the folder out of the input."
            ) from None
        subfolders = []
        names = {entry.name for entry in entries}
        for entry in entries:
            path = Path(folder, entry.name)
            reached = _advance(pattern, states, entry.name) if pattern else states
            if pattern and not reached:
                continue
            if _is_output(entry, names):
                left_out.append(path)
                continue
            if entry.is_dir():  # follows a symlink
                subfolders.append((path, reached))
            elif not pattern or len(pattern) in reached:
                yield path
        pending.extend(reversed(subfolders))


# beside a release folder ``out`` (a link to its current release): its lock (kept), its
# releases, and what a killed switch leaves (release/publish.py)
_RELEASE_SIBLING = re.compile(r"\.(.+)\.(lock|releases|staging-\d+|previous-\d+|pointer-\d+)")
_DUCKDB_MAGIC = b"DUCK"  # at byte 8 of a DuckDB database file


def _is_output(entry: os.DirEntry, names: set[str]) -> bool:
    """Whether a folder entry is what the pipeline writes there: a release folder, known by the
    lock file beside it (an output folder inside the input folder would otherwise be read
    back as input on the next run), what a release leaves beside it, or the payloads folder of
    a DuckDB database."""
    sibling = _RELEASE_SIBLING.fullmatch(entry.name)
    if sibling and (sibling[2] == "lock" or f".{sibling[1]}.lock" in names):
        return True
    return entry.is_dir() and (
        f".{entry.name}.lock" in names
        or (entry.name.endswith(".payloads") and _is_database(Path(entry.path).with_suffix("")))
    )


def _not_databases(files: list[Path], left_out: list[Path]) -> list[Path]:
    """``files`` but DuckDB databases and their write-ahead logs, which are added to
    ``left_out``. Only names of no input format are opened to tell."""
    kept = []
    for path in files:
        plain = format_stem(path.name) == path.name
        if plain and (_is_database(path) or (path.suffix == ".wal" and _is_database(path.with_suffix("")))):
            left_out.append(path)
        else:
            kept.append(path)
    return kept


def _is_database(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(12)[8:] == _DUCKDB_MAGIC
    except OSError:  # not a file, or unreadable: the walk says what it is
        return False


def _advance(pattern: tuple[str, ...], states: frozenset[int], name: str) -> frozenset[int]:
    """The pattern parts still to match below ``name``, given those left to match at it: a
    ``**`` may take any number of names, any other part one name it matches. As in ``glob``,
    a wildcard matches a name starting with a dot only when the part starts with one too."""
    reached = set()
    for state in states:
        if state == len(pattern) or (name.startswith(".") and not pattern[state].startswith(".")):
            continue
        if pattern[state] == "**":
            reached.add(state)
        elif fnmatch.fnmatchcase(name, pattern[state]):
            reached.add(state + 1)
    return _skip_globstars(pattern, reached)


def _skip_globstars(pattern: tuple[str, ...], states: set[int]) -> frozenset[int]:
    """``states`` with, for each, the parts after the ``**`` there (a ``**`` may take no name)."""
    skipped = set(states)
    for state in states:
        while state < len(pattern) and pattern[state] == "**":
            state += 1
            skipped.add(state)
    return frozenset(skipped)


def _name_order(name: str) -> tuple[str, str]:
    """Names sort by their stem first (``a.csv`` before ``a-1.csv``), so a folder of batch files
    is read in the batches' key order."""
    return format_stem(name), name


def _each_once(paths: Iterable[Path]) -> list[Path]:
    """``paths`` in sorted order, each file (by device and inode) once, under its first path."""
    seen: set[tuple[int, int]] = set()
    unique = []
    for path in sorted(paths, key=lambda path: tuple(map(_name_order, path.parts))):
        identity = path.stat()
        if (identity.st_dev, identity.st_ino) not in seen:
            seen.add((identity.st_dev, identity.st_ino))
            unique.append(path)
    return unique


def unreadable(path: Path) -> InputError:
    """The error for an input file or folder that the user running the pipeline may not read."""
    return InputError(
        f"{path}: permission denied: cannot be opened for reading. Give the user that runs the "
        "pipeline read access to it and the folders it is in, e.g. chmod -R a+rX "
        f"{shlex.quote(str(path))}, or leave it out of the input."
    )


def check_file(path: Path, source_format: str | None = None) -> None:
    """Fail early, with what to do, when the path cannot be an input file."""
    try:
        exists = path.exists()
    except PermissionError:  # a folder above it cannot be entered
        raise unreadable(path) from None
    if not exists:
        # said before the file type: a missing folder has no file type to name
        what = "file" if matching_reader(path, source_format) else "file or folder"
        raise InputError(f"{path}: no such {what}. Set {INPUT_SETTING} to an input file, folder or glob.")
    if not path.is_file():
        raise InputError(f"{path}: not a file. Set {INPUT_SETTING} to an input file, folder or glob.")
    reader = reader_for(path, source_format)  # raises for a format or file name no reader reads
    if path.stat().st_size == 0:
        expected = (
            "a header row with at least the columns " + ", ".join(REQUIRED_COLUMNS) + " and one row per document"
            if reader.name == "csv"
            else f"a {reader.label} file with one record per document"
        )
        raise InputError(f"{path}: the file is empty. Expected {expected}.")
    try:
        with path.open("rb") as handle:
            start = handle.read(4)
    except PermissionError:
        raise unreadable(path) from None
    if reader.name in _TEXT_FORMATS and not path.name.lower().endswith(".gz"):
        refuse_wide_encoding(path, start)
