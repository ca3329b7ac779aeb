"""Release-file helpers, directly."""

import hashlib
import time

import pytest

from dedup_assets.core.release import _written_and_hashed


def test_the_hash_follows_a_file_written_in_slow_pieces(tmp_path):
    path = tmp_path / "growing.bin"
    pieces = [bytes([index]) * (300_000 + index) for index in range(5)]

    def write() -> int:
        with path.open("wb") as handle:
            for piece in pieces:
                handle.write(piece)
                handle.flush()
                time.sleep(0.03)  # the hasher catches up and must wait for more
        return len(pieces)

    assert _written_and_hashed(path, write) == (5, hashlib.sha256(b"".join(pieces)).hexdigest())


def test_a_failed_write_stops_the_hasher_and_raises(tmp_path):
    def write() -> int:
        (tmp_path / "broken.bin").write_bytes(b"partial")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        _written_and_hashed(tmp_path / "broken.bin", write)
