"""File sinks for the release's Parquet files: the encoder hands its bytes to a thread that
writes and hashes them, and the file is written with O_DIRECT in whole aligned blocks.

Writing directly skips copying every byte into freshly allocated page cache, which is what bounds
buffered writes of large files on machines like ours (see docs/performance.md).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import io
import mmap
import os
import queue
import threading
from pathlib import Path


class BackgroundFile(io.RawIOBase):
    """A file for ``pq.ParquetWriter`` whose bytes reach ``path`` (through :class:`DirectFile`),
    and its sha256, in a thread of their own, so the encoding thread does not wait on the disk
    and the file is not read again to hash it."""

    def __init__(self, path: Path):
        super().__init__()
        self._pending: queue.Queue[bytes | None] = queue.Queue(maxsize=32)
        self._position = 0
        self._digest = hashlib.sha256()
        self._error: BaseException | None = None
        self._handle = DirectFile(path)
        self._writer = threading.Thread(target=self._drain, name=f"write {path.name}")
        self._writer.start()

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def write(self, data: bytes) -> int:
        if self._error is not None:
            raise self._error
        self._pending.put(data)  # pyarrow hands over immutable bytes
        self._position += len(data)
        return len(data)

    def _drain(self) -> None:
        while (data := self._pending.get()) is not None:
            if self._error is None:
                try:
                    self._handle.write(data)
                    self._digest.update(data)
                except BaseException as error:  # keep taking data so the writer never blocks
                    self._error = error

    def finish(self) -> str:
        """Wait for every byte to be written; the file's sha256."""
        self._pending.put(None)
        self._writer.join()
        try:
            self._handle.close()
        except OSError as error:
            self._error = self._error or error
        if self._error is not None:
            raise self._error
        return self._digest.hexdigest()


class DirectFile:
    """A file written with O_DIRECT in whole aligned blocks, so its bytes go to the disk without
    being copied into freshly allocated page cache. Writes are gathered into one block either
    way; the last partial block is written normally. Where the filesystem refuses O_DIRECT, at
    open (tmpfs) or at the first write (EINVAL), the file is written normally."""

    BLOCK_BYTES = 1 << 22

    def __init__(self, path: Path, block_bytes: int = BLOCK_BYTES, direct: bool = True):
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        self._direct = direct and hasattr(os, "O_DIRECT")
        try:
            self._fd = os.open(path, flags | (os.O_DIRECT if self._direct else 0), 0o644)
        except OSError as error:
            if not self._direct or error.errno != errno.EINVAL:
                raise
            self._direct = False
            self._fd = os.open(path, flags, 0o644)
        self._block = mmap.mmap(-1, block_bytes)  # page-aligned, as O_DIRECT requires
        self._filled = 0

    def write(self, data: bytes) -> None:
        pending = memoryview(data)
        while len(pending):
            taken = min(len(pending), len(self._block) - self._filled)
            self._block[self._filled : self._filled + taken] = pending[:taken]
            self._filled += taken
            pending = pending[taken:]
            if self._filled == len(self._block):
                self._flush()

    def close(self) -> None:
        try:
            if self._filled:
                self._stop_direct()  # the rest is not a whole block
                self._flush()
        finally:
            os.close(self._fd)

    def _flush(self) -> None:
        try:
            self._write_all(0)
        except OSError as error:
            if not self._direct or error.errno != errno.EINVAL:
                raise
            self._stop_direct()  # accepted at open, refused at write
            self._write_all(0)
        self._filled = 0

    def _write_all(self, start: int) -> None:
        # offsets into the block rather than memoryview slices: a slice kept alive by an
        # exception's traceback would pin the mapping
        while start < self._filled:
            with memoryview(self._block) as view:
                start += os.write(self._fd, view[start : self._filled])

    def _stop_direct(self) -> None:
        if self._direct:
            fcntl.fcntl(self._fd, fcntl.F_SETFL, fcntl.fcntl(self._fd, fcntl.F_GETFL) & ~os.O_DIRECT)
            self._direct = False
