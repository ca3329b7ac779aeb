"""The published MinHash definition, bit for bit: the ``blake2b`` hash scheme, and the reference
the fast scheme's behaviour is checked against.

``hash_int`` is the specification's hash: blake2b-64 of ``"{seed}:{value}"`` read little-endian.
Coordinate ``i`` of a signature uses seed ``minhash_seed + i``. Band ``b`` hashes
``"{b}:" + ",".join(values)`` and is keyed ``"{b:03d}:" + hex digest``; the band column stores the
integer whose hex is that digest, so ``printf('%03d:%016x', band_index, lsh_band)`` is the key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np
import pyarrow as pa

from ..pipeline.step_params import SketchParams
from ..text.normalize import joined, kept_shingles, normalize_text, token_shingles, tokenize

# The blake2b scheme's hash, recorded with its fingerprints (``scheme.py``). It is the
# published MinHash byte for byte and stays so: this is never raised.
BLAKE2B_SHINGLE_HASH = "blake2b-v1"


def hash_int(value: str, seed: int) -> int:
    digest = hashlib.blake2b(f"{seed}:{value}".encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def minhash_signature(shingles: Iterable[str], num_perm: int, seed: int) -> np.ndarray:
    """``num_perm`` minimum hashes as uint64; all zeros for a document without shingles."""
    values = list(shingles)
    if not values:
        return np.zeros(num_perm, dtype=np.uint64)
    return np.array(
        [min(hash_int(value, seed + index) for value in values) for index in range(num_perm)],
        dtype=np.uint64,
    )


def lsh_band_keys(signature: np.ndarray, rows_per_band: int) -> list[str]:
    """One join key per band of ``rows_per_band`` consecutive signature values."""
    if rows_per_band <= 0 or len(signature) % rows_per_band != 0:
        raise ValueError(
            f"signature length {len(signature)} must be divisible by rows_per_band {rows_per_band}"
        )
    keys = []
    for band_index, offset in enumerate(range(0, len(signature), rows_per_band)):
        band_values = signature[offset : offset + rows_per_band]
        payload = f"{band_index}:" + ",".join(str(int(value)) for value in band_values)
        digest = hashlib.blake2b(payload.encode("utf-8"), digest_size=8).hexdigest()
        keys.append(f"{band_index:03d}:{digest}")
    return keys


def blake2b_columns(bodies: pa.Array, params: SketchParams):
    """Token and shingle counts, content hashes, signatures and band keys of one batch."""
    count = len(bodies)
    token_counts = np.zeros(count, dtype=np.int64)
    shingle_counts = np.zeros(count, dtype=np.int64)
    content = np.zeros(count, dtype=np.uint64)
    signatures = np.zeros((count, params.num_perm), dtype=np.uint64)
    bands = np.zeros((count, params.bands), dtype=np.uint64)
    for row, body in enumerate(bodies.to_pylist()):
        normalized = normalize_text(body)
        tokens = tokenize(normalized, params.shingle_unit)
        shingles = kept_shingles(token_shingles(tokens, params.shingle_size, params.shingle_unit), params.ignored_shingles)
        # the text its tokens make: in the char unit, without the spaces
        digest = hashlib.blake2b(joined(tokens, params.shingle_unit).encode("utf-8"), digest_size=8).digest()
        token_counts[row], shingle_counts[row] = len(tokens), len(shingles)
        content[row] = int.from_bytes(digest, "little")
        signatures[row] = minhash_signature(shingles, params.num_perm, params.minhash_seed)
        if shingles:
            keys = lsh_band_keys(signatures[row][: params.bands * params.rows_per_band], params.rows_per_band)
            bands[row] = [int(key[4:], 16) for key in keys]
    return token_counts, shingle_counts, content, signatures, bands
