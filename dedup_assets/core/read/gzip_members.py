"""Gzip input read member by member, so a damaged member is found, confined to itself and reported,
and reading goes on at the next intact member.

A gzip file is one or more members (``cat a.gz b.gz`` is one; bgzip writes a member per block, a
WARC writer one per record), each a deflate stream followed by the CRC-32 and length of its data.
``gzip.open`` checks a member only after handing out all of its data, and stops at the first
member it cannot read: one flipped byte either alters text silently or ends the file. A failed
check does not say where the data went wrong, so no part of a damaged member can be trusted, and
nothing read from a member may be handed on before its check. A reader either holds what it read
from a member until the member's check (WARC records, normally one per member), or, when members
can be too large to hold (a JSONL file is typically one member), checks the whole file first
with :func:`survey` (decompressing it once, keeping only each member's end and damage) and then
reads it with :func:`reread`, knowing which members not to trust. Memory holds one chunk of a
member at a time.
"""

from __future__ import annotations

import io
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from .protocol import InputError

_MAGIC = b"\x1f\x8b\x08"  # the gzip id bytes and the deflate method: how every member starts
_READ = 1 << 16  # compressed bytes read at a time
_OUT = 1 << 20  # decompressed bytes at most per step, so a member of zeros cannot fill memory
_CHECKS = {  # zlib's message -> what it means for the member
    "incorrect data check": "fails its CRC check",
    "incorrect length check": "fails its length check",
    "incorrect header check": "has no gzip header",
}


def is_gzip(path: Path) -> bool:
    """Whether the file starts like gzip (JSON and WARC text cannot), whatever its name says."""
    with path.open("rb") as handle:
        return handle.read(2) == _MAGIC[:2]


class _Compressed:
    """The compressed file at ``offset``, with the bytes read ahead of it."""

    def __init__(self, handle: BinaryIO, offset: int = 0):
        self.handle = handle
        self.seek(offset)

    def seek(self, offset: int) -> None:
        self.handle.seek(offset)
        self.offset = offset
        self.ahead = b""

    def more(self) -> bool:
        """Whether another member follows, after any NUL padding (which gzip skips too)."""
        while True:
            if not self.ahead:
                self.ahead = self.handle.read(_READ)
                if not self.ahead:
                    return False
            rest = self.ahead.lstrip(b"\0")
            self.offset += len(self.ahead) - len(rest)
            self.ahead = rest
            if rest:
                return True


class Member:
    """One member: where it starts, its data (``chunks``, ``read`` or ``stream``), and once all of
    that is read, ``reason`` (None when intact, else ``decode_error`` or ``truncated``), ``end`` and
    ``size`` (decompressed). A damaged member ends where the next intact one starts, so it stands
    for the whole damaged stretch."""

    def __init__(self, source: _Compressed, resync: bool = True):
        self.start = source.offset
        self.end = -1
        self.size = 0  # decompressed bytes so far
        self.reason: str | None = None
        self._problem = ""
        self._file_size = 0  # known once the member has failed
        self._source = source
        self._resync = resync
        self._chunks = self._inflate()
        self._chunk, self._at = b"", 0  # what ``read`` has not handed out of the current chunk

    def chunks(self) -> Iterator[bytes]:
        """The member's data in order, never empty; the same iterator on every call."""
        return self._chunks

    def read(self, size: int = -1) -> bytes:
        """At most ``size`` bytes of the data (the rest of a chunk if negative), b"" at its end."""
        if self._at >= len(self._chunk):
            self._chunk, self._at = next(self._chunks, b""), 0
        end = len(self._chunk) if size < 0 else self._at + size
        data = self._chunk[self._at : end]
        self._at += len(data)
        return data

    def ended_at(self, position: int) -> bool:
        """Whether ``position`` is the end of the data, which is known once all of it was read."""
        return self.end >= 0 and position >= self.size

    def stream(self) -> io.BufferedReader:
        """The data as a buffered file, for readline."""
        return io.BufferedReader(_RawMember(self), _READ)

    def drain(self) -> None:
        """Read what is left of the member, which settles ``reason`` and ``end``."""
        for _ in self._chunks:
            pass

    def why(self, units: str) -> str:
        """The damage as a reject's detail, for the ``units`` (lines, records) of the member."""
        if self.reason == "truncated":
            return (
                f"the file ends inside the gzip member starting at compressed byte offset {self.start}, "
                f"so its {units} cannot be checked; re-download the file"
            )
        resumed = ""
        if self.end < self._file_size:
            resumed = f"; reading resumed at the next intact member, at byte {self.end}"
        return (
            f"the gzip member starting at compressed byte offset {self.start} {self._problem}, so its {units} "
            f"cannot be trusted; re-download or re-compress the file{resumed}"
        )

    def _inflate(self) -> Iterator[bytes]:
        source = self._source
        inflater = zlib.decompressobj(wbits=31)  # 31: a gzip header and trailer, both checked
        data = source.ahead
        while True:
            if not data:
                data = source.handle.read(_READ)
                if not data:
                    self._fail("truncated", "")
                    return
            before = inflater.copy()
            try:
                out = inflater.decompress(data, _OUT)
            except zlib.error as error:
                # the failed call's output went with it; decompressed again a byte at a time, it
                # still counts as the member's, so its lines are each rejected, not lost from the count
                out = _salvage(before, data)
                if out:
                    self.size += len(out)
                    yield out
                message = str(error).rpartition(": ")[2]
                what = _CHECKS.get(message, "cannot be decompressed")
                self._fail("decode_error", f"{what} (zlib: {message})")
                return
            if inflater.eof:
                source.offset += len(data) - len(inflater.unused_data)
                source.ahead = inflater.unused_data
                self.end = source.offset
            else:
                source.offset += len(data) - len(inflater.unconsumed_tail)
                data = inflater.unconsumed_tail
            if out:
                self.size += len(out)
                yield out
            if inflater.eof:
                return

    def _fail(self, reason: str, problem: str) -> None:
        source = self._source
        self.reason, self._problem = reason, problem
        self._file_size = source.handle.seek(0, io.SEEK_END)
        resync = reason == "decode_error" and self._resync
        self.end = _next_intact(source.handle, self.start) if resync else self._file_size
        if self._resync:
            source.seek(self.end)


