"""Clusters: the duplicate pairs' connected components (or star rounds), each member's
representative and whether it is chained, and the deduplicated documents (``components.py``)."""
