"""The ``warehouse_tables`` IO manager: a published table of the one-shot graph
(``deduped_documents``, ``clusters``, ``duplicate_pairs``, ``rejected_documents``: their assets
name it as their io_manager_key) as an input of an asset of your own, such as ``def
training_set(deduped_documents)``.

The asset receives the whole table as a ``pyarrow.Table``, read in one query of the run's
connection, so it stays valid once that connection closes (a lazy DuckDB relation would not).
Our assets keep writing their tables themselves, through the warehouse: in one transaction with
their lineage, streamed in batches that need not fit in memory, which ``handle_output`` (handed
one whole value) could not do. They return no value, so Dagster gives this manager nothing to
store.
"""

# no `from __future__ import annotations`: Dagster reads the warehouse field's annotation to
# tell a nested resource from config
import pyarrow as pa
from dagster import ConfigurableIOManager, Failure, InputContext, OutputContext

from ..launch.user_messages import hide_refusal_tracebacks
from .warehouse import DuckDBWarehouse

WAREHOUSE_TABLES = "warehouse_tables"


class WarehouseTables(ConfigurableIOManager):
    """Loads a published table from the warehouse as a pyarrow.Table (resource key
    ``warehouse_tables``)."""

    warehouse: DuckDBWarehouse

    def handle_output(self, context: OutputContext, obj: object) -> None:
        hide_refusal_tracebacks(context.log)
        raise Failure(
            description=f"Asset {context.asset_key.to_user_string()} returned a value to the {WAREHOUSE_TABLES} IO "
            "manager, which only loads the pipeline's tables (their assets write them). Give the asset "
            "another io_manager_key."
        )

    def load_input(self, context: InputContext) -> pa.Table:
        name = context.asset_key.path[-1]
        hide_refusal_tracebacks(context.log)  # before the step's code runs, which refusal() finds
        # a table not built into this database fails here with the command that builds it
        self.warehouse.upstream_lineage(name, context.op_def.name)
        with self.warehouse.cursor() as cursor:
            return cursor.sql(f"select * from {self.warehouse.qualified(name)}").to_arrow_table()



def with_tables_io(resources: dict) -> dict:
    """``resources`` (holding the ``warehouse``) and this IO manager on that warehouse: what the
    one-shot assets need, since four of them name it. A warehouse configured at launch is shared
    with the run's steps; a configured one is copied (the same file)."""
    return {**resources, WAREHOUSE_TABLES: WarehouseTables(warehouse=resources["warehouse"])}