def _salvage(inflater, data: bytes) -> bytes:
    """What ``inflater`` makes of ``data`` before the error it meets there, fed a byte at a time."""
    out = []
    try:
        for index in range(len(data)):
            out.append(inflater.decompress(data[index : index + 1]))
    except zlib.error:
        pass
    return b"".join(out)


class _RawMember(io.RawIOBase):
    def __init__(self, member: Member):
        self._member = member

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._member.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _next_intact(handle: BinaryIO, start: int) -> int:
    """Where the first intact member after ``start`` begins, or the end of the file: the first
    gzip magic that starts a member whose CRC and length check out (a chance match inside deflate
    data does not)."""
    position = start + 1
    while True:
        handle.seek(position)
        block = handle.read(_READ)
        found = block.find(_MAGIC)
        if found >= 0:
            candidate = member_at(handle, position + found)
            candidate.drain()
            if candidate.reason is None:
                return candidate.start
            position = candidate.start + 1
        elif len(block) < len(_MAGIC):
            return position + len(block)
        else:
            position += len(block) - len(_MAGIC) + 1


def member_at(handle: BinaryIO, offset: int) -> Member:
    """The member starting at ``offset``, read on its own: if it is damaged, no next intact
    member is looked for."""
    return Member(_Compressed(handle, offset), resync=False)


def members(handle: BinaryIO) -> Iterator[Member]:
    """The members of the file in order; each is read to its end before the next is yielded."""
    source = _Compressed(handle)
    while source.more():
        member = Member(source)
        yield member
        member.drain()


@dataclass
class Survey:
    """What one pass over a gzip file found: every member's end, in order, and the damaged ones."""

    ends: array = field(default_factory=lambda: array("q"))
    damaged: dict[int, Member] = field(default_factory=dict)  # by start offset


def survey(path: Path) -> Survey:
    """Check every member of the file, keeping none of its data."""
    found = Survey()
    with path.open("rb") as handle:
        for member in members(handle):
            member.drain()
            found.ends.append(member.end)
            if member.reason:
                found.damaged[member.start] = member
    return found


def reread(handle: BinaryIO, surveyed: Survey, path: Path) -> Iterator[tuple[Member, Member | None]]:
    """The members again, each with its damage as ``surveyed`` found it (None if intact). A file
    that reads differently from its survey is being written to, and is refused: what was already
    handed on from it cannot be taken back."""
    for index, member in enumerate(members(handle)):
        damage = surveyed.damaged.get(member.start)
        yield member, damage
        member.drain()
        end = surveyed.ends[index] if index < len(surveyed.ends) else -1
        if member.end != end or (member.reason is None) != (damage is None):
            raise changed(path, member.start)


def changed(path: Path, offset: int) -> InputError:
    return InputError(
        f"{path}: the file changed while it was read (at compressed byte offset {offset}). "
        "Read it again once nothing writes to it."
    )
