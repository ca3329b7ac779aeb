from dagster import AssetExecutionContext, MaterializeResult, asset

from ..core.reference.matching import match_references
from ..core.reference.index import INDEX_FOLDER
from ..launch.user_messages import user_errors
from ..settings_resource import DedupSettings
from ..stored_tables.warehouse import DuckDBWarehouse
from .asset_common import GROUP, KINDS, checked_lineage, step_run
from .metadata import markdown_table, preview, table_metadata

REFERENCE_DESCRIPTION = f"""The input documents that match a reference corpus (the `reference`
setting: inputs in any supported format, or their indexes), one row each, in input order: the
`reference`, the `reference_doc_id` with the best exact Jaccard (the smallest on a tie), its
`reference_source_file` and `reference_input_row`, and the `jaccard`. A reference is read and
fingerprinted once into an index in `{INDEX_FOLDER}/` beside the database, and reused while the
input, the settings that read it and the sketch scheme are as they were; the log says which.
Reference documents are never removed or rewritten. `clusters` removes every matched document
(`decision` `matched_reference`) and leaves it out of its components. Empty without references."""


@asset(group_name=GROUP, kinds=KINDS, deps=["documents", "fingerprinted", "scored_pairs"], description=REFERENCE_DESCRIPTION)
def reference_matches(
    context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse
) -> MaterializeResult:
    lineage, settings = checked_lineage(context, dedup, warehouse)
    with user_errors():
        rows, indexes = match_references(step_run(context, warehouse, None, lineage, settings), warehouse.path, warehouse.memory)
    table = warehouse.tables.reference_matches
    with warehouse.cursor() as cursor:
        by_reference = cursor.execute(
            f"select reference, count(*) from {table} group by reference order by reference"
        ).fetchall()
        matched = dict(by_reference)
        return MaterializeResult(
            metadata={
                **table_metadata(cursor, table, rows),
                "references": markdown_table(
                    ["reference", "documents", "index", "matched"],
                    [
                        [index.name, f"{index.documents:,}", "reused" if index.reused else "built", f"{matched.get(index.name, 0):,}"]
                        for index in indexes
                    ],
                ),
                "preview": preview(cursor, f"select * from {table} order by jaccard desc, doc_id"),
            }
        )
