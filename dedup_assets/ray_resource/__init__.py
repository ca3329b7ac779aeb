"""The ``ray`` engine's Dagster side: the ``ray_engine`` resource (``ray_engine``), which says
where Ray runs and where the engine's Parquet tables live. The engine itself, its steps on Ray
Data, is the library's: ``core/distributed/``."""
