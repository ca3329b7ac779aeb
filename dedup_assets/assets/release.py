import pyarrow as pa
from dagster import MetadataValue, asset

from ..core.pipeline import release_summary
from ..core.release import write_release
from ..core.stages import BucketPressure, bucket_pressure
from ..core.tables import TableBuild
from ..io_manager import TableRef
from ..settings import DedupSettings
from ._shared import GROUP, KINDS, lineage_for, tables_of


@asset(group_name=GROUP, kinds=KINDS | {"parquet", "json"})
def manifest(
    dedup: DedupSettings,
    documents: TableRef,
    rejected_documents: TableRef,
    fingerprinted: TableRef,
    band_memberships: TableRef,
    candidate_pairs: TableRef,
    scored_pairs: TableRef,
    duplicate_pairs: TableRef,
    clusters: TableRef,
    deduped_documents: TableRef,
) -> TableBuild:
    """Writes the release files to `DEDUP_OUTPUT_DIR` (fingerprints, candidate summary, scored and
    duplicate pairs, clusters, cluster inspection, deduped and rejected documents) and `manifest.json` with the
    settings, the input's size and sha256, library versions, every file's rows and sha256 and
    the run counts. The stored table holds the counts, one row per metric.
    """
    upstreams = dict(
        documents=documents,
        rejected_documents=rejected_documents,
        fingerprinted=fingerprinted,
        band_memberships=band_memberships,
        candidate_pairs=candidate_pairs,
        scored_pairs=scored_pairs,
        duplicate_pairs=duplicate_pairs,
        clusters=clusters,
        deduped_documents=deduped_documents,
    )
    lineage = lineage_for("manifest", dedup, **upstreams)
    tables = tables_of(documents)

    def summarize(cursor) -> tuple[dict, dict]:
        return release_summary(
            cursor,
            tables,
            BucketPressure.from_lineage(lineage) or bucket_pressure(cursor, tables),
            dedup.sketch_params(),
            dedup.thresholds(),
            dedup.algorithm_settings(),
            lambda counts: {
                "path": lineage["input_path"],
                "rows": counts["input_record_rows"],
                "byte_size": lineage["input_byte_size"],
                "sha256": lineage["input_sha256"],
            },
        )

    with documents.connect() as connection:
        written = write_release(connection, tables, dedup.output_folder(), summarize)
    counts = written["counts"]
    metrics = pa.table({"metric": list(counts), "value": [float(v) for v in counts.values()]})
    return TableBuild(
        lineage=lineage,
        sql="select * from metrics",
        arrow_inputs={"metrics": metrics},
        metadata={
            "output_dir": MetadataValue.path(str(dedup.output_folder())),
            "files": MetadataValue.md(
                "| file | rows | sha256 |\n|---|---|---|\n"
                + "\n".join(f"| {o['file']} | {o['rows']} | {o['sha256'][:12]}… |" for o in written["outputs"])
            ),
            **counts,
        },
    )
