"""Which files an input is (one file, a folder or a glob), whether each can be read, and the
input's identity (size and sha256) for lineage."""

from __future__ import annotations

import glob
import hashlib
from dataclasses import dataclass
from pathlib import Path

from .protocol import REQUIRED_COLUMNS, InputError
from .registry import SUPPORTED_NAMES, matching_reader, reader_for


@dataclass(frozen=True)
class InputFile:
    path: str
    byte_size: int
    sha256: str


def file_sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def describe_input(source: Path, source_format: str | None = None) -> InputFile:
    """Size and sha256 of the input; for a folder or glob, a sha256 over each file's name and
    sha256, so any change to any file changes it. Checks every file first."""
    paths = input_files(source, source_format)
    for path in paths:
        check_file(path, source_format)
    if paths == [source]:
        return InputFile(str(source), source.stat().st_size, file_sha256(source))
    digest = hashlib.sha256()
    for path in paths:
        digest.update(f"{path}\0{file_sha256(path)}\n".encode("utf-8"))
    return InputFile(str(source), sum(path.stat().st_size for path in paths), digest.hexdigest())


def input_files(source: Path, source_format: str | None = None) -> list[Path]:
    """The files of an input: one file, every file a reader reads under a folder (every file,
    when ``source_format`` is set), or a glob's matches, in sorted order."""
    if any(character in str(source) for character in "*?["):
        files = sorted(Path(match) for match in glob.glob(str(source), recursive=True))
        files = [path for path in files if path.is_file()]
        if not files:
            raise InputError(f"{source}: the pattern matches no file. Check DEDUP_INPUT.")
        return files
    if source.is_dir():
        files = sorted(
            path for path in source.rglob("*") if path.is_file() and matching_reader(path, source_format)
        )
        if not files:
            raise InputError(f"{source}: the folder has no {SUPPORTED_NAMES} file. Check DEDUP_INPUT.")
        return files
    return [source]


def check_file(path: Path, source_format: str | None = None) -> None:
    """Fail early, with what to do, when the path cannot be an input file."""
    reader_for(path, source_format)  # raises for a format or file name no reader reads
    if not path.exists():
        raise InputError(f"{path}: no such file. Set DEDUP_INPUT to an input file, folder or glob.")
    if not path.is_file():
        raise InputError(f"{path}: not a file. Set DEDUP_INPUT to an input file, folder or glob.")
    if path.stat().st_size == 0:
        raise InputError(
            f"{path}: the file is empty. Expected a header row with the columns "
            + ", ".join(REQUIRED_COLUMNS)
            + " and one row per document."
        )
