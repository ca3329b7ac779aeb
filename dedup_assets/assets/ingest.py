from __future__ import annotations

from dagster import MetadataValue, Output, asset

from .. import checks
from ..core.inputs import describe_input, read_documents
from ..settings import DedupSettings
from ._shared import GROUP, preview, stamped, user_errors


@asset(
    group_name=GROUP,
    kinds={"duckdb", "pandas"},
    check_specs=[
        checks.spec("doc_id_unique", "documents", "Every document has its own doc_id.")
    ],
)
def documents(dedup: DedupSettings):
    """The input corpus, validated: one row per document with `doc_id, source, domain,
    crawled_at, title, body` plus any extra columns (such as WARC lineage), ordered by `doc_id`.

    Reads `DEDUP_INPUT` (CSV or Parquet). A missing column, an empty or duplicate `doc_id`, an
    unparseable `crawled_at` or an unreadable file stops the run with the file and rows to fix.
    Empty bodies are kept; they become singleton clusters.
    """
    path = dedup.input_file()
    with user_errors():
        frame = read_documents(path)
    described = describe_input(path)
    lineage = {
        "input_path": str(path),
        "input_sha256": described.sha256,
        "input_byte_size": described.byte_size,
    }
    yield Output(
        stamped(frame, lineage),
        metadata={
            "input_path": MetadataValue.path(str(path)),
            "input_sha256": described.sha256,
            "input_bytes": MetadataValue.int(described.byte_size),
            "domains": MetadataValue.int(int(frame["domain"].nunique())),
            "empty_bodies": MetadataValue.int(int((frame["body"].str.strip() == "").sum())),
            "extra_columns": ", ".join(frame.columns[6:]) or "none",
            "preview": preview(frame, ["doc_id", "domain", "crawled_at", "title"]),
        },
    )
    yield checks.doc_id_unique(frame)
