"""The lines of a byte stream, each held only up to a limit: a line longer than that is skipped to
its newline and stands as its length, so reading it takes memory bounded by the limit whatever
the line (or a compressed file's ratio)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

READ = 1 << 20  # bytes read from a plain file at a time

# A line within the limit, or the length of one beyond it.
Line = bytes | int


class Lines:
    """Splits a stream's chunks into lines (without their ``\\n``). The part of a line that runs
    over chunks is kept as pieces and joined once, when the line ends: joining on every chunk
    would copy the line again for each, quadratic in its length."""

    def __init__(self, limit: int):
        self.limit = limit
        self._pieces: list[bytes] = []
        self._size = 0

    def __bool__(self) -> bool:
        """Whether a line has begun and not ended."""
        return self._size > 0

    def split(self, chunk: bytes) -> Iterator[Line]:
        """The lines that end in ``chunk``; what follows its last newline waits for the next one."""
        lines = chunk.split(b"\n")
        self._add(lines[0])
        if len(lines) == 1:
            return
        yield self.end()
        for index in range(1, len(lines) - 1):
            line = lines[index]
            yield line if len(line) <= self.limit else len(line)
        self._add(lines[-1])

    def end(self) -> Line:
        """The line so far, ended here."""
        line = b"".join(self._pieces) if self._size <= self.limit else self._size
        self._pieces, self._size = [], 0
        return line

    def _add(self, piece: bytes) -> None:
        self._size += len(piece)
        if self._size <= self.limit:
            self._pieces.append(piece)
        else:  # beyond the limit only the length is kept
            self._pieces.clear()


def plain_lines(path: Path, limit: int) -> Iterator[Line]:
    """The lines of an uncompressed file, read in chunks (a file's own line iteration would hold a
    line whole, however long)."""
    lines = Lines(limit)
    with path.open("rb") as handle:
        while chunk := handle.read(READ):
            yield from lines.split(chunk)
    if lines:
        yield lines.end()


def count_plain_lines(path: Path) -> int:
    """Newlines, plus a last line without one."""
    count, last = 0, b""
    with path.open("rb") as handle:
        while chunk := handle.read(READ):
            count += chunk.count(b"\n")
            last = chunk
    return count + (bool(last) and not last.endswith(b"\n"))
