"""The whole algorithm in one call, without Dagster: for scripts, benchmarks and fixture design."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .cluster import connected_clusters
from .fingerprint import SketchParams, band_memberships, fingerprint_documents
from .lsh import bucket_pressure, candidate_pairs, ensure_within_budget
from .select import rank_cluster_members
from .summary import run_counts
from .text import document_shingles
from .verify import Thresholds, score_pairs


@dataclass
class PipelineResult:
    fingerprinted: pd.DataFrame
    band_memberships: pd.DataFrame
    candidate_pairs: pd.DataFrame
    scored_pairs: pd.DataFrame
    duplicate_pairs: pd.DataFrame
    clusters: pd.DataFrame
    deduped_documents: pd.DataFrame
    counts: dict


def shingle_lookup(documents: pd.DataFrame, shingle_size: int):
    """``doc_id -> shingle set``, computed lazily and once per document."""
    bodies = dict(zip(documents["doc_id"], documents["body"]))
    cache: dict[str, set] = {}

    def shingles_of(doc_id: str) -> set:
        if doc_id not in cache:
            cache[doc_id] = document_shingles(bodies[doc_id], shingle_size)
        return cache[doc_id]

    return shingles_of


def score_candidates(
    documents: pd.DataFrame,
    fingerprinted: pd.DataFrame,
    candidates: pd.DataFrame,
    shingle_size: int,
    thresholds: Thresholds,
) -> pd.DataFrame:
    return score_pairs(
        candidates,
        shingle_lookup(documents, shingle_size),
        dict(zip(fingerprinted["doc_id"], fingerprinted["signature"])),
        dict(zip(fingerprinted["doc_id"], fingerprinted["content_hash"])),
        thresholds,
    )


def accepted_edges(scored: pd.DataFrame) -> pd.DataFrame:
    return scored[scored["is_duplicate"]].reset_index(drop=True)


def cluster_members(documents: pd.DataFrame, fingerprinted: pd.DataFrame, duplicates: pd.DataFrame) -> pd.DataFrame:
    clusters = connected_clusters(
        documents["doc_id"], zip(duplicates["left_doc_id"], duplicates["right_doc_id"])
    )
    ranking_inputs = documents[["doc_id", "crawled_at"]].merge(
        fingerprinted[["doc_id", "token_count"]], on="doc_id"
    )
    return rank_cluster_members(clusters.merge(ranking_inputs, on="doc_id"))


def representatives(documents: pd.DataFrame, clusters: pd.DataFrame) -> pd.DataFrame:
    kept = clusters.loc[clusters["representative_rank"] == 1, ["doc_id", "cluster_id", "cluster_size"]]
    return documents.merge(kept, on="doc_id").sort_values("doc_id", ignore_index=True)


def run_pipeline(
    documents: pd.DataFrame,
    params: SketchParams,
    thresholds: Thresholds,
    max_pair_slots: int,
) -> PipelineResult:
    fingerprinted = fingerprint_documents(documents, params)
    bands = band_memberships(fingerprinted, params.rows_per_band)
    pressure = bucket_pressure(bands)
    ensure_within_budget(pressure, max_pair_slots)
    candidates = candidate_pairs(bands)
    scored = score_candidates(documents, fingerprinted, candidates, params.shingle_size, thresholds)
    duplicates = accepted_edges(scored)
    clusters = cluster_members(documents, fingerprinted, duplicates)
    deduped = representatives(documents, clusters)
    counts = run_counts(documents, candidates, pressure.pair_slots, duplicates, clusters)
    return PipelineResult(
        fingerprinted, bands, candidates, scored, duplicates, clusters, deduped, counts
    )
