"""The pipeline's assets, in pipeline order."""

from .recall_audit import recall_audit
from .boilerplate import boilerplate, template_clusters
from .candidates import candidate_pairs
from .clustering import clusters, deduped_documents
from .labelled_evaluation import evaluation
from .fingerprinting import band_memberships, fingerprinted
from .input_tables import documents
from .manifest import manifest
from .reference import reference_matches
from .scoring import duplicate_pairs, scored_pairs

PIPELINE_ASSETS = [
    documents,
    fingerprinted,
    band_memberships,
    candidate_pairs,
    scored_pairs,
    duplicate_pairs,
    reference_matches,
    clusters,
    boilerplate,
    template_clusters,
    deduped_documents,
    manifest,
    recall_audit,
    evaluation,
]
