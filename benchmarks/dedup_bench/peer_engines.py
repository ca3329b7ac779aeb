"""The peer libraries' sketch and LSH, each behind one small interface.

An engine sees every batch of documents in ``sketch`` (their shingles as bytes, and the same sets
as sorted xxh64 hashes in CSR form) and returns every candidate pair (row positions, i < j) from
``candidates`` once all are sketched. Each imports its library when it is made, so the harness
imports only the library it runs.
"""

from __future__ import annotations

from itertools import chain

import numpy as np

from .common import THRESHOLD

SKETCH_SEED = 42
MIX = np.uint64(0xBF58476D1CE4E5B9)


def pair_keys(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """One integer per unordered pair of row positions (below 2**32)."""
    low, high = np.minimum(left, right).astype(np.uint64), np.maximum(left, right).astype(np.uint64)
    return (low << np.uint64(32)) | high


def unique_pairs(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct unordered pairs of row positions (below 2**32), without self-pairs, as (i, j)
    arrays with i < j."""
    other = left != right
    keys = np.unique(pair_keys(left[other], right[other]))
    return (keys >> np.uint64(32)).astype(np.int64), (keys & np.uint64(0xFFFFFFFF)).astype(np.int64)


def neighbor_pairs(indptr: np.ndarray, neighbors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs from query results: row q found ``neighbors[indptr[q]:indptr[q + 1]]``."""
    indptr = np.asarray(indptr, dtype=np.int64)
    queries = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return unique_pairs(queries, np.asarray(neighbors, dtype=np.int64))


def neighbor_list_pairs(results: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    indptr = np.zeros(len(results) + 1, dtype=np.int64)
    np.cumsum([len(found) for found in results], out=indptr[1:])
    return neighbor_pairs(indptr, np.fromiter(chain.from_iterable(results), np.int64, indptr[-1]))


def band_pairs(signatures: np.ndarray, rows_per_band: int) -> tuple[np.ndarray, np.ndarray]:
    """Candidate pairs of a signature matrix: rows whose band keys (a 64-bit mix of the band's
    values) agree in at least one band, found by sorting each band's keys."""
    lefts, rights = [], []
    documents = len(signatures)
    for start in range(0, signatures.shape[1], rows_per_band):
        key = np.zeros(documents, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for column in signatures[:, start : start + rows_per_band].T:
                key = (key ^ column) * MIX
                key ^= key >> np.uint64(31)
        order = np.argsort(key, kind="stable")
        ordered = key[order]
        run_starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
        run_lengths = np.diff(np.r_[run_starts, documents])
        # the document at sorted position p pairs with every later one of its run
        later = np.repeat(run_starts + run_lengths, run_lengths) - np.arange(documents) - 1
        left = np.repeat(np.arange(documents), later)
        step = np.arange(len(left)) - np.repeat(np.cumsum(later) - later, later)
        lefts.append(order[left])
        rights.append(order[left + 1 + step])
    return unique_pairs(np.concatenate(lefts), np.concatenate(rights))


class Engine:
    """A library's sketch and LSH: ``modules`` it imports, a fixed thread count if it has one."""

    modules: tuple[str, ...] = ()
    threads: int | None = None
    finds_pairs = True
    front_end = "python"  # of peers.FRONT_ENDS

    def __init__(self, perm: int, bands: int):
        self.perm, self.bands = perm, bands
        self.rows_per_band = perm // bands

    def sketch(self, shingles: list[list[bytes]], hashes: np.ndarray, offsets: np.ndarray) -> None:
        raise NotImplementedError

    def candidates(self, documents: int) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError


class Floor(Engine):
    """The front end alone: no sketch, no candidates (the floor every engine stands on)."""

    finds_pairs = False

    def sketch(self, shingles, hashes, offsets):
        pass

    def candidates(self, documents):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)


class Datasketch(Engine):
    """``MinHash.bulk`` (its default hash and permutations) and ``MinHashLSH`` with the run's
    bands, queried once per document."""

    modules = ("datasketch",)

    def __init__(self, perm: int, bands: int):
        super().__init__(perm, bands)
        import datasketch

        self.library, self.minhashes = datasketch, []

    def sketch(self, shingles, hashes, offsets):
        self.minhashes += self.library.MinHash.bulk(shingles, num_perm=self.perm, seed=SKETCH_SEED)

    def candidates(self, documents):
        lsh = self.library.MinHashLSH(
            threshold=THRESHOLD, num_perm=self.perm, params=(self.bands, self.rows_per_band)
        )
        with lsh.insertion_session() as session:
            for key, minhash in enumerate(self.minhashes):
                session.insert(key, minhash, check_duplication=False)
        return neighbor_list_pairs([lsh.query(minhash) for minhash in self.minhashes])


class Rensa(Engine):
    """``RMinHash.from_token_sets`` on the shingle bytes and ``RMinHashLSH``: rensa's one LSH
    route that returns candidate keys (its matrix routes return duplicate flags only)."""

    modules = ("rensa",)

    def __init__(self, perm: int, bands: int):
        super().__init__(perm, bands)
        import rensa

        self.library, self.sketches = rensa, []

    def sketch(self, shingles, hashes, offsets):
        self.sketches += self.library.RMinHash.from_token_sets(shingles, self.perm, SKETCH_SEED)

    def candidates(self, documents):
        lsh = self.library.RMinHashLSH(THRESHOLD, self.perm, self.bands)
        lsh.insert_many(self.sketches)
        return neighbor_list_pairs(lsh.query_all(self.sketches))


class RensaRows(Rensa):
    """rensa's fastest sketch kernel on the pre-hashed sets, its digest matrix copied into numpy
    (it has no buffer protocol), candidates by sorting band keys (rensa's LSH takes no matrix)."""

    def sketch(self, shingles, hashes, offsets):
        matrix = self.library.RMinHash.digest_matrix_from_flat_token_hashes(
            hashes, offsets.astype(np.uint64), self.perm, SKETCH_SEED
        )
        self.sketches.append(np.asarray(matrix.to_rows(), dtype=np.uint64))

    def candidates(self, documents):
        return band_pairs(np.concatenate(self.sketches), self.rows_per_band)


class FastSketch(Engine):
    """``FastSimilaritySketch.batch`` on the shingle bytes and FastSketchLSH's ``LSH``, queried
    for every document at once in CSR form."""

    modules = ("FastSketchLSH",)
    threads = 2

    def __init__(self, perm: int, bands: int):
        super().__init__(perm, bands)
        import FastSketchLSH

        self.library = FastSketchLSH
        self.sketcher = FastSketchLSH.FastSimilaritySketch(size=perm, seed=SKETCH_SEED)
        self.signatures = []

    def sketch(self, shingles, hashes, offsets):
        self.signatures.append(np.asarray(self.sketcher.batch(shingles, num_threads=self.threads)))

    def candidates(self, documents):
        signatures = np.ascontiguousarray(np.concatenate(self.signatures), dtype=np.uint64)
        lsh = self.library.LSH(num_perm=self.perm, num_bands=self.bands, num_threads=self.threads)
        lsh.reserve(documents)
        lsh.insert(signatures)
        neighbors, indptr = lsh.query(signatures, format="csr")
        return neighbor_pairs(indptr, neighbors)


class FastSketchPre(FastSketch):
    """As ``fastsketch``, but sketching the pre-hashed sets with ``batch_csr``."""

    def sketch(self, shingles, hashes, offsets):
        self.signatures.append(
            self.sketcher.batch_csr(
                hashes, offsets.astype(np.uint64), prehashed=True, num_threads=self.threads
            )
        )


class FastSketchVec(FastSketchPre):
    """As ``fastsketch-pre``, behind the vectorized front end."""

    modules = ("FastSketchLSH", "polars")
    front_end = "vectorized"


ENGINES: dict[str, type[Engine]] = {
    "datasketch": Datasketch,
    "rensa": Rensa,
    "rensa-rows": RensaRows,
    "fastsketch": FastSketch,
    "fastsketch-pre": FastSketchPre,
    "fastsketch-vec": FastSketchVec,
    "floor": Floor,
}
# what the harness itself imports, on top of an engine's library
HARNESS_MODULES = ("numpy", "pyarrow", "xxhash", "scipy")
