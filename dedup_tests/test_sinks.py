"""The release's file sinks, directly."""

import errno
import fcntl
import hashlib
import os
import threading
from pathlib import Path

import pytest

from dedup_assets.core.release import sinks
from dedup_assets.core.release.sinks import BackgroundFile, DirectFile


def test_background_file_writes_every_piece_in_order_and_hashes_them(tmp_path):
    path = tmp_path / "pieces.bin"
    pieces = [bytes([index]) * (70_000 + index) for index in range(100)]  # more than its queue holds
    sink = BackgroundFile(path)
    for piece in pieces:
        assert sink.write(piece) == len(piece)
    assert sink.tell() == sum(map(len, pieces))
    expected = b"".join(pieces)
    assert sink.finish() == hashlib.sha256(expected).hexdigest()
    assert path.read_bytes() == expected


def test_a_failing_disk_reaches_the_writer_instead_of_blocking_it():
    sink = BackgroundFile(Path("/dev/full"))  # every write fails: no space left on device
    raised: list[BaseException] = []

    def write_a_lot() -> None:
        try:
            try:
                for _ in range(1_000):  # far more than the queue holds
                    sink.write(b"x" * 100_000)
            finally:
                sink.finish()
        except OSError as error:
            raised.append(error)

    writer = threading.Thread(target=write_a_lot, daemon=True)
    writer.start()
    writer.join(timeout=30)
    assert not writer.is_alive(), "the writer blocked on a queue nobody drains"
    assert raised and "space" in str(raised[0])


@pytest.mark.parametrize("direct", [True, False])
@pytest.mark.parametrize("sizes", [[4096], [8192, 1], [1, 4095, 4096, 5000, 3], [10_000]])
def test_direct_file_writes_whole_blocks_and_the_rest(tmp_path, direct, sizes):
    path = tmp_path / "direct.bin"
    pieces = [bytes([index % 251]) * size for index, size in enumerate(sizes)]
    handle = DirectFile(path, block_bytes=4096, direct=direct)
    for piece in pieces:
        handle.write(piece)
    handle.close()
    assert path.read_bytes() == b"".join(pieces)


def test_direct_file_falls_back_when_a_direct_write_is_refused(tmp_path, monkeypatch):
    real_write, refused = os.write, []

    def refuse_direct(fd, data):
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
            refused.append(len(data))
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(fd, data)

    monkeypatch.setattr(sinks.os, "write", refuse_direct)
    path = tmp_path / "refused.bin"
    handle = DirectFile(path, block_bytes=4096)
    opened_direct = handle._direct  # False on a filesystem without O_DIRECT (tmpfs)
    data = bytes(range(256)) * 40  # two whole blocks and a rest
    handle.write(data)
    handle.close()
    assert path.read_bytes() == data
    assert refused == ([4096] if opened_direct else [])  # refused once, then written normally


def test_direct_file_reports_a_full_disk_and_still_closes():
    handle = DirectFile(Path("/dev/full"), block_bytes=4096)
    with pytest.raises(OSError, match="space"):
        handle.write(b"x" * 10_000)
    with pytest.raises(OSError, match="space"):
        handle.close()  # the rest cannot be written either; the descriptor is closed anyway
