"""Wires the assets, the settings resource and the DuckDB IO manager together."""

from dagster import Definitions, in_process_executor

from .assets import PIPELINE_ASSETS
from .io_manager import DedupDuckDBIOManager
from .settings import DEFAULT_DATABASE, DedupSettings, env_path

defs = Definitions(
    assets=PIPELINE_ASSETS,
    resources={
        "io_manager": DedupDuckDBIOManager(
            database=env_path("DEDUP_DATABASE", DEFAULT_DATABASE), schema="dedup"
        ),
        "dedup": DedupSettings(),
    },
    executor=in_process_executor,
)
