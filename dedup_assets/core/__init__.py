"""The deduplication library: no Dagster, arranged by the pipeline's steps.

readers (input) -> ingest (documents) -> text -> sketch (fingerprinted) -> lsh (band_memberships,
candidate_pairs) -> verify (scored_pairs, duplicate_pairs) -> cluster (clusters,
deduped_documents) -> release (the files and manifest.json).

``settings`` holds every setting with its default; ``tables`` the table names and the SQL loader;
``store`` how a step's table is written; ``engines`` where a step's work runs; ``steps`` each step
once (what it reads, builds and writes), which the assets and ``pipeline.run_library`` (every
step in one call) both run.
"""
