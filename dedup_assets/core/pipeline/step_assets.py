"""The asset whose step calls an engine step (``engines.py``'s protocol), where it is not the
step's name: what a failed step selects to run again, in a one-shot run and in a batch's (the
incremental assets). test_definitions holds them to the graph."""

ONE_SHOT_STEP_ASSETS = {"first_copies": "recall_audit"}
BATCH_STEP_ASSETS = {"documents": "batch_documents", "fingerprinted": "batch_fingerprints"}
