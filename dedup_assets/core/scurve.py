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


def _area(values: np.ndarray, points: np.ndarray) -> float:
    """The trapezoid rule (numpy's own is named differently before numpy 2)."""
    return float(np.sum((values[1:] + values[:-1]) * np.diff(points)) / 2.0)


def error_areas(threshold: float, bands: int, rows_per_band: int) -> tuple[float, float]:
    """(false-positive area: under the curve over [0, t]; false-negative area: above it over [t, 1])."""
    below, above = _GRID[_GRID <= threshold], _GRID[_GRID >= threshold]
    false_positive = _area(lsh_probability(below, bands, rows_per_band), below)
    false_negative = _area(1.0 - lsh_probability(above, bands, rows_per_band), above)
    return false_positive, false_negative


@cache
def choose_bands(threshold: float, num_perm: int, false_negative_weight: float) -> tuple[int, int]:
    """The (bands, rows per band) with bands x rows <= ``num_perm`` that minimize
    ``(1 - w) * false-positive area + w * false-negative area`` at ``threshold``; among equals,
    the fewest signature values, then the most rows."""
    best = None
    for bands in range(1, num_perm + 1):
        for rows in range(1, num_perm // bands + 1):
            false_positive, false_negative = error_areas(threshold, bands, rows)
            error = (1.0 - false_negative_weight) * false_positive + false_negative_weight * false_negative
            key = (round(error, 12), bands * rows, -rows)
            if best is None or key < best[0]:
                best = (key, bands, rows)
    return best[1], best[2]


# below this chance at the threshold, most pairs there are never verified: recall falls
MIN_CHANCE_AT_THRESHOLD = 0.5
# the false_negative_weight the warning suggests: it keeps about nine in ten pairs at the threshold
SUGGESTED_WEIGHT = 0.9


def weak_bands_warning(
    threshold: float, bands: int, rows_per_band: int, num_perm: int, auto_bands: bool, false_negative_weight: float
) -> str | None:
    """What to change when LSH makes fewer than half of the pairs at the threshold candidates;
    None when the bands suit it."""
    chance = lsh_probability(threshold, bands, rows_per_band)
    if chance >= MIN_CHANCE_AT_THRESHOLD:
        return None
    weight = max(SUGGESTED_WEIGHT, false_negative_weight)
    suggested = choose_bands(threshold, num_perm, weight)
    instead = (
        f"{suggested[0]} x {suggested[1]}, which makes {lsh_probability(threshold, *suggested):.0%} of them candidates"
    )
    if auto_bands and false_negative_weight >= SUGGESTED_WEIGHT:
        change = f"Raise num_perm (now {num_perm}): more signature values allow more bands. "
    elif auto_bands:
        change = f"Raise false_negative_weight (now {false_negative_weight}; {weight} chooses {instead}) or num_perm (now {num_perm}). "
    else:
        change = (
            f"Set auto_bands: true with false_negative_weight: {weight} (at num_perm={num_perm} it chooses "
            f"{instead}), or set fewer rows_per_band (now {rows_per_band}) or more num_perm (now {num_perm}). "
        )
    share = f"only {chance:.0%}" if chance >= 0.01 else "fewer than 1%"
    return (
        f"LSH makes {share} of the pairs at jaccard_threshold={threshold} candidates ({bands} bands "
        f"of {rows_per_band} rows; P(candidate | J = {threshold}) = {chance:.4f}), so duplicates near the "
        "threshold are never verified and recall falls. "
        + change
        + "Then re-materialize fingerprinted and everything downstream: dagster asset materialize -m "
        "dedup_assets.definitions --select 'fingerprinted*'. Re-scoring the stored candidates at a lower "
        "threshold (--select 'scored_pairs*') cannot find pairs the bands never made candidates."
    )
