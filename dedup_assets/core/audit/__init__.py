"""How good a run is: the recall audit's sample and exact search (``sample.py``, ``probe.py``,
``recall.py``), the evaluation against labels (``evaluation.py``), a fixture's contract
(``contract.py``) and whether another engine's tables are the reference engine's
(``consistency.py``)."""
