"""Per-document fingerprints: token statistics, MinHash signature and LSH band keys."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .sketch import content_hash, lsh_band_keys, minhash_signature
from .text import normalize_text, token_shingles, tokenize

FINGERPRINT_COLUMNS = [
    "doc_id",
    "domain",
    "token_count",
    "shingle_count",
    "content_hash",
    "signature",
]
BAND_COLUMNS = ["doc_id", "domain", "band_index", "lsh_band"]


class SettingsError(ValueError):
    """A setting is out of range or inconsistent with another."""


@dataclass(frozen=True)
class SketchParams:
    shingle_size: int
    num_perm: int
    rows_per_band: int
    minhash_seed: int

    def __post_init__(self) -> None:
        if self.shingle_size < 1:
            raise SettingsError(f"shingle_size must be at least 1, got {self.shingle_size}")
        if self.num_perm < 1 or self.rows_per_band < 1 or self.num_perm % self.rows_per_band:
            raise SettingsError(
                f"num_perm ({self.num_perm}) must be a positive multiple of rows_per_band "
                f"({self.rows_per_band})"
            )

    @property
    def bands(self) -> int:
        return self.num_perm // self.rows_per_band


def fingerprint_documents(documents: pd.DataFrame, params: SketchParams) -> pd.DataFrame:
    """One fingerprint row per document, in the input's ``doc_id`` order.

    Documents without shingles (empty bodies) get an all-zero signature; ``band_memberships``
    gives them no band keys, so they never share a bucket and stay singletons.
    """
    rows = []
    for doc_id, domain, body in zip(documents["doc_id"], documents["domain"], documents["body"]):
        normalized = normalize_text(body)
        tokens = tokenize(normalized)
        shingles = token_shingles(tokens, params.shingle_size)
        signature = minhash_signature(shingles, params.num_perm, params.minhash_seed)
        rows.append(
            (doc_id, domain, len(tokens), len(shingles), content_hash(normalized), signature)
        )
    frame = pd.DataFrame(rows, columns=FINGERPRINT_COLUMNS)
    return frame.astype({"token_count": "int64", "shingle_count": "int64"})


def band_memberships(fingerprinted: pd.DataFrame, rows_per_band: int) -> pd.DataFrame:
    """One row per (document, band) for every document that has shingles."""
    has_shingles = fingerprinted[fingerprinted["shingle_count"] > 0]
    rows = [
        (doc_id, domain, band_index, key)
        for doc_id, domain, signature in zip(
            has_shingles["doc_id"], has_shingles["domain"], has_shingles["signature"]
        )
        for band_index, key in enumerate(lsh_band_keys(signature, rows_per_band))
    ]
    frame = pd.DataFrame(rows, columns=BAND_COLUMNS).astype({"band_index": "int32"})
    return frame.sort_values(["band_index", "lsh_band", "doc_id"], ignore_index=True)


def lsh_probability(similarity: float, bands: int, rows_per_band: int) -> float:
    """Chance that a pair with Jaccard ``similarity`` shares at least one band: 1-(1-s^r)^b."""
    return 1.0 - (1.0 - similarity**rows_per_band) ** bands

