"""Exact verification of candidate pairs. Exact shingle Jaccard is the only acceptance rule;
MinHash signature overlap is recorded as a diagnostic."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .fingerprint import SettingsError

SCORED_COLUMNS = [
    "left_doc_id",
    "right_doc_id",
    "left_domain",
    "right_domain",
    "shared_bands",
    "jaccard",
    "signature_overlap",
    "is_exact",
    "is_duplicate",
    "reason",
]

JACCARD_AND_MINHASH = "jaccard_and_minhash"
JACCARD_MATCH = "jaccard_match"
MINHASH_ONLY_REJECTED = "minhash_only_rejected"
BELOW_JACCARD_THRESHOLD = "below_jaccard_threshold"


@dataclass(frozen=True)
class Thresholds:
    jaccard: float
    signature_overlap: float

    def __post_init__(self) -> None:
        for name, value in (("jaccard", self.jaccard), ("signature_overlap", self.signature_overlap)):
            if not 0.0 < value <= 1.0:
                raise SettingsError(f"{name} threshold must be in (0, 1], got {value}")


def jaccard(left: set, right: set) -> float:
    if not left and not right:
        return 0.0
    return len(left & right) / len(left | right)


def signature_overlap(left: np.ndarray, right: np.ndarray) -> float:
    left, right = np.asarray(left), np.asarray(right)
    if len(left) != len(right) or len(left) == 0:
        raise ValueError("signatures must be non-empty and of equal length")
    return float(np.count_nonzero(left == right)) / len(left)


def decide(exact_score: float, minhash_score: float, thresholds: Thresholds) -> tuple[bool, str]:
    """(is_duplicate, reason). Only the exact score can make a duplicate edge."""
    exact_match = exact_score >= thresholds.jaccard
    signature_match = minhash_score >= thresholds.signature_overlap
    if exact_match:
        return True, JACCARD_AND_MINHASH if signature_match else JACCARD_MATCH
    return False, MINHASH_ONLY_REJECTED if signature_match else BELOW_JACCARD_THRESHOLD


def score_pairs(
    candidates: pd.DataFrame,
    shingles_of: Callable[[str], set],
    signatures: Mapping[str, np.ndarray],
    content_hashes: Mapping[str, str],
    thresholds: Thresholds,
) -> pd.DataFrame:
    """Score every candidate pair. ``shingles_of`` gives a document's shingle set on demand, so only
    documents that appear in a candidate pair are ever shingled again."""
    rows = []
    for pair in candidates.itertuples(index=False):
        exact_score = jaccard(shingles_of(pair.left_doc_id), shingles_of(pair.right_doc_id))
        minhash_score = signature_overlap(
            signatures[pair.left_doc_id], signatures[pair.right_doc_id]
        )
        is_duplicate, reason = decide(exact_score, minhash_score, thresholds)
        is_exact = content_hashes[pair.left_doc_id] == content_hashes[pair.right_doc_id]
        rows.append(
            (
                pair.left_doc_id,
                pair.right_doc_id,
                pair.left_domain,
                pair.right_domain,
                pair.shared_bands,
                exact_score,
                minhash_score,
                is_exact,
                is_duplicate,
                reason,
            )
        )
    frame = pd.DataFrame(rows, columns=SCORED_COLUMNS)
    return frame.astype(
        {
            "shared_bands": "int32",
            "jaccard": "float64",
            "signature_overlap": "float64",
            "is_exact": "bool",
            "is_duplicate": "bool",
        }
    )
