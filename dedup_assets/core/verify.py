"""Verification settings and decision reasons. The decision itself runs in SQL
(``sql/scored_pairs.sql``): exact shingle Jaccard is the only acceptance rule; MinHash signature
overlap only chooses between the reasons."""

from __future__ import annotations

from dataclasses import dataclass

from .fingerprint import SettingsError

REASONS = ("jaccard_and_minhash", "jaccard_match", "minhash_only_rejected", "below_jaccard_threshold")


@dataclass(frozen=True)
class Thresholds:
    jaccard: float
    signature_overlap: float

    def __post_init__(self) -> None:
        for name, value in (("jaccard", self.jaccard), ("signature_overlap", self.signature_overlap)):
            if not 0.0 < value <= 1.0:
                raise SettingsError(f"{name} threshold must be in (0, 1], got {value}")
