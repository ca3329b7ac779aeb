"""Text files in a wide encoding (UTF-16, UTF-32), which read as UTF-8 with a NUL byte in every
character: every column name and row would be garbled, so they are refused with how to
re-encode them."""

from __future__ import annotations

import shlex
from pathlib import Path

from .protocol import InputError

# UTF-32 first: its little-endian mark starts with UTF-16's
WIDE_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def reencode_hint(path: Path, encoding: str) -> str:
    target = f"{path.stem}.utf8{path.suffix}"
    return f"iconv -f {encoding} -t UTF-8 {shlex.quote(str(path))} > {shlex.quote(target)}"


def refuse_wide_encoding(path: Path, start: bytes) -> None:
    """Raise if the file's first bytes (``start``, four or more) are a wide byte-order mark."""
    encoding = next((name for bom, name in WIDE_BOMS if start.startswith(bom)), None)
    if encoding:
        raise InputError(
            f"{path}: the file is {encoding} encoded (it starts with a {encoding} byte-order mark). "
            f"Re-encode it as UTF-8, e.g. {reencode_hint(path, encoding)}"
        )
