"""The nine pipeline assets, in pipeline order, and their checks."""

from .candidates import candidate_pairs
from .clustering import clusters, deduped_documents
from .fingerprinting import band_memberships, fingerprinted
from .ingest import documents
from .release import manifest
from .scoring import duplicate_pairs, scored_pairs

PIPELINE_ASSETS = [
    documents,
    fingerprinted,
    band_memberships,
    candidate_pairs,
    scored_pairs,
    duplicate_pairs,
    clusters,
    deduped_documents,
    manifest,
]
