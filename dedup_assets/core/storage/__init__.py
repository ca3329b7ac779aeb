"""Where tables live: their names and SQL (``tables.py``), how a step's table and its lineage are
written into DuckDB (``store.py``), and errors about the place written to (``places.py``)."""
