from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetMaterialization,
    AssetSpec,
    MaterializeResult,
    MetadataValue,
    multi_asset,
)

from ..core.pipeline import steps
from ..core.read import InputStats
from ..engine_resource import EngineResource
from ..launch.user_messages import user_errors
from ..stored_tables.lineage import combined_lineage
from ..settings_resource import DedupSettings
from ..stored_tables.tables_io import WAREHOUSE_TABLES
from ..stored_tables.warehouse import DuckDBWarehouse
from .asset_common import GROUP, KINDS, step_run
from .metadata import markdown_table, preview, scalar, table_metadata

DOCUMENTS_DESCRIPTION = """The input corpus, validated: `doc_id, source, domain, crawled_at,
title, body` (only `doc_id` and `body` are required; the others default to the file's name, the
url's host, null and empty), any extra columns (such as WARC lineage), `source_file` and
`input_row` (the 1-based row, line or record it came from), in input order.

Reads the input (`DEDUP_INPUT` or `input_path`: a CSV, Parquet, JSONL or WARC file, a folder or a
glob, or a targets file of WARC byte ranges, fetched from `warc_base_url`) in batches. A row that cannot be a document goes to `rejected_documents` with its reason
instead (or fails the run with `fail_on_reject`); a problem with the whole input (missing file or
column, a text column that is not text, a file that is mostly not UTF-8) fails the run with what
to fix. `crawled_at` is stored in UTC; `doc_id` is kept byte for byte. Bytes that are not UTF-8
are replaced by U+FFFD and counted in `replaced_characters` (in the metadata per file, and in the
manifest's counts). Empty bodies are kept; they become singletons.

A Parquet input's bodies are read in place (`parquet_bodies: in_place`, engine duckdb): this is
then a view joining the validated rows (`document_rows`) with the files' body column, and later
assets refuse to run if a file has changed since."""

REJECTED_DESCRIPTION = """Input rows that did not become documents, each with `source_file`,
`input_row`, `doc_id`, a `reason` (such as `missing_field`, `invalid_doc_id`: a control
character in it, shown as `\\xNN`, `invalid_crawled_at`, `too_large`, `decode_error`,
`invalid_field_type`, `duplicate_doc_id`: the first row with a doc_id is kept) and a `detail`
saying what is wrong.
Input rows = `documents` + `rejected_documents`."""


def _replaced(stats: InputStats) -> list[tuple[str, int, int]]:
    """(file, documents, characters) of the files whose documents had characters replaced."""
    return [(file, rows, chars) for file, (rows, chars) in sorted(stats.replaced.items())]


def _documents_metadata(cursor, table: str, stats: InputStats) -> dict:
    return {
        "input_records": MetadataValue.int(stats.rows),
        "rejected_rows": MetadataValue.int(stats.rows - stats.documents),
        "domains": MetadataValue.int(scalar(cursor, f"select count(distinct domain) from {table}")),
        "empty_bodies": MetadataValue.int(stats.empty_bodies),
        "extra_columns": ", ".join(stats.extra_columns) or "none",
        "replaced_characters": markdown_table(["file", "documents", "characters"], _replaced(stats)),
        "preview": preview(cursor, f"select doc_id, domain, crawled_at, title, input_row from {table} order by doc_id"),
    }


def _rejected_metadata(cursor, table: str, stats: InputStats) -> dict:
    return {
        "rejected_by_reason": markdown_table(["reason", "rows"], sorted(stats.rejected_by_reason.items())),
        "preview": preview(cursor, f"select * from {table}"),
    }


def _written(context: AssetExecutionContext, name: str, metadata: dict) -> MaterializeResult | AssetMaterialization:
    """What to tell Dagster of a table the step wrote: its output where the run selected it;
    where not, a materialization all the same, since the table was written."""
    if AssetKey(name) in context.selected_asset_keys:
        return MaterializeResult(asset_key=name, metadata=metadata)
    return AssetMaterialization(
        asset_key=name,
        description="Written from the same read of the input as the selected one of documents and rejected_documents.",
        metadata=metadata,
    )


@multi_asset(
    specs=[
        AssetSpec("documents", group_name=GROUP, kinds=KINDS, description=DOCUMENTS_DESCRIPTION),
        AssetSpec(
            "rejected_documents", group_name=GROUP, kinds=KINDS, description=REJECTED_DESCRIPTION
        ).with_io_manager_key(WAREHOUSE_TABLES),
    ],
    # either may be selected alone (as by --select 'documents*'); both tables are still written,
    # from one read, so they always account for the same input
    can_subset=True,
)
def documents(context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse, engine: EngineResource):
    """Reads and validates the input into `documents` and `rejected_documents`; the input's
    size and sha256 are taken while it is read and recorded in both tables' lineage. Both tables
    are written whichever of the two a run selects."""
    with user_errors():
        settings = dedup.settings()
        own_lineage = combined_lineage("documents", dedup.current_values(), {})
    warehouse.open()  # a locked database fails now, before the input is hashed
    path = dedup.input_file()
    with user_errors():  # the ray engine reads the stream as it writes it: its input errors say what to fix
        ingested = steps.ingest(step_run(context, warehouse, engine, own_lineage, settings), path)
    stats, found = ingested.stats, ingested.input_file
    tables = warehouse.tables
    with warehouse.cursor() as cursor:
        yield _written(
            context,
            "documents",
            {
                **table_metadata(cursor, tables.documents, ingested.documents),
                "input_path": MetadataValue.path(str(path)),
                "input_sha256": found.sha256,
                "input_bytes": MetadataValue.int(found.byte_size),
                **_documents_metadata(cursor, tables.documents, stats),
            },
        )
    if stats.replaced:
        context.log.warning(
            "Bytes that are not UTF-8 were replaced by U+FFFD (counted per document in "
            "replaced_characters): "
            + "; ".join(f"{file}: {rows:,} rows, {chars:,} characters" for file, rows, chars in _replaced(stats))
        )
    if stats.rejected:
        context.log.warning(
            f"{len(stats.rejected):,} of {stats.rows:,} input rows rejected: "
            + ", ".join(f"{reason} {rows:,}" for reason, rows in sorted(stats.rejected_by_reason.items()))
            + " (see rejected_documents)"
        )
    with warehouse.cursor() as cursor:
        yield _written(
            context,
            "rejected_documents",
            {
                **table_metadata(cursor, tables.rejected_documents, ingested.rejected),
                **_rejected_metadata(cursor, tables.rejected_documents, stats),
            },
        )
