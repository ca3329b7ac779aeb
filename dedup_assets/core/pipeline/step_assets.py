"""The asset whose step calls an engine step (``engines.py``'s protocol), where it is not the
step's name: what a failed step selects to run again, in a one-shot run and in a batch's (the
incremental assets); and the selection that runs an asset and those after it again.
test_definitions holds them to the graph."""

ONE_SHOT_STEP_ASSETS = {"first_copies": "recall_audit", "release_files": "manifest"}
BATCH_STEP_ASSETS = {"documents": "batch_documents", "fingerprinted": "batch_fingerprints"}
# the one-shot graph's Dagster group (the parameter sweep has a group of its own, "tuning")
ONE_SHOT_GROUP = "deduplication"


def rerun_from(asset: str) -> str:
    """The Dagster selection that materializes ``asset`` and every asset after it again. From
    ``documents`` that is the one-shot group: ``documents*`` would also run the parameter sweep,
    which runs the pipeline once per setting it tries and only reads ``documents``, and leave out
    ``rejected_documents``, written by the same read of the input."""
    return f"group:{ONE_SHOT_GROUP}" if asset == "documents" else f"{asset}*"
