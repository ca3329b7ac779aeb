"""The release folder: its Parquet and CSV files streamed from the tables (``files.py``,
``parquet_files.py``, ``sinks.py``), published whole behind a pointer a reader can trust
(``publish.py``, ``pointer.py``), its figures (``summary.py``), pictures (``plots.py``) and where
duplicates come from (``diagnostics.py``)."""
