from dagster import AssetExecutionContext, MetadataValue, asset

from ..core.inputs import InputStats, check_file, describe_input
from ..core.stages import build_documents
from ..core.tables import TableBuild
from ..errors import user_errors
from ..settings import DedupSettings
from ._shared import GROUP, KINDS, markdown_preview, scalar


def _describer(stats: InputStats):
    """Metadata from the stream's own counts and a look at the written table."""

    def describe(connection, table: str) -> dict:
        return {
            "domains": MetadataValue.int(scalar(connection, f"select count(distinct domain) from {table}")),
            "empty_bodies": MetadataValue.int(stats.empty_bodies),
            "extra_columns": ", ".join(stats.extra_columns) or "none",
            "preview": markdown_preview(
                connection, f"select doc_id, domain, crawled_at, title, input_row from {table} order by doc_id"
            ),
        }

    return describe


@asset(group_name=GROUP, kinds=KINDS)
def documents(context: AssetExecutionContext, dedup: DedupSettings) -> TableBuild:
    """The input corpus, validated: `doc_id, source, domain, crawled_at, title, body`, any extra
    columns (such as WARC lineage) and `input_row` (the 1-based data row it came from).

    Reads `DEDUP_INPUT` (CSV or Parquet) in batches. A missing column, an empty or repeated
    `doc_id`, an unparseable `crawled_at` or an unreadable file stops the run with the file and
    rows to fix. `crawled_at` is stored in UTC. Empty bodies are kept; they become singletons.
    """
    path = dedup.input_file()
    with user_errors():
        check_file(path)
    described = describe_input(path)
    build, stats = build_documents(path, dedup.batch_size, context.log.info)
    build.lineage = {
        "input_path": str(path),
        "input_sha256": described.sha256,
        "input_byte_size": described.byte_size,
    }
    build.metadata = {
        "input_path": MetadataValue.path(str(path)),
        "input_sha256": described.sha256,
        "input_bytes": MetadataValue.int(described.byte_size),
    }
    build.describe = _describer(stats)
    return build
