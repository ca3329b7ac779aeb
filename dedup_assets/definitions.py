"""Wires the assets, their checks, the settings resource and the DuckDB IO manager together."""

import os

from dagster import Definitions, in_process_executor

from .assets import PIPELINE_ASSETS
from .checks import PIPELINE_CHECKS
from .io_manager import DedupDuckDBIOManager
from .settings import DEFAULT_DATABASE, DedupSettings, env_path

defs = Definitions(
    assets=PIPELINE_ASSETS,
    asset_checks=PIPELINE_CHECKS,
    resources={
        "io_manager": DedupDuckDBIOManager(
            database=env_path("DEDUP_DATABASE", DEFAULT_DATABASE),
            schema="dedup",
            connection_config={"memory_limit": os.environ.get("DEDUP_DUCKDB_MEMORY", "2GB")},
        ),
        "dedup": DedupSettings(),
    },
    executor=in_process_executor,
)
