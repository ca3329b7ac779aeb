"""The asset whose step calls an engine step (``engines.py``'s protocol), where it is not the
step's name: what a failed step selects to run again, in a one-shot run and in a batch's (the
incremental assets); and the selection that runs an asset and those after it again.
test_definitions holds them to the graph."""

ONE_SHOT_STEP_ASSETS = {"first_copies": "recall_audit", "release_files": "manifest"}
BATCH_STEP_ASSETS = {"documents": "batch_documents", "fingerprinted": "batch_fingerprints"}
# the one-shot graph's Dagster group; the parameter sweep, which reads its documents, has a group
# of its own ("tuning")
ONE_SHOT_GROUP = "deduplication"
SWEEP_ASSET = "parameter_sweep"


def rerun_from(asset: str, failed: str | None = None) -> str:
    """The Dagster selection that materializes ``asset`` and every asset after it again, for a
    refusal of ``failed`` (None: a step of the one-shot graph or of a batch). From ``documents``
    that is the one-shot group: ``documents*`` would also run the parameter sweep, which runs the
    pipeline once per setting it tries, and leave out ``rejected_documents``, written by the same
    read of the input; unless the sweep itself refused, which ``documents*`` then runs again."""
    return f"group:{ONE_SHOT_GROUP}" if asset == "documents" and failed != SWEEP_ASSET else f"{asset}*"
