"""Wires the assets, their checks, the named jobs, the dead-run sensor and the two resources
together; nothing else happens here."""

from dagster import Definitions, EnvVar, in_process_executor

from .assets import PIPELINE_ASSETS
from .checks import PIPELINE_CHECKS
from .jobs import PIPELINE_JOBS
from .run_health import dead_runs
from .settings import DedupSettings
from .warehouse import DuckDBWarehouse

defs = Definitions(
    assets=PIPELINE_ASSETS,
    asset_checks=PIPELINE_CHECKS,
    jobs=PIPELINE_JOBS,
    sensors=[dead_runs],
    resources={
        "dedup": DedupSettings(),
        "warehouse": DuckDBWarehouse(
            database=EnvVar("DEDUP_DATABASE"), memory_limit=EnvVar("DEDUP_DUCKDB_MEMORY")
        ),
    },
    executor=in_process_executor,
)
