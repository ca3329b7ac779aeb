"""Wires the one-shot, incremental and tuning assets, their checks, the named jobs (defined here),
the sensors and the resources together; nothing else happens here. Loading it reads no file or command-line
argument and writes nothing: the resources find their files when a run starts, and the batch
folder's files become partitions through ``dedup register-batches`` or the ``new_batches``
sensor."""

from dagster import AssetSelection, Definitions, define_asset_job

from .assets import PIPELINE_ASSETS
from .assets.asset_common import GROUP
from .assets.batch_graph import INCREMENTAL_ASSETS
from .assets.tuning import TUNING_ASSETS
from .batch_runs.batch_sensor import new_batches
from .checks import PIPELINE_CHECKS
from .engine_resource import EngineResource
from .launch.executor import warming_in_process_executor
from .launch.run_arguments import JOB_DESCRIPTIONS
from .launch.run_health import dead_runs
from .settings_resource import DedupSettings
from .stored_tables.tables_io import with_tables_io
from .stored_tables.warehouse import DuckDBWarehouse

# named jobs, so that runs show what they did instead of ``__ASSET_JOB`` (``dedup run --job`` picks
# one). The whole one-shot graph, with its checks:
dedup_all = define_asset_job(
    "dedup_all",
    selection=AssetSelection.groups(GROUP),
    description=JOB_DESCRIPTIONS["dedup_all"],
)

# after changing jaccard_threshold or signature_overlap_threshold: the stored candidates are
# scored again and everything after them rebuilt, without fingerprinting again
rescore = define_asset_job(
    "rescore",
    selection=AssetSelection.assets("scored_pairs").downstream(),
    description=JOB_DESCRIPTIONS["rescore"],
)

PIPELINE_JOBS = [dedup_all, rescore]

# configured at launch, so that the IO manager shares the run's one warehouse (and connection)
warehouse = DuckDBWarehouse.configure_at_launch()

defs = Definitions(
    assets=[*PIPELINE_ASSETS, *INCREMENTAL_ASSETS, *TUNING_ASSETS],
    asset_checks=PIPELINE_CHECKS,
    jobs=PIPELINE_JOBS,
    sensors=[dead_runs, new_batches],
    resources=with_tables_io({"dedup": DedupSettings(), "warehouse": warehouse, "engine": EngineResource()}),
    executor=warming_in_process_executor,
)
