"""The ray engine's ``deduped_documents`` on Daft (its Ray runner, on the run's Ray session): the
clusters' representatives given their documents' columns where the documents lie."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from daft import col

from ..storage.store import TableBuild
from .daft_tables import frame, write_positioned_frame
from .datasets import POSITION, table_folder
from .ray_tables import RayTables


def deduped_documents(tables: RayTables) -> TableBuild:
    """The representatives' rows with every input column, in input order. Their keys (position,
    cluster_id, cluster_size) are broadcast to every batch of ``documents``, so the bodies are
    read where they lie and never shuffled, and each batch, a run of positions, is written as a
    file of its own. (Daft's own choice at 100,000 documents, a hash join, would move every body
    and write files whose positions interleave, which the view would sort.)"""
    documents = pq.read_schema(min(table_folder(tables.root, "documents").glob("*.parquet")))
    columns = [field for field in documents if field.name != POSITION]
    schema = pa.schema([*columns, ("cluster_id", pa.string()), ("cluster_size", pa.int64()), (POSITION, pa.int64())])
    representatives = frame(tables.root, "clusters", [POSITION, "cluster_id", "cluster_size", "representative_rank"])
    kept = representatives.where(col("representative_rank") == 1).select(POSITION, "cluster_id", "cluster_size")
    rows = frame(tables.root, "documents").join(kept, on=POSITION, strategy="broadcast")
    write_positioned_frame(tables.root, "deduped_documents", rows, schema)
    return tables.view("deduped_documents")
