"""The recall audit's compiled kernels: which sampled documents' probes each document holds, and
the keyed hash of doc_ids that picks the sample (``audit_probe.py`` says why)."""

from __future__ import annotations

import numba as nb
import numpy as np

from .kernels import _blocks, _scratch, _shingle_hashes, _table_size, filter_shift, mix64, probe_at, probe_slot


@nb.njit(cache=True)
def probe_slots_kernel(probes):
    """The open-addressing table :func:`kernels.probe_at` looks ``probes`` (distinct, marked) up
    in, and the place in ``probes`` of the one in each slot."""
    slots = np.zeros(_table_size(probes.shape[0]), dtype=np.uint64)
    places = np.full(slots.shape[0], -1, dtype=np.int64)
    mask = np.uint64(slots.shape[0] - 1)
    for place in range(probes.shape[0]):
        slot = probe_slot(probes[place], mask)
        while slots[slot] != 0:
            slot = (slot + np.uint64(1)) & mask
        slots[slot] = probes[place]
        places[slot] = place
    return slots, places


@nb.njit(cache=True, nogil=True)
def _marked_owners(
    text, doc, shingle_size, scratch, probes, places, filter_bits, owner_offsets, owners, limit, seen, touched
):
    """Mark in ``seen`` (a bitmap of owners) every owner below ``limit`` of a probe document
    ``doc`` holds; the number of bitmap words touched, listed in ``touched``. A sampled
    document's limit is its own place in the sample, so it never counts its own probes (it holds
    all of them) and a pair of two sampled documents is counted from one side only."""
    shift = filter_shift(filter_bits)
    words = 0
    for index in range(_shingle_hashes(text, doc, shingle_size, scratch)[1]):
        slot = probe_at(scratch.shingles[index] | np.uint64(1), probes, filter_bits, shift)
        if slot < 0:
            continue
        at = places[slot]
        for slot in range(owner_offsets[at], owner_offsets[at + 1]):
            owner = owners[slot]
            if owner >= limit:  # a probe's owners are ascending
                break
            word = owner >> 6
            if seen[word] == 0:
                touched[words] = word
                words += 1
            seen[word] |= np.uint64(1) << np.uint64(owner & 63)
    return words


@nb.njit(cache=True, parallel=True, nogil=True)
def probe_owners_kernel(
    text, shingle_size, probes, places, filter_bits, owner_offsets, owners, limits, owner_count, block_count
):
    """Per document of ``text``, the distinct owners (ascending, below its ``limits`` entry) of
    the probes it holds, as CSR (offsets, owners). ``probes`` and ``places`` are
    :func:`probe_slots_kernel`'s table; ``owners[owner_offsets[i]:owner_offsets[i + 1]]`` own the
    i-th probe. One bitmap of owners per thread, of which only the words a document
    touched are read and cleared, so a document costs its hits, not the sample. Counted first,
    then filled, hashing again only the documents that have owners."""
    documents = text.offsets.shape[0] - 1
    words_count = (owner_count + 63) // 64
    counts = np.zeros(documents, dtype=np.int64)
    bounds = _blocks(documents, block_count)
    for block in nb.prange(block_count):
        scratch = _scratch(text, bounds[block], bounds[block + 1])
        seen = np.zeros(words_count, dtype=np.uint64)
        touched = np.empty(words_count, dtype=np.int64)
        for doc in range(bounds[block], bounds[block + 1]):
            words = _marked_owners(
                text, doc, shingle_size, scratch, probes, places, filter_bits, owner_offsets, owners, limits[doc], seen,
                touched,
            )
            for word in touched[:words]:
                bits = seen[word]
                while bits:
                    bits &= bits - np.uint64(1)
                    counts[doc] += 1
                seen[word] = 0
    offsets = np.zeros(documents + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(counts)
    found = np.empty(offsets[-1], dtype=np.int64)
    for block in nb.prange(block_count):
        scratch = _scratch(text, bounds[block], bounds[block + 1])
        seen = np.zeros(words_count, dtype=np.uint64)
        touched = np.empty(words_count, dtype=np.int64)
        for doc in range(bounds[block], bounds[block + 1]):
            if counts[doc] == 0:
                continue
            words = _marked_owners(
                text, doc, shingle_size, scratch, probes, places, filter_bits, owner_offsets, owners, limits[doc], seen,
                touched,
            )
            at = offsets[doc]
            for word in np.sort(touched[:words]):
                bits = seen[word]
                while bits:
                    low = bits & (~bits + np.uint64(1))  # the lowest set bit
                    found[at] = word * 64 + int(np.log2(np.float64(low)) + 0.5)
                    at += 1
                    bits ^= low
                seen[word] = 0
    return offsets, found


@nb.njit(cache=True)
def keyed_hash_kernel(data, offsets, key):
    """A 64-bit hash of each string (UTF-8 ``data`` at ``offsets``) keyed by ``key``: the same
    for the same bytes and key on every machine and engine, whatever the row order."""
    hashes = np.empty(offsets.shape[0] - 1, dtype=np.uint64)
    start = mix64(np.uint64(key) ^ np.uint64(0x9E3779B97F4A7C15))
    for row in range(hashes.shape[0]):
        value = start
        for position in range(offsets[row], offsets[row + 1]):
            value = mix64(value ^ np.uint64(data[position]))
        hashes[row] = mix64(value ^ np.uint64(offsets[row + 1] - offsets[row]))
    return hashes
