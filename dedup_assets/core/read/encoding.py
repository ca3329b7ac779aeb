"""Text files that are not UTF-8, refused with how to re-encode them rather than read garbled.

A file in a wide encoding (UTF-16, UTF-32) reads as UTF-8 with a NUL byte in every character, and
is known by its byte-order mark. A file in an 8-bit encoding (Windows-1252, Latin-1) reads with
every non-ASCII character replaced by U+FFFD, and is known by how many of its rows had one
replaced (:class:`ReplacedRows`). A few replaced characters in a UTF-8 file are damage, not an
encoding: those rows are read, and counted (``replaced_characters``)."""

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


# A text file is refused as not UTF-8 when, among the rows of its first SAMPLE_BYTES, more than
# MOSTLY of them and at least FEW_ROWS had a character replaced. In a Windows-1252 or Latin-1 file
# almost every row with an accent, a curly quote or a dash has one; damage to a UTF-8 file seldom
# reaches 1 row in 100, and FEW_ROWS keeps a small file with a bad byte or two readable.
SAMPLE_BYTES = 16 << 20
MOSTLY = 0.01
FEW_ROWS = 10


def reencode_hint(path: Path, encoding: str) -> str:
    if path.suffix.lower() == ".gz":
        target = shlex.quote(f"{Path(path.stem).stem}.utf8{Path(path.stem).suffix}.gz")
        return f"gzip -dc {shlex.quote(str(path))} | iconv -f {encoding} -t UTF-8 | gzip > {target}"
    target = f"{path.stem}.utf8{path.suffix}"
    return f"iconv -f {encoding} -t UTF-8 {shlex.quote(str(path))} > {shlex.quote(target)}"


def replaced_characters(raw: bytes, text: str) -> int:
    """The U+FFFD that decoding ``raw`` as ``text`` put in (``raw`` may hold some of its own)."""
    return text.count("\ufffd") - raw.count(b"\xef\xbf\xbd")


class ReplacedRows:
    """Watches the rows of a file's first SAMPLE_BYTES for replaced characters, and refuses the
    file once they show it is not UTF-8."""

    def __init__(self, path: Path):
        self.path = path
        self.rows = self.replaced = self.bytes = 0
        self.settled = False

    def add(self, rows: int, replaced: int, size: int) -> None:
        """``rows`` more rows of ``size`` bytes, ``replaced`` of which had a character replaced."""
        if self.settled:
            return
        self.rows, self.replaced, self.bytes = self.rows + rows, self.replaced + replaced, self.bytes + size
        if self.bytes >= SAMPLE_BYTES:
            self.finish()

    def finish(self) -> None:
        """Decide on what was seen (at the end of a file smaller than the sample)."""
        if self.settled:
            return
        self.settled = True
        if self.replaced >= FEW_ROWS and self.replaced > MOSTLY * self.rows:
            raise InputError(
                f"{self.path}: {self.replaced:,} of the first {self.rows:,} rows have bytes that are not UTF-8, "
                "so the file is probably in another encoding, such as Windows-1252 (CP1252) or Latin-1. "
                f"Re-encode it as UTF-8 (from Latin-1: -f ISO-8859-1), e.g. {reencode_hint(self.path, 'CP1252')}"
            )


def refuse_wide_encoding(path: Path, start: bytes) -> None:
    """Raise if the file's first bytes (``start``, four or more) are a wide byte-order mark."""
    encoding = next((name for bom, name in WIDE_BOMS if start.startswith(bom)), None)
    if encoding:
        raise InputError(
            f"{path}: the file is {encoding} encoded (it starts with a {encoding} byte-order mark). "
            f"Re-encode it as UTF-8, e.g. {reencode_hint(path, encoding)}"
        )
