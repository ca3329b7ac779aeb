"""Each step's floor on this machine, measured in the same invocation as the run it judges (once
every measured run is over, so that nothing here weighs on a run's memory): how long the bytes
the step read and wrote (``memory.py`` counts them per step) take to read and write at this
machine's sequential rates, plus, for the steps whose work is to hash every body, one hashing
pass over the corpus's body bytes on every core. A step's time over its floor says whether it is
at the machine's limit or spends its time elsewhere.

The rates, over the same bytes of the corpus file:
- read: ``read()`` from the page cache (a first pass brings the bytes there; the second is timed),
  as the steps read their tables and inputs;
- write: ``write()`` of a new file into the page cache, without ``fsync``: a lower bound, as most
  of what the steps write is never synced;
- hash: a 64-bit multiply-xor over every 8-byte word in memory, one chunk per thread on every
  core: less work per byte than any shingle hash.

numba and numpy are imported by ``measure_floors`` only: the report imports this module, and the
measuring process stays small until its runs are over.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

MB = 1024 * 1024
FLOOR_MB = 1024  # bytes each rate is measured over (fewer when the corpus is smaller)
BLOCK = 8 * MB
# the steps that hash every document's body: fingerprinting, and the recall audit's prefix
# filter over every document's shingles
HASHING_STEPS = ("fingerprinted", "recall_audit")
AT_LIMIT = 3.0  # a step within this many times its floor is at the machine's limit


@dataclass(frozen=True)
class Floors:
    read_mb_s: float
    write_mb_s: float
    hash_mb_s: float
    body_mb: float  # the corpus's body column, uncompressed
    measured_mb: float

    def as_dict(self) -> dict:
        return asdict(self)


def _read_rate(path: Path, buffer: bytearray) -> float:
    """MB/s of reading the first ``len(buffer)`` bytes of ``path`` into ``buffer``, from the page
    cache: the first of two passes brings them there, the second is timed."""
    view = memoryview(buffer)
    for _ in range(2):
        started = time.perf_counter()
        with path.open("rb", buffering=0) as handle:
            done = 0
            while done < len(buffer):
                got = handle.readinto(view[done : done + min(BLOCK, len(buffer) - done)])
                if not got:
                    raise OSError(f"{path}: ended at byte {done:,} of {len(buffer):,}")
                done += got
        seconds = time.perf_counter() - started
    return len(buffer) / MB / seconds


def _write_rate(folder: Path, data: memoryview) -> float:
    path = folder / f".roofline-{os.getpid()}.bin"
    try:
        started = time.perf_counter()
        with path.open("wb", buffering=0) as handle:
            for start in range(0, len(data), BLOCK):
                handle.write(data[start : start + BLOCK])
        return len(data) / MB / (time.perf_counter() - started)
    finally:
        path.unlink(missing_ok=True)


def _hash_rate(data: bytearray) -> float:
    import numba as nb
    import numpy as np

    @nb.njit(parallel=True, nogil=True)
    def hash_words(words, chunks):
        out = np.zeros(chunks, dtype=np.uint64)
        count = words.size
        for chunk in nb.prange(chunks):
            value = np.uint64(chunk)
            for index in range(chunk * count // chunks, (chunk + 1) * count // chunks):
                value = (value ^ words[index]) * np.uint64(0x9E3779B97F4A7C15)
                value ^= value >> np.uint64(29)
            out[chunk] = value
        return out

    words = np.frombuffer(data, dtype=np.uint64, count=len(data) // 8)
    chunks = 8 * nb.get_num_threads()
    hash_words(words[:1024], chunks)  # compile
    started = time.perf_counter()
    hash_words(words, chunks)
    return words.nbytes / MB / (time.perf_counter() - started)


def body_mb(corpus: Path) -> float:
    """The body column's uncompressed size, from the Parquet footer."""
    import pyarrow.parquet as pq

    metadata = pq.ParquetFile(corpus).metadata
    column = metadata.schema.names.index("body")
    return sum(metadata.row_group(i).column(column).total_uncompressed_size for i in range(metadata.num_row_groups)) / MB


def measure_floors(corpus: Path, folder: Path, floor_mb: int = FLOOR_MB) -> Floors:
    """The three rates, over up to ``floor_mb`` of the corpus file's bytes (a file of its bytes
    is written into ``folder`` and removed)."""
    buffer = bytearray(min(corpus.stat().st_size, floor_mb * MB) // 8 * 8)
    read = _read_rate(corpus, buffer)
    return Floors(
        read_mb_s=read,
        write_mb_s=_write_rate(folder, memoryview(buffer)),
        hash_mb_s=_hash_rate(buffer),
        body_mb=body_mb(corpus),
        measured_mb=len(buffer) / MB,
    )


def hashed_mb(steps: list[str], floors: dict) -> float:
    """The body bytes ``steps`` hash: the corpus's bodies once per hashing step among them."""
    return floors["body_mb"] * sum(step in HASHING_STEPS for step in steps)


def floor_s(read_mb: float, written_mb: float, hashed: float, floors: dict) -> float:
    """The seconds these bytes take at least at the measured rates."""
    return read_mb / floors["read_mb_s"] + written_mb / floors["write_mb_s"] + hashed / floors["hash_mb_s"]
