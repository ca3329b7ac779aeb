"""Per-batch fingerprints and exact Jaccard: pure functions over Arrow arrays.

Two hash schemes give the same columns:

- ``fss`` (default): compiled kernels (``kernels.py``): 64-bit shingle hashes and a Fast
  Similarity Sketch, with no Python object per token.
- ``blake2b``: the published definition, bit for bit: coordinate ``i`` is the minimum over
  shingles of blake2b-64(``"{seed + i}:{shingle}"``) read little-endian, and band ``b`` is
  blake2b-64 of ``"{b}:" + ",".join(values)`` (stored as the integer whose hex is the digest, so
  ``printf('%03d:%016x', band_index, lsh_band)`` is the published key).
"""

from __future__ import annotations

import hashlib
import os
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import kernels
from .settings import HASH_SCHEMES, SettingsError, SketchParams  # noqa: F401 (re-exported)
from .sketch import lsh_band_keys, minhash_signature
from .text import normalize_text, token_shingles, tokenize, utf8_buffers
from .unicode import ASCII_ONLY, code_point_table

COUNTING_SEEDS = kernels.round_seeds(1, 0)


def fingerprint_schema(params: SketchParams) -> pa.Schema:
    return pa.schema(
        [
            ("doc_id", pa.string()),
            ("token_count", pa.int32()),
            ("shingle_count", pa.int32()),
            ("content_hash", pa.uint64()),
            ("signature", pa.list_(pa.uint64(), params.num_perm)),
            ("lsh_bands", pa.list_(pa.uint64(), params.bands)),
        ]
    )


def lsh_probability(similarity: float, bands: int, rows_per_band: int) -> float:
    """Chance that a pair with Jaccard ``similarity`` shares at least one band: 1-(1-s^r)^b."""
    return 1.0 - (1.0 - similarity**rows_per_band) ** bands


class KernelText(NamedTuple):
    """A column of bodies as the kernels read it: UTF-8 bytes and offsets, which documents were
    already normalized by the reference, and the code-point table for the others."""

    data: np.ndarray
    offsets: np.ndarray
    prenormalized: np.ndarray
    map_offsets: np.ndarray
    map_bytes: np.ndarray
    expansion: int


def kernel_text(bodies: pa.Array | pa.ChunkedArray) -> KernelText:
    """The bodies for the kernels, without copying unless some need the reference: those with
    a capital sigma or a character beyond the Basic Multilingual Plane are normalized by
    ``normalize_text`` here; the kernels map every other document through the code-point table."""
    text = bodies.combine_chunks() if isinstance(bodies, pa.ChunkedArray) else bodies
    if not (pa.types.is_string(text.type) or pa.types.is_large_string(text.type)):
        text = text.cast(pa.large_string())
    if text.null_count:
        text = pc.fill_null(text, "")
    data, offsets = utf8_buffers(text)
    flagged, all_ascii = kernels.needs_reference_kernel(data, offsets)
    if flagged.any():
        rows = np.flatnonzero(flagged)
        normalized = pa.array([normalize_text(text[int(row)].as_py()) for row in rows], text.type)
        text = pc.replace_with_mask(text, pa.array(flagged), normalized)
        data, offsets = utf8_buffers(text)
    table = ASCII_ONLY if all_ascii else code_point_table()  # building the table takes about 0.1 s
    return KernelText(data, offsets, flagged, table.offsets, table.mapped, table.expansion)


def _threads() -> int:
    return max(1, min(len(os.sched_getaffinity(0)), 8))


def _fss_columns(bodies: pa.Array, params: SketchParams):
    return kernels.fingerprint_kernel(
        kernel_text(bodies),
        params.shingle_size,
        kernels.round_seeds(params.num_perm, params.minhash_seed),
        params.rows_per_band,
        4 * _threads(),
    )


def _blake2b_columns(bodies: pa.Array, params: SketchParams):
    count = len(bodies)
    token_counts = np.zeros(count, dtype=np.int64)
    shingle_counts = np.zeros(count, dtype=np.int64)
    content = np.zeros(count, dtype=np.uint64)
    signatures = np.zeros((count, params.num_perm), dtype=np.uint64)
    bands = np.zeros((count, params.bands), dtype=np.uint64)
    for row, body in enumerate(bodies.to_pylist()):
        normalized = normalize_text(body)
        tokens = tokenize(normalized)
        shingles = token_shingles(tokens, params.shingle_size)
        digest = hashlib.blake2b(normalized.encode("utf-8"), digest_size=8).digest()
        token_counts[row], shingle_counts[row] = len(tokens), len(shingles)
        content[row] = int.from_bytes(digest, "little")
        signatures[row] = minhash_signature(shingles, params.num_perm, params.minhash_seed)
        if shingles:
            keys = lsh_band_keys(signatures[row], params.rows_per_band)
            bands[row] = [int(key[4:], 16) for key in keys]
    return token_counts, shingle_counts, content, signatures, bands


