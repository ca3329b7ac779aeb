"""Fingerprints: per document its token and shingle counts, content hash, MinHash signature and
band keys (``fingerprints.py``), from the numba kernels (``kernels.py``); the published MinHash
bit for bit (``minhash.py``) and the scheme each stored fingerprint table records (``scheme.py``)."""
