"""Text as the specification defines it: normalization (``normalize.py``), the tokenizers (shingle
units) that register themselves (``tokenizers/``, a package here), and the passages a run leaves out of the
shingles (``passages.py``, the ``ignored_passages`` setting; ``boilerplate.py``, the passages many
documents share and the clusters they build)."""
