"""Helpers every asset module uses: lineage, table names and UI previews."""

from dagster import MetadataValue

from ..core.stages import Tables, preview
from ..errors import user_errors
from ..io_manager import TableRef
from ..lineage import combined_lineage
from ..settings import DedupSettings

GROUP = "deduplication"
KINDS = {"duckdb", "arrow"}


def lineage_for(asset_name: str, dedup: DedupSettings, **upstreams: TableRef) -> dict:
    """Lineage of the asset being built; fails if its inputs were built with other settings."""
    with user_errors():
        return combined_lineage(
            asset_name, dedup.current_values(), {name: ref.lineage for name, ref in upstreams.items()}
        )


def tables_of(ref: TableRef) -> Tables:
    return Tables.in_schema(ref.schema)


def markdown_preview(connection, query: str) -> MetadataValue:
    return MetadataValue.md(preview(connection, query))


def scalar(connection, query: str):
    return connection.execute(query).fetchall()[0][0]
