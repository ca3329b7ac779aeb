"""The batch folder under Dagster: its files as the dynamic partitions of the incremental assets
(``batch_partitions``), and the ``new_batches`` sensor that registers and runs them
(``batch_sensor``). The batches themselves, their keys and order, are ``core/read/batches.py``."""
