"""Verification decision reasons. The decision itself runs in SQL (``sql/scored_pairs.sql``):
exact shingle Jaccard is the only acceptance rule; MinHash signature overlap only chooses between
the reasons."""

from __future__ import annotations

from .settings import Thresholds  # noqa: F401 (re-exported)

REASONS = ("jaccard_and_minhash", "jaccard_match", "minhash_only_rejected", "below_jaccard_threshold")
