"""Planted-pair recall of a sketch and its LSH banding alone, over several seeds.

One run's recall is one draw: which near-threshold pairs share a band depends on the seed, and at
125k planted pairs the draws of one engine differ by about 0.001. To compare sketches rather than
draws, every engine here sketches the *same* 64-bit shingle hashes (ours) with each seed, and a
planted pair counts as found when all rows of at least one band agree. Exact verification accepts
every such pair whose Jaccard is at or above the threshold, so this is the recall of the accepted
edges, without the front-end differences between engines.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from importlib.util import find_spec

import numpy as np
import pyarrow as pa

from .markdown import markdown_table

# Far enough apart that no two seeds share a round seed: the fss scheme draws 2 * num_perm
# consecutive round seeds from minhash_seed, at most 1,024.
SEED_SPACING = 4096
FIRST_SEED = 42

Sketcher = Callable[[int], np.ndarray]  # seed -> (documents, perm) uint64 signatures


@dataclass
class SpreadRow:
    engine: str
    recalls: list[float]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.recalls)

    @property
    def stdev(self) -> float:
        return statistics.stdev(self.recalls) if len(self.recalls) > 1 else 0.0

    @property
    def standard_error(self) -> float:
        return self.stdev / len(self.recalls) ** 0.5

    def as_dict(self) -> dict:
        return {
            "engine": self.engine,
            "recalls": self.recalls,
            "mean": self.mean,
            "stdev": self.stdev,
            "standard_error": self.standard_error,
        }


def seeds(count: int) -> list[int]:
    return [FIRST_SEED + index * SEED_SPACING for index in range(count)]


def banded_hits(signatures: np.ndarray, left: np.ndarray, right: np.ndarray, rows_per_band: int) -> np.ndarray:
    """Whether each (left[i], right[i]) pair agrees on every row of at least one band."""
    hits = np.zeros(len(left), dtype=bool)
    for start in range(0, signatures.shape[1], rows_per_band):
        band = signatures[:, start : start + rows_per_band]
        hits |= (band[left] == band[right]).all(axis=1)
    return hits


def sketchers(bodies: pa.Array, shingle_size: int, perm: int, rows_per_band: int) -> dict[str, Sketcher]:
    """Ours (through ``fingerprint_batch``) and the sketch of each installed peer library (the
    ``bench`` extra), all of the same shingle hashes."""
    from dedup_assets.core.pipeline.step_params import SketchParams
    from dedup_assets.core.sketch.fingerprints import fingerprint_batch, list_matrix
    from dedup_assets.core.text.normalize import Shingling
    from dedup_assets.core.verify.jaccard import shingle_sets

    doc_ids = pa.array(np.arange(len(bodies)).astype(str))

    def ours(seed: int) -> np.ndarray:
        params = SketchParams("fss", shingle_size, perm, rows_per_band, seed)
        return list_matrix(fingerprint_batch(doc_ids, bodies, params).column("signature"))

    engines: dict[str, Sketcher] = {"dedup-assets (fss)": ours}
    values, offsets = shingle_sets(bodies, Shingling(shingle_size))
    offsets = offsets.astype(np.uint64)
    if find_spec("rensa"):
        import rensa

        engines["rensa (RMinHash)"] = lambda seed: np.asarray(
            rensa.RMinHash.digest_matrix_from_flat_token_hashes(values, offsets, perm, seed).to_rows(),
            dtype=np.uint64,
        )
    if find_spec("FastSketchLSH"):
        import FastSketchLSH

        engines["fastsketchlsh (FSS)"] = lambda seed: np.asarray(
            FastSketchLSH.FastSimilaritySketch(size=perm, seed=seed).batch_csr(
                values, offsets, prehashed=True, num_threads=2
            ),
            dtype=np.uint64,
        )
    return engines


def spread_rows(
    engines: dict[str, Sketcher],
    left: np.ndarray,
    right: np.ndarray,
    rows_per_band: int,
    seed_count: int,
) -> list[SpreadRow]:
    """Recall of the (left, right) document pairs (all of them positives) for each engine and
    seed."""
    return [
        SpreadRow(
            name,
            [float(banded_hits(sketch(seed), left, right, rows_per_band).mean()) for seed in seeds(seed_count)],
        )
        for name, sketch in engines.items()
    ]


def independent_expectation(jaccard: np.ndarray, bands: int, rows_per_band: int) -> float:
    """Expected recall with independent MinHash rows: the mean of 1 - (1 - J^r)^b."""
    return float(np.mean(1.0 - (1.0 - jaccard**rows_per_band) ** bands))


def spread_table(rows: list[SpreadRow]) -> str:
    header = ["sketch (same shingle hashes)", "seeds", "mean recall", "std. dev.", "min", "max"]
    figures = [(row, (row.mean, row.stdev, min(row.recalls), max(row.recalls))) for row in rows]
    return markdown_table(header, [[row.engine, str(len(row.recalls)), *(f"{value:.4f}" for value in values)] for row, values in figures])


def comparison(ours: SpreadRow, peers: list[SpreadRow]) -> str:
    """Ours against the peer with the highest mean: the difference and whether it is larger than
    two standard errors of the difference."""
    if not peers:
        return f"recall across {len(ours.recalls)} seeds: ours {ours.mean:.4f} (no peer sketched)"
    best = max(peers, key=lambda row: row.mean)
    difference = ours.mean - best.mean
    margin = 2 * (ours.standard_error**2 + best.standard_error**2) ** 0.5
    if abs(difference) <= margin:
        verdict = "a tie within two standard errors"
    else:
        verdict = "ours higher" if difference > 0 else "ours LOWER"
    return (
        f"recall across {len(ours.recalls)} seeds (same shingles): ours {ours.mean:.4f} vs "
        f"{best.engine} {best.mean:.4f}, difference {difference:+.4f} (2 s.e. = {margin:.4f}): "
        f"{verdict}"
    )
