"""The deduplication library: no Dagster, a folder per stage of the pipeline, in the order a run
goes through them (docs/architecture.md, "The library's stage folders").

read (the input -> documents) -> text (normalization, tokenizers) -> sketch (fingerprinted) ->
lsh (band_memberships, candidate_pairs) -> verify (scored_pairs, duplicate_pairs) -> reference
(reference_matches) -> cluster and keep (clusters, deduped_documents) -> audit (recall_audit,
evaluation) -> release (the files and manifest.json); incremental adds a batch to a stored index.

``pipeline`` holds the one ``Run`` every step gets, each step once (``pipeline/steps.py``: what it
reads, builds and writes, which the assets and ``pipeline/library.py``'s ``run_library`` both
run) and the engines it runs on; ``settings`` every setting with its default; ``storage`` the
table names, the SQL loader and how a step's table is written; ``distributed`` the ray engine.
"""
