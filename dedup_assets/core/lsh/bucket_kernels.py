"""Compiled kernels of LSH banding: each band's keys sorted once, its buckets sized (pair slots,
the largest, the hot ones) and the texts in its shared buckets kept, then every pair of texts
that shares a bucket, with how many bands it shares.

One sort per band, two bands at a time: band keys are hashes, spread evenly over 64 bits, so a
single pass by their top bits leaves buckets of a few keys each, which insertion sort finishes in
place (a crowded bucket, of equal keys or of unevenly spread ones, falls to a comparison sort).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..util.kernel_cache import writable_cache

writable_cache(__file__)

# top-bits buckets per key, on average: few enough that most fit an insertion sort's range
_KEYS_PER_DIGIT = 8
# a top-bits bucket above this many keys is sorted by comparisons instead
_INSERTION_MOST = 48


@nb.njit(cache=True)
def _sort_with_rows(keys, rows):
    """Sort ``keys`` ascending in place, moving ``rows`` (int32) with them. Equal keys come out
    in no particular order."""
    count = keys.shape[0]
    if count < 2:
        return
    largest = keys.max()
    width = 0
    while width < 64 and (largest >> np.uint64(width)) > 0:
        width += 1
    if width == 0:  # every key is 0
        return
    bits = 1
    while bits < 20 and (1 << bits) * _KEYS_PER_DIGIT < count:
        bits += 1
    bits = min(bits, max(width, 1))
    shift = np.uint64(width - bits)
    digits = 1 << bits
    bounds = np.zeros(digits + 1, dtype=np.int64)
    for i in range(count):
        bounds[np.int64(keys[i] >> shift) + 1] += 1
    for digit in range(digits):
        bounds[digit + 1] += bounds[digit]
    at = bounds[:-1].copy()
    sorted_keys = np.empty_like(keys)
    sorted_rows = np.empty_like(rows)
    for i in range(count):
        digit = np.int64(keys[i] >> shift)
        sorted_keys[at[digit]] = keys[i]
        sorted_rows[at[digit]] = rows[i]
        at[digit] += 1
    for digit in range(digits):
        low, high = bounds[digit], bounds[digit + 1]
        if high - low > _INSERTION_MOST:
            order = np.argsort(sorted_keys[low:high])
            keys[low:high] = sorted_keys[low:high][order]
            rows[low:high] = sorted_rows[low:high][order]
            continue
        for i in range(low, high):
            key, row = sorted_keys[i], sorted_rows[i]
            j = i
            while j > low and keys[j - 1] > key:
                keys[j] = keys[j - 1]
                rows[j] = rows[j - 1]
                j -= 1
            keys[j] = key
            rows[j] = row


@nb.njit(cache=True)
def bucket_pair_slots(size, documents):
    """A bucket's pair slots (scalars or arrays), with ``size`` distinct texts that ``documents``
    documents have: the join's, (size-1)·documents - size(size-1)/2 (the pairs of its texts, and
    each further copy paired with the other texts, since exact copies are grouped first; a text
    alone in its bucket takes none, however many copies it has); and the published use case's,
    every two documents in it, documents(documents-1)/2."""
    return (size - 1) * documents - size * (size - 1) // 2, documents * (documents - 1) // 2


@nb.njit(cache=True, parallel=True, nogil=True)
def bucket_pressure_kernel(bands, copies, max_size):
    """Per band (column of ``bands``: one row per distinct text, ``copies`` the documents that
    have it): pair slots (:func:`bucket_pair_slots`: the join's, and the published), the largest
    bucket's size in distinct texts and its key (the smallest key among equals), the number of
    buckets, and the texts of its shared buckets (two distinct texts or more): band b's rows are
    ``members[b, :member_counts[b]]`` (int32), bucket after bucket by ascending key, and their
    buckets hold ``pairs[b]`` pairs of texts in all.

    A bucket of more than ``max_size`` texts is hot: it counts in none of those figures, and is
    listed instead, band b's keys, sizes and documents in ``hot_*[b, :hot_counts[b]]``
    (``max_size`` of the row count or more: none is).

    A sort per band costs less than DuckDB grouping every band row."""
    count = bands.shape[1]
    texts = bands.shape[0]
    slots = np.zeros(count, dtype=np.int64)
    published = np.zeros(count, dtype=np.int64)
    largest = np.zeros(count, dtype=np.int64)
    largest_key = np.zeros(count, dtype=np.uint64)
    buckets = np.zeros(count, dtype=np.int64)
    members = np.empty((count, texts), dtype=np.int32)
    member_counts = np.zeros(count, dtype=np.int64)
    pairs = np.zeros(count, dtype=np.int64)
    # a band of n texts has at most n // (max_size + 1) hot buckets
    hot_room = texts // (min(max_size, texts) + 1) + 1
    hot_keys = np.empty((count, hot_room), dtype=np.uint64)
    hot_sizes = np.empty((count, hot_room), dtype=np.int64)
    hot_documents = np.empty((count, hot_room), dtype=np.int64)
    hot_counts = np.zeros(count, dtype=np.int64)
    for band in nb.prange(count):
        keys = bands[:, band].copy()
        order = np.arange(texts).astype(np.int32)
        _sort_with_rows(keys, order)
        start = 0
        while start < texts:
            end, documents = start, 0
            while end < texts and keys[end] == keys[start]:
                documents += copies[order[end]]
                end += 1
            size = end - start
            if size > max_size:
                hot = hot_counts[band]
                hot_keys[band, hot], hot_sizes[band, hot], hot_documents[band, hot] = keys[start], size, documents
                hot_counts[band] += 1
                start = end
                continue
            joined, every_two = bucket_pair_slots(size, documents)
            slots[band] += joined
            published[band] += every_two
            buckets[band] += 1
            if size > largest[band]:
                largest[band] = size
                largest_key[band] = keys[start]
            if size > 1:
                first = member_counts[band]
                members[band, first : first + size] = order[start:end]
                member_counts[band] += size
                pairs[band] += size * (size - 1) // 2
            start = end
    hot = (hot_keys, hot_sizes, hot_documents, hot_counts)
    return slots, published, largest, largest_key, buckets, (members, member_counts, pairs), hot


@nb.njit(cache=True, parallel=True, nogil=True)
def bucket_pairs_kernel(bands, members, member_counts, pairs):
    """Every two texts (rows of ``bands``) in a shared bucket of any band (``members``,
    ``member_counts`` and ``pairs`` of :func:`bucket_pressure_kernel`), once, with the number of
    bands in which they share one: (left rows, right rows, shared bands), left < right, ordered
    by left then right."""
    texts = np.int64(bands.shape[0])
    offsets = np.zeros(pairs.shape[0] + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(pairs)
    keys = np.empty(offsets[-1], dtype=np.uint64)  # left * texts + right
    for band in nb.prange(pairs.shape[0]):
        rows = members[band]
        at = offsets[band]
        start = 0
        while start < member_counts[band]:
            end = start + 1
            while end < member_counts[band] and bands[rows[end], band] == bands[rows[start], band]:
                end += 1
            for i in range(start, end):
                for j in range(i + 1, end):
                    left, right = min(rows[i], rows[j]), max(rows[i], rows[j])
                    keys[at] = np.uint64(left * texts + right)
                    at += 1
            start = end
    _sort_with_rows(keys, np.zeros(keys.shape[0], dtype=np.int32))
    distinct = 0
    for i in range(keys.shape[0]):
        if i == 0 or keys[i] != keys[i - 1]:
            distinct += 1
    left_rows = np.empty(distinct, dtype=np.int64)
    right_rows = np.empty(distinct, dtype=np.int64)
    shared = np.zeros(distinct, dtype=np.int32)
    pair = -1
    for i in range(keys.shape[0]):
        if i == 0 or keys[i] != keys[i - 1]:
            pair += 1
            left_rows[pair] = np.int64(keys[i]) // texts
            right_rows[pair] = np.int64(keys[i]) % texts
        shared[pair] += 1
    return left_rows, right_rows, shared