def fingerprint_batch(doc_ids: pa.Array, bodies: pa.Array, params: SketchParams) -> pa.RecordBatch:
    """Fingerprint one batch. Documents without shingles (empty bodies) get an all-zero signature;
    the band memberships leave them out, so they never share a bucket."""
    compute = _fss_columns if params.hash_scheme == "fss" else _blake2b_columns
    token_counts, shingle_counts, content, signatures, bands = compute(bodies, params)
    return pa.RecordBatch.from_arrays(
        [
            doc_ids.cast(pa.string()),
            pa.array(token_counts.astype(np.int32)),
            pa.array(shingle_counts.astype(np.int32)),
            pa.array(content),
            pa.FixedSizeListArray.from_arrays(pa.array(signatures.ravel()), params.num_perm),
            pa.FixedSizeListArray.from_arrays(pa.array(bands.ravel()), params.bands),
        ],
        schema=fingerprint_schema(params),
    )


def pair_jaccard(
    bodies: pa.Array | pa.ChunkedArray,
    left_rows: np.ndarray,
    right_rows: np.ndarray,
    shingle_size: int,
    hash_scheme: str,
    shingle_counts: np.ndarray | None = None,
) -> np.ndarray:
    """Exact shingle Jaccard for each (left_rows[i], right_rows[i]) pair of rows of ``bodies``.

    ``blake2b`` compares shingle strings; ``fss`` compares 64-bit shingle hashes, which equals the
    string Jaccard unless two different shingles of one pair collide in 64 bits. ``shingle_counts``
    (each body's distinct shingle count, as fingerprinted) saves a counting pass.
    """
    if hash_scheme == "blake2b":
        sets = [token_shingles(tokenize(normalize_text(body)), shingle_size) for body in bodies.to_pylist()]
        return np.array(
            [_set_jaccard(sets[left], sets[right]) for left, right in zip(left_rows, right_rows)],
            dtype=np.float64,
        )
    values, row_offsets = shingle_sets(bodies, shingle_size, shingle_counts)
    return kernels.pair_jaccard_kernel(
        values, row_offsets, np.asarray(left_rows, np.int64), np.asarray(right_rows, np.int64), 4 * _threads()
    )


def signature_overlap(
    signatures: pa.ChunkedArray | pa.Array, left_rows: np.ndarray, right_rows: np.ndarray
) -> np.ndarray:
    """Share of equal coordinates of the signatures (lists of one length) of each row pair."""
    return kernels.pair_overlap_kernel(
        list_matrix(signatures), np.asarray(left_rows, np.int64), np.asarray(right_rows, np.int64)
    )


def list_matrix(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A column of uint64 lists of one length (signatures, band keys) as a (rows, length) array."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(column) == 0:
        return np.zeros((0, 0), dtype=np.uint64)
    lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
    if (lengths != lengths[0]).any():
        raise ValueError("fingerprint lists of different lengths: re-materialize fingerprinted")
    return column.flatten().to_numpy().reshape(len(column), int(lengths[0]))


def shingle_sets(
    bodies: pa.Array | pa.ChunkedArray, shingle_size: int, shingle_counts: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct 64-bit shingle hashes of every body as CSR (values, row offsets), on all cores.
    Without ``shingle_counts`` the bodies are shingled twice: once to count, once to fill. Chunks
    are read where they are (joining them cost a copy of every candidate body)."""
    chunks = bodies.chunks if isinstance(bodies, pa.ChunkedArray) else [bodies]
    texts = [kernel_text(chunk) for chunk in chunks]
    blocks = 4 * _threads()
    if shingle_counts is None:
        # the fingerprint kernel counts them; the smallest sketch keeps its extra work small
        counted = [
            kernels.fingerprint_kernel(text, shingle_size, COUNTING_SEEDS, 1, blocks)[1] for text in texts
        ]
        shingle_counts = np.concatenate(counted) if counted else np.zeros(0, np.int64)
    row_offsets = np.zeros(len(shingle_counts) + 1, dtype=np.int64)
    np.cumsum(shingle_counts, out=row_offsets[1:])
    values = np.empty(row_offsets[-1], dtype=np.uint64)
    first = 0
    for text in texts:
        documents = len(text.offsets) - 1
        layout = row_offsets[first : first + documents + 1]
        if not kernels.shingle_sets_kernel(text, shingle_size, layout, values, blocks):
            raise ValueError(
                "the bodies' shingle counts differ from the fingerprinted ones: documents changed "
                "after fingerprinting; re-materialize fingerprinted and everything downstream"
            )
        first += documents
    return values, row_offsets


def _set_jaccard(left: set, right: set) -> float:
    union = len(left | right)
    return len(left & right) / union if union else 0.0


def exact_jaccard(
    left_bodies: pa.Array, right_bodies: pa.Array, shingle_size: int = 5, hash_scheme: str = "fss"
) -> np.ndarray:
    """Exact shingle Jaccard of each row pair (left_bodies[i], right_bodies[i])."""
    count = len(left_bodies)
    bodies = pa.concat_arrays([left_bodies.cast(pa.large_string()), right_bodies.cast(pa.large_string())])
    rows = np.arange(count, dtype=np.int64)
    return pair_jaccard(bodies, rows, rows + count, shingle_size, hash_scheme)
