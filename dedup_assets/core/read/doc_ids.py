"""Which doc_ids were seen before, across every batch and file, without a Python object per row.

A compiled open-addressing table maps each distinct doc_id to the ordinal of its first
occurrence; the ids themselves are kept as UTF-8 bytes, so a 64-bit hash collision is told apart
from a repeated id by comparing bytes. Only repeated ids come back to Python, for their message.
(A dict of doc_id strings would make a Python object per row: slow to build, and work for the
garbage collector for as long as the input is read.)
"""

from __future__ import annotations

import numba as nb
import numpy as np
import pyarrow as pa

from ..util.kernel_cache import writable_cache
from ..sketch.kernels import mix64
from ..text.normalize import utf8_buffers

writable_cache(__file__)

_FREE_SLOT = -1  # a table slot without an id
NOT_SEEN = -1  # a row whose id no earlier row had
# C0 controls and DEL, which no id needs and which a CSV or a terminal would show as something else
CONTROL_CHARACTERS = r"[\x00-\x1f\x7f]"
_ESCAPES = {code: f"\\x{code:02x}" for code in [*range(0x20), 0x7F]}


def escaped(doc_id: str) -> str:
    """The id as a reject shows it: control characters as ``\\xNN``, a lone surrogate as
    ``\\udNNN`` (neither could be written as they are)."""
    return doc_id.translate(_ESCAPES).encode("utf-8", "backslashreplace").decode("utf-8")


@nb.njit(inline="always")
def _bytes_hash(data, start, end):
    value = np.uint64(0xCBF29CE484222325)  # FNV-1a over the bytes, then one mix
    for position in range(start, end):
        value = (value ^ np.uint64(data[position])) * np.uint64(0x100000001B3)
    return mix64(value ^ np.uint64(end - start))


@nb.njit(inline="always")
def _same_bytes(left, left_start, left_end, right, right_start, right_end):
    if left_end - left_start != right_end - right_start:
        return False
    for offset in range(left_end - left_start):
        if left[left_start + offset] != right[right_start + offset]:
            return False
    return True


@nb.njit(cache=True)
def _register(data, offsets, eligible, slot_hashes, slot_ordinals, stored, stored_offsets, count):
    """For each eligible row in order: the ordinal of the earlier row with the same id, or -1
    after registering it as ordinal ``count`` (then ``count + 1``...). Returns (earlier, count)."""
    mask = np.uint64(slot_hashes.shape[0] - 1)
    earlier = np.full(offsets.shape[0] - 1, NOT_SEEN, dtype=np.int64)
    for row in range(offsets.shape[0] - 1):
        if not eligible[row]:
            continue
        start, end = offsets[row], offsets[row + 1]
        hashed = _bytes_hash(data, start, end)
        slot = hashed & mask
        while slot_ordinals[slot] != _FREE_SLOT:
            ordinal = slot_ordinals[slot]
            if slot_hashes[slot] == hashed and _same_bytes(
                stored, stored_offsets[ordinal], stored_offsets[ordinal + 1], data, start, end
            ):
                earlier[row] = ordinal
                break
            slot = (slot + np.uint64(1)) & mask
        if earlier[row] == NOT_SEEN:
            slot_hashes[slot] = hashed
            slot_ordinals[slot] = count
            first = stored_offsets[count]
            stored[first : first + end - start] = data[start:end]
            stored_offsets[count + 1] = first + end - start
            count += 1
    return earlier, count


@nb.njit(cache=True)
def _rehash(slot_hashes, slot_ordinals, new_hashes, new_ordinals):
    mask = np.uint64(new_hashes.shape[0] - 1)
    for old in range(slot_hashes.shape[0]):
        if slot_ordinals[old] != _FREE_SLOT:
            slot = slot_hashes[old] & mask
            while new_ordinals[slot] != _FREE_SLOT:
                slot = (slot + np.uint64(1)) & mask
            new_hashes[slot] = slot_hashes[old]
            new_ordinals[slot] = slot_ordinals[old]


def _grown(array: np.ndarray, needed: int) -> np.ndarray:
    """``array`` with room for at least ``needed`` items (doubling, so growth stays linear)."""
    if needed <= len(array):
        return array
    grown = np.empty(max(needed, 2 * len(array)), dtype=array.dtype)
    grown[: len(array)] = array
    return grown


class FirstSeen:
    """The first occurrence of every doc_id registered so far: its file and input row."""

    def __init__(self) -> None:
        self.count = 0
        self._slot_hashes = np.zeros(1024, dtype=np.uint64)
        self._slot_ordinals = np.full(1024, _FREE_SLOT, dtype=np.int64)
        self._stored = np.empty(1 << 16, dtype=np.uint8)
        self._stored_offsets = np.zeros(1025, dtype=np.int64)
        self._rows = np.empty(1024, dtype=np.int64)
        self._files = np.empty(1024, dtype=np.int32)
        self._file_names: list[str] = []

    def register(self, source: str, doc_ids: pa.Array, input_rows: np.ndarray, eligible: np.ndarray) -> np.ndarray:
        """Register the ``eligible`` rows' ids, first come first kept; per row the ordinal of an
        earlier row with the same id (this batch's included), or -1."""
        data, offsets = utf8_buffers(doc_ids)
        offsets = offsets.astype(np.int64, copy=False)
        rows = len(doc_ids)
        self._reserve(rows, int(offsets[-1] - offsets[0]))
        before = self.count
        earlier, self.count = _register(
            data,
            offsets,
            eligible,
            self._slot_hashes,
            self._slot_ordinals,
            self._stored,
            self._stored_offsets,
            self.count,
        )
        if not self._file_names or self._file_names[-1] != source:
            self._file_names.append(source)
        new = eligible & (earlier == NOT_SEEN)
        self._rows[before : self.count] = input_rows[new]
        self._files[before : self.count] = len(self._file_names) - 1
        return earlier

    def place(self, ordinal: int) -> tuple[str, int]:
        """(file, input row) of the registered occurrence ``ordinal``."""
        return self._file_names[self._files[ordinal]], int(self._rows[ordinal])

    def _reserve(self, rows: int, id_bytes: int) -> None:
        needed = self.count + rows
        self._stored_offsets = _grown(self._stored_offsets, needed + 1)
        self._stored = _grown(self._stored, int(self._stored_offsets[self.count]) + id_bytes)
        self._rows = _grown(self._rows, needed)
        self._files = _grown(self._files, needed)
        size = len(self._slot_hashes)
        if 2 * needed > size:  # keep the table at most half full
            while 2 * needed > size:
                size *= 2
            hashes, ordinals = np.zeros(size, dtype=np.uint64), np.full(size, _FREE_SLOT, dtype=np.int64)
            _rehash(self._slot_hashes, self._slot_ordinals, hashes, ordinals)
            self._slot_hashes, self._slot_ordinals = hashes, ordinals
