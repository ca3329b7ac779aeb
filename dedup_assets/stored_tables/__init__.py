"""How the pipeline's tables reach DuckDB and Dagster: the ``warehouse`` resource (the DuckDB file
every table lives in, ``warehouse``), the ``warehouse_tables`` IO manager that hands the published
tables to assets of your own (``tables_io``), and the lineage every stored table carries, which
refuses to mix tables built with other settings (``lineage``). How a table is written is
``core/storage/store.py``."""
