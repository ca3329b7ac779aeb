"""The LSH S-curve: the chance that a pair of Jaccard s shares a bucket in at least one of b
bands of r rows, 1 - (1 - s^r)^b, and the (b, r) that suits a threshold best.

A threshold t splits the curve's errors in two: the area under it below t (pairs under the
threshold that still become candidates: work, not wrong results, since every candidate is
verified) and the area above it over [t, 1] (duplicates never made candidates: lost recall).
:func:`choose_bands` minimizes their weighted sum, as datasketch and text-dedup do.
"""

from __future__ import annotations

from functools import cache

import numpy as np

# points of the trapezoid rule over [0, 1]: the areas are smooth, and ties between (b, r)
# pairs are settled the same way on every machine
_GRID = np.linspace(0.0, 1.0, 2_001)


def lsh_probability(similarity: float | np.ndarray, bands: int, rows_per_band: int) -> float | np.ndarray:
    """Chance that a pair with Jaccard ``similarity`` shares at least one band: 1-(1-s^r)^b."""
    return 1.0 - (1.0 - similarity**rows_per_band) ** bands


def _area(values: np.ndarray, steps: np.ndarray) -> float:
    """The trapezoid rule over points ``steps`` apart (numpy's own is named differently before numpy 2)."""
    return float(np.sum((values[1:] + values[:-1]) * steps) / 2.0)


class _Areas:
    """:func:`error_areas` at one threshold, keeping what its (b, r) pairs share: the grid's halves
    and steps, and 1 - s^r per r. choose_bands asks for up to 1,500 pairs, once per process for
    each setting it checks (a third of a second of every start, the sweep's at the defaults, before)."""

    def __init__(self, threshold: float):
        self.below, self.above = _GRID[_GRID <= threshold], _GRID[_GRID >= threshold]
        self.steps = np.diff(self.below), np.diff(self.above)
        self._misses: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def __call__(self, bands: int, rows_per_band: int) -> tuple[float, float]:
        # the same operations on the same values as lsh_probability, so the same bits
        if rows_per_band not in self._misses:
            self._misses[rows_per_band] = (1.0 - self.below**rows_per_band, 1.0 - self.above**rows_per_band)
        below, above = self._misses[rows_per_band]
        false_positive = _area(1.0 - below**bands, self.steps[0])
        false_negative = _area(1.0 - (1.0 - above**bands), self.steps[1])
        return false_positive, false_negative


def error_areas(threshold: float, bands: int, rows_per_band: int) -> tuple[float, float]:
    """(false-positive area: under the curve over [0, t]; false-negative area: above it over [t, 1])."""
    return _Areas(threshold)(bands, rows_per_band)


def lsh_recall(threshold: float, bands: int, rows_per_band: int) -> float:
    """The share of pairs at or above ``threshold`` that become candidates, their Jaccard spread
    evenly up to 1: one minus the false-negative area over its width."""
    return 1.0 - error_areas(threshold, bands, rows_per_band)[1] / (1.0 - threshold) if threshold < 1 else 1.0


@cache
def choose_bands(threshold: float, num_perm: int, false_negative_weight: float) -> tuple[int, int]:
    """The (bands, rows per band) with bands x rows <= ``num_perm`` that minimize
    ``(1 - w) * false-positive area + w * false-negative area`` at ``threshold``; among equals,
    the fewest signature values, then the most rows."""
    best, areas = None, _Areas(threshold)
    for bands in range(1, num_perm + 1):
        for rows in range(1, num_perm // bands + 1):
            false_positive, false_negative = areas(bands, rows)
            error = (1.0 - false_negative_weight) * false_positive + false_negative_weight * false_negative
            key = (round(error, 12), bands * rows, -rows)
            if best is None or key < best[0]:
                best = (key, bands, rows)
    return best[1], best[2]
