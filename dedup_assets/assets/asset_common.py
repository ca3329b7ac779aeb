"""What every asset module shares: the group, the kinds, the check of an asset's upstream
tables against the run's settings, and the run of its step (``core/pipeline/steps.py``)."""

from __future__ import annotations

from dagster import AssetExecutionContext

from ..core.text.passages import with_found_passages
from ..core.settings.model import Settings
from ..core.pipeline.run import Lineage, Run
from ..core.pipeline.step_assets import ONE_SHOT_GROUP
from ..core.storage.store import TableBuild
from ..core.storage.tables import PIPELINE_TABLES
from ..engine_resource import EngineResource
from ..launch.user_messages import user_errors
from ..stored_tables.lineage import combined_lineage, refuse_changed_input
from ..settings_resource import DedupSettings
from ..stored_tables.warehouse import DuckDBWarehouse

GROUP = ONE_SHOT_GROUP
KINDS = {"duckdb", "arrow"}


def checked_lineage(
    context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse
) -> tuple[dict, Settings]:
    """The lineage of the asset being built (its upstream tables' lineage and its own step's
    settings) and the run's settings. Fails, before any work, if an upstream table is missing or
    was built with other settings than this run's."""
    name = context.asset_key.path[-1]
    upstreams = sorted(
        (key.path[-1] for key in context.assets_def.asset_deps[context.asset_key]),
        key=PIPELINE_TABLES.index,
    )
    lineages = {upstream: warehouse.upstream_lineage(upstream, name) for upstream in upstreams}
    with user_errors():
        current = dedup.current_values()
        lineage = combined_lineage(name, current, lineages)
        refuse_changed_input(lineage, current, name)
        # after fingerprinted: with the passages it found to leave out (ignore_shared_above)
        return lineage, with_found_passages(dedup.settings(), lineage)


def step_run(
    context: AssetExecutionContext,
    warehouse: DuckDBWarehouse,
    engine: EngineResource | None,
    lineage: dict,
    settings: Settings,
) -> Run:
    """The asset's step as ``core.pipeline.steps`` runs it: on the run's engine, which ``engine``
    configures (None: a step that asks for none), with the warehouse's cursors, writing each
    table with the asset's ``lineage`` and the step's own."""

    def write(name: str, build: TableBuild, own: Lineage) -> int:
        merged = (lambda: {**lineage, **own()}) if callable(own) else {**lineage, **own}
        return warehouse.write(name, build, merged)

    return Run(
        settings, warehouse.tables, lambda: engine.for_settings(settings, warehouse.path), warehouse.cursor,
        write, context.log.info,
    )
