"""Reading a measured Dagster CLI's log while it runs: what its stderr file has grown by, cut into
whole lines, and the step starts and ends among them (``memory.py`` attributes its samples by
them)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

# "... - <pid> - <step key> - STEP_START - Started execution of step "<step key>"."
STEP_EVENT = re.compile(
    r" - (?P<step>[^ ]+) - "
    r"(?P<event>STEP_START|STEP_RESTARTED|STEP_SUCCESS|STEP_FAILURE|STEP_SKIPPED|STEP_UP_FOR_RETRY)"
    r" - "
)
STARTS = frozenset({"STEP_START", "STEP_RESTARTED"})


def step_events(lines: Iterable[str]) -> list[tuple[str, str]]:
    """(step, event) of every step start or end in Dagster log lines, in order."""
    return [
        (found.group("step"), found.group("event"))
        for line in lines
        if (found := STEP_EVENT.search(line))
    ]


class LineBuffer:
    """Complete lines out of a log read in arbitrary chunks."""

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, chunk: bytes) -> list[str]:
        *lines, self._rest = (self._rest + chunk).split(b"\n")
        return [line.decode("utf-8", errors="replace") for line in lines]

    def flush(self) -> list[str]:
        rest, self._rest = self._rest, b""
        return [rest.decode("utf-8", errors="replace")] if rest else []


class FileTail:
    """What a file (the child's stderr) has grown by since the last read. ``os.pread`` leaves
    the file offset, which the child shares, alone."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.offset = 0

    def read(self) -> bytes:
        chunks = []
        while chunk := os.pread(self.fd, 1 << 20, self.offset):
            self.offset += len(chunk)
            chunks.append(chunk)
        return b"".join(chunks)
