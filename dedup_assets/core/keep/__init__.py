"""Which copy of a cluster is kept: the keep policy's rules (``rule.py``), one room for one-shot,
incremental and every engine, and the input columns the rules read (``columns.py``)."""
