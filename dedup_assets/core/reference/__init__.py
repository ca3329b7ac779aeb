"""Reference corpora: each reference input fingerprinted once into an index of its own
(``index.py``), and the new documents that match one (``matching.py``)."""
