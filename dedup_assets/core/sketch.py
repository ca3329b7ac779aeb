"""MinHash signatures and LSH band keys with the published blake2b definition.

``hash_int`` is the specification's hash: blake2b-64 of ``"{seed}:{value}"`` read little-endian.
Coordinate ``i`` of a signature uses seed ``minhash_seed + i``. Band ``b`` hashes
``"{b}:" + ",".join(values)`` and is keyed ``"{b:03d}:" + hex digest``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np


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

