from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from dagster import AssetExecutionContext, AssetOut, MetadataValue, Output, multi_asset

from ..core.inputs import InputStats, describe_input
from ..core.stages import build_documents, build_rejected_documents
from ..errors import user_errors
from ..settings import DedupSettings
from ._shared import GROUP, KINDS, lineage_for, markdown_preview, scalar

DOCUMENTS_DESCRIPTION = """The input corpus, validated: `doc_id, source, domain, crawled_at,
title, body`, any extra columns (such as WARC lineage) and `input_row` (the 1-based data row it
came from), in input order.

Reads `DEDUP_INPUT` (CSV or Parquet) in batches. A row that cannot be a document goes to
`rejected_documents` with its reason instead (or fails the run with `fail_on_reject`); a problem
with the whole input (missing file or column, unreadable file) fails the run with what to fix.
`crawled_at` is stored in UTC. Empty bodies are kept; they become singletons."""

REJECTED_DESCRIPTION = """Input rows that did not become documents, each with `source_file`,
`input_row`, `doc_id`, a `reason` (`missing_field`, `invalid_crawled_at`, `too_large`,
`duplicate_doc_id`: the first row with a doc_id is kept) and a `detail` saying what is wrong.
Input rows = `documents` + `rejected_documents`."""


def _describe_documents(stats: InputStats):
    def describe(connection, table: str) -> dict:
        return {
            "input_records": MetadataValue.int(stats.rows),
            "rejected_rows": MetadataValue.int(stats.rows - stats.documents),
            "domains": MetadataValue.int(scalar(connection, f"select count(distinct domain) from {table}")),
            "empty_bodies": MetadataValue.int(stats.empty_bodies),
            "extra_columns": ", ".join(stats.extra_columns) or "none",
            "preview": markdown_preview(
                connection, f"select doc_id, domain, crawled_at, title, input_row from {table} order by doc_id"
            ),
        }

    return describe


def _describe_rejected(stats: InputStats):
    def describe(connection, table: str) -> dict:
        return {
            "rejected_by_reason": MetadataValue.md(
                "| reason | rows |\n|---|---|\n"
                + "\n".join(f"| {reason} | {rows} |" for reason, rows in sorted(stats.rejected_by_reason.items()))
            ),
            "preview": markdown_preview(connection, f"select * from {table}"),
        }

    return describe


@multi_asset(
    outs={
        "documents": AssetOut(group_name=GROUP, kinds=KINDS, description=DOCUMENTS_DESCRIPTION),
        "rejected_documents": AssetOut(group_name=GROUP, kinds=KINDS, description=REJECTED_DESCRIPTION),
    },
)
def documents(context: AssetExecutionContext, dedup: DedupSettings):
    """Reads and validates the input into `documents` and `rejected_documents`."""
    path = dedup.input_file()
    build, stats = build_documents(path, dedup.batch_size, dedup.input_policy(), context.log.info)
    lineage = lineage_for("documents", dedup)
    build.lineage, build.metadata = lineage, {"input_path": MetadataValue.path(str(path))}
    build.describe = _describe_documents(stats)
    with ThreadPoolExecutor(max_workers=1) as hasher:
        # The input's sha256 (1.5 s per 2 GB) is computed while the rows are read and written.
        described = hasher.submit(describe_input, path, dedup.source_format)
        build.batches = _then_identify(build.batches, described, lineage, build.metadata)
        # The IO manager writes documents when it is yielded: by then the stream has filled stats
        # and the lineage holds the input's identity.
        yield Output(build, output_name="documents")
    rejected = build_rejected_documents(stats)
    rejected.lineage = lineage
    rejected.describe = _describe_rejected(stats)
    if stats.rejected:
        context.log.warning(
            f"{len(stats.rejected):,} of {stats.rows:,} input rows rejected: "
            + ", ".join(f"{reason} {rows:,}" for reason, rows in sorted(stats.rejected_by_reason.items()))
            + " (see rejected_documents)"
        )
    yield Output(rejected, output_name="rejected_documents")


def _then_identify(batches: Iterator, described: Future, lineage: dict, metadata: dict) -> Iterator:
    """The batches, then the input's size and sha256 added to ``lineage`` and ``metadata``."""
    yield from batches
    with user_errors():
        identity = described.result()
    lineage.update(input_sha256=identity.sha256, input_byte_size=identity.byte_size)
    metadata.update(input_sha256=identity.sha256, input_bytes=MetadataValue.int(identity.byte_size))
