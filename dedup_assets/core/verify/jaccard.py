"""Exact shingle Jaccard: of two sets of shingle strings (the reference), and of pairs of bodies
over their 64-bit shingle hashes, shingled on all cores by the kernels (verification, the
clusters, the recall audit, evaluation and the checks all measure through here)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np
import pyarrow as pa

from ..sketch import kernels
from ..util.errors import InconsistentTables
from ..sketch.fingerprints import kernel_blocks
from ..text.passages import ignored_hashes
from ..text.normalize import Shingling, document_shingles, kernel_text


@cache
def _counting_seeds() -> np.ndarray:
    """The smallest sketch, used only to count shingles, keeps the kernel's extra work small
    (made on first use: the compiled seed sequence loads from numba's cache, 0.2 s of import)."""
    return kernels.round_seeds(1, 0)


def shingle_set_jaccard(left: set, right: set) -> float:
    """Jaccard of two shingle sets (0 for two empty sets)."""
    union = len(left | right)
    return len(left & right) / union if union else 0.0


# bodies shingled per kernel call: enough to keep every core busy, few enough that a long step
# can say how far it has come between calls
SHINGLED_AT_ONCE = 32_768


def shingle_sets(
    bodies: pa.Array | pa.ChunkedArray,
    shingling: Shingling,
    shingle_counts: np.ndarray | None = None,
    shingled: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct 64-bit shingle hashes of every body as CSR (values, row offsets), on all cores.
    Without ``shingle_counts`` the bodies are shingled twice: once to count, once to fill. Chunks
    are read where they are (joining them would copy every candidate body), at most
    :data:`SHINGLED_AT_ONCE` at a time; ``shingled`` is told how many bodies each time."""
    chunks = bodies.chunks if isinstance(bodies, pa.ChunkedArray) else [bodies]
    parts = [chunk.slice(start, SHINGLED_AT_ONCE) for chunk in chunks for start in range(0, len(chunk), SHINGLED_AT_ONCE)]
    texts = [kernel_text(part, shingling.unit, ignored_hashes(shingling)) for part in parts]
    blocks = kernel_blocks()
    if shingle_counts is None:
        counted = [
            kernels.fingerprint_kernel(
                text, shingling.size, _counting_seeds(), 1, blocks, kernels.NO_PROBES, kernels.NO_PROBE_FILTER
            )[1] for text in texts
        ]
        shingle_counts = np.concatenate(counted) if counted else np.zeros(0, np.int64)
    row_offsets = np.zeros(len(shingle_counts) + 1, dtype=np.int64)
    np.cumsum(shingle_counts, out=row_offsets[1:])
    values = np.empty(row_offsets[-1], dtype=np.uint64)
    first = 0
    for text in texts:
        documents = len(text.offsets) - 1
        layout = row_offsets[first : first + documents + 1]
        if not kernels.shingle_sets_kernel(text, shingling.size, layout, values, blocks):
            raise InconsistentTables(
                "the bodies' shingle counts differ from the fingerprinted ones: documents changed "
                "after fingerprinting; re-materialize fingerprinted and everything downstream"
            )
        first += documents
        if shingled is not None:
            shingled(documents)
    return values, row_offsets


def pair_jaccard(
    bodies: pa.Array | pa.ChunkedArray,
    left_rows: np.ndarray,
    right_rows: np.ndarray,
    shingling: Shingling,
    hash_scheme: str,
    shingle_counts: np.ndarray | None = None,
    shingled: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Exact shingle Jaccard for each (left_rows[i], right_rows[i]) pair of rows of ``bodies``.

    ``blake2b`` compares shingle strings; ``fss`` compares 64-bit shingle hashes, which equals the
    string Jaccard unless two different shingles of one pair collide in 64 bits. ``shingle_counts``
    (each body's distinct shingle count, as fingerprinted) saves a counting pass; ``shingled`` is
    told, as :func:`shingle_sets` goes, how many bodies it has shingled (``fss`` only).
    """
    if hash_scheme == "blake2b":
        return reference_pair_jaccard(bodies, left_rows, right_rows, shingling)
    values, row_offsets = shingle_sets(bodies, shingling, shingle_counts, shingled)
    return kernels.pair_jaccard_kernel(
        values, row_offsets, np.asarray(left_rows, np.int64), np.asarray(right_rows, np.int64), kernel_blocks()
    )


def reference_pair_jaccard(
    bodies: pa.Array | pa.ChunkedArray, left_rows: np.ndarray, right_rows: np.ndarray, shingling: Shingling
) -> np.ndarray:
    """Exact Jaccard of the shingle strings of each (left_rows[i], right_rows[i]) pair of rows of
    ``bodies``, by the reference normalization and shingling (``text/normalize.py``), in Python: no kernel
    and no hash. Only the rows the pairs name are shingled."""
    left_rows, right_rows = np.asarray(left_rows, np.int64), np.asarray(right_rows, np.int64)
    sets = {
        row: document_shingles(bodies[row].as_py(), shingling)
        for row in np.unique(np.concatenate([left_rows, right_rows])).tolist()
    }
    return np.array(
        [shingle_set_jaccard(sets[left], sets[right]) for left, right in zip(left_rows.tolist(), right_rows.tolist())],
        dtype=np.float64,
    )


def exact_jaccard(
    left_bodies: pa.Array, right_bodies: pa.Array, shingling: Shingling = Shingling(), hash_scheme: str = "fss"
) -> np.ndarray:
    """Exact shingle Jaccard of each row pair (left_bodies[i], right_bodies[i])."""
    count = len(left_bodies)
    bodies = pa.concat_arrays([left_bodies.cast(pa.large_string()), right_bodies.cast(pa.large_string())])
    rows = np.arange(count, dtype=np.int64)
    return pair_jaccard(bodies, rows, rows + count, shingling, hash_scheme)
