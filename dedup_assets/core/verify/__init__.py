"""Exact verification: each candidate pair scored by the Jaccard of its shingle sets
(``jaccard.py``), the scored and the duplicate pairs (``pairs.py``)."""
