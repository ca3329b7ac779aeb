import pyarrow as pa
from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from ..core.lsh.candidates import BucketPressure, bucket_pressure
from ..core.read import InputFile
from ..core.release.publish import publish_release
from ..launch.user_messages import user_errors
from ..core.storage.store import TableBuild
from ..core.storage.tables import INPUT_SKIPPED_FILES, INPUT_STAMPS, PIPELINE_TABLES
from ..engine_resource import EngineResource
from ..settings_resource import DedupSettings
from ..stored_tables.warehouse import DuckDBWarehouse
from .asset_common import GROUP, KINDS, checked_lineage
from .metadata import markdown_table, table_metadata


@asset(group_name=GROUP, kinds=KINDS | {"parquet", "json"}, deps=list(PIPELINE_TABLES))
def manifest(
    context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse, engine: EngineResource
) -> MaterializeResult:
    """Writes the release files to the output folder (`DEDUP_OUTPUT_DIR` or `output_dir`) in
    one switch: they are written into a staging folder beside it, then swapped in whole under a
    lock, so the folder always holds one complete release. The files: fingerprints, candidate
    summary, scored and duplicate pairs, clusters, cluster inspection, deduped documents (a folder
    of Parquet parts, written in parallel), rejected documents, the recall audit's missed pairs and figures, and `manifest.json` with the settings, the input's size and sha256, library
    versions, every file's rows and sha256 and the run's counts (`dedup verify-release` checks a
    folder against it). The stored table holds the counts, one row per metric.

    On engine `ray` the two large files, the fingerprints and the deduped documents, are written
    by the cluster's workers while this node writes the others, and the manifest lists the rows
    and sha256 they give back: the output folder must then be on storage every node sees, as the
    engine's `dataset_root` is.
    """
    lineage, _ = checked_lineage(context, dedup, warehouse)
    settings = dedup.settings()  # as given: the passages fingerprinting found are beside them
    tables = warehouse.tables
    input_file = InputFile(
        lineage["input_path"], lineage["input_byte_size"], lineage["input_sha256"],
        tuple(lineage.get(INPUT_SKIPPED_FILES, ())), tuple(tuple(stamp) for stamp in lineage.get(INPUT_STAMPS, ())),
    )
    output_dir = dedup.output_folder()
    with user_errors(), warehouse.cursor() as cursor:
        pressure = BucketPressure.from_lineage(lineage) or bucket_pressure(cursor, tables)
        written = publish_release(
            cursor, tables, output_dir, settings, input_file, pressure,
            database=warehouse.path, log=context.log.info,
            settings_sources=dedup.settings_sources(), engine=engine.for_settings(settings, warehouse.path),
        )
    counts = written["counts"]
    metrics = pa.table({"metric": list(counts), "value": [float(v) for v in counts.values()]})
    rows = warehouse.write("manifest", TableBuild(sql="select * from metrics", arrow_inputs={"metrics": metrics}), lineage)
    with warehouse.cursor() as cursor:
        return MaterializeResult(
            metadata={
                **table_metadata(cursor, warehouse.qualified("manifest"), rows),
                "output_dir": MetadataValue.path(str(output_dir)),
                "files": markdown_table(
                    ["file", "rows", "sha256"],
                    ((o["file"], o["rows"], o["sha256"][:12] + "…") for o in written["outputs"]),
                ),
                **counts,
            }
        )
