"""The ``tuning`` group: assets run on request only, never by a plain run (``dedup run``, the
``dedup_all`` job, ``--select 'group:deduplication'``)."""

from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from ..core.release.plots import markdown_image
from ..core.release.publish import publish_tuning_files
from ..core.storage.store import TableBuild
from ..core.pipeline.sweep import SWEEP_SAMPLED, SWEEP_TABLE, run_sweep, sweep_files, sweep_png
from ..launch.user_messages import user_errors
from ..settings_resource import DedupSettings
from ..stored_tables.warehouse import DuckDBWarehouse
from .asset_common import KINDS, checked_lineage
from .metadata import markdown_table, table_metadata

GROUP = "tuning"


def _cell(value: int | float | None) -> str:
    """A count with thousands separators, a share to 4 places; a dash for what was not measured."""
    if value is None:
        return "–"
    return f"{value:.4f}" if isinstance(value, float) else f"{value:,}"


@asset(group_name=GROUP, kinds=KINDS | {"numba", "csv"}, deps=["documents"])
def parameter_sweep(context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse) -> MaterializeResult:
    """Runs the pipeline's steps, fingerprints to duplicate pairs, once per combination of
    `sweep_combinations` (num_perm, rows_per_band or auto_bands, jaccard_threshold, shingle_size;
    the run's other settings) on a seeded sample of `sweep_sample_size` documents, in a scratch
    database, and measures each against every true pair of the sample (exact, without LSH): one
    row per combination with bands x rows, pair slots, candidates, edges, recall, precision and
    seconds. Writes `sweep.csv` and `sweep.png` (recall against candidates) to the output
    folder's `tuning/`, which a release keeps."""
    lineage, settings = checked_lineage(context, dedup, warehouse)
    with user_errors(), warehouse.cursor() as cursor:
        sweep = run_sweep(cursor, warehouse.tables, settings, dedup.sweep(), warehouse.memory, context.log.info)
    rows = warehouse.write(
        SWEEP_TABLE,
        TableBuild(sql="select * from sweep_rows", arrow_inputs={"sweep_rows": sweep.rows}),
        {**lineage, SWEEP_SAMPLED: sweep.sampled_documents},
    )
    table = warehouse.qualified(SWEEP_TABLE)
    png = sweep_png(sweep.rows, sweep.sampled_documents)
    with user_errors(), warehouse.cursor() as cursor:
        folder = publish_tuning_files(
            dedup.output_folder(), sweep_files(cursor, table, png), database=warehouse.path, log=context.log.info
        )
        return MaterializeResult(
            metadata={
                **table_metadata(cursor, table, rows),
                "sampled_documents": MetadataValue.int(sweep.sampled_documents),
                "output_dir": MetadataValue.path(str(folder)),
                "sweep": markdown_table(
                    ["combination", "bands x rows", "pair slots", "candidates", "edges", "recall", "precision", "seconds"],
                    (
                        (
                            row["label"],
                            f"{row['bands']} x {row['rows']}",
                            *(_cell(row[name]) for name in ("pair_slots", "candidates", "edges")),
                            "refused" if row["refused"] else _cell(row["recall"]),
                            _cell(row["precision"]),
                            row["seconds"],
                        )
                        for row in sweep.rows.to_pylist()
                    ),
                ),
                "recall_against_candidates": MetadataValue.md(markdown_image(png, "recall against candidates")),
            }
        )


TUNING_ASSETS = [parameter_sweep]
