"""The index's tables and what they record: the names of the index's and a batch's staging
tables (``IndexTables``), the batches in the index (``IndexedBatch``), the settings and layout an
index is built with, the columns every pair, cluster and bridge table keeps, and where the payload
files sit. Everything else in the package reads or writes these tables, so they stand apart from
what any one step does with them."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb

from . import payloads
from ..settings.lineage import STAGE_SETTINGS
from ..storage.store import database_path, table_exists
from ..storage.tables import INDEX_SCHEMA, PIPELINE_TABLES, Tables

# The version of the index tables' columns, the index's own ``table_layout``: raised when an index
# table changes, not with the one-shot tables' TABLE_LAYOUT (3: first copies in input order; 4:
# doc_ids kept byte for byte, where an index of layout 3 holds them trimmed; 5: tokens in every
# script, so an index fingerprinted with clause-long Chinese tokens takes no new batch, and the
# input contract, where an index of layout 4 rejected undated rows; 6: documents without tokens keyed
# by their trimmed body, where an index of layout 5 has no band keys for them; 7: clusters hold
# each removed document's keep_reason).
INDEX_LAYOUT = 7
# what changes the tables a batch adds (the recall audit reads them and adds nothing)
INDEX_SETTINGS = tuple(
    name
    for stage in ("documents", "fingerprinted", "scored_pairs", "clusters")
    for name in STAGE_SETTINGS[stage]
    # every engine adds the same rows, and the index clusters by components (index_settings); it
    # has no recall audit, whose sample fingerprinting draws in one-shot runs
    if name not in ("input_path", "engine", "cluster_mode", "audit_sample_size")
)
KEPT, REMOVED = "kept_representative", "removed_duplicate"
# the one-shot scored_pairs columns, which every pair table and file of a batch keeps
PAIR_COLUMNS = (
    "left_doc_id, right_doc_id, left_domain, right_domain, shared_bands, found_by, jaccard, "
    "signature_overlap, is_exact, is_duplicate, reason"
)
CLUSTER_COLUMNS = (
    "doc_id, source_file, input_row, cluster_id, cluster_size, crawled_at, token_count, "
    "representative_rank, representative_doc_id, decision, representative_batch, keep_reason"
)
BRIDGE_COLUMNS = ("cluster_id", "kept_doc_id", "kept_batch", "other_kept_doc_id", "other_kept_batch", "via_doc_ids")


@dataclass(frozen=True)
class IndexTables:
    """The index's tables, and the staging tables of the batch being added."""

    batches: str
    documents: str
    fingerprints: str
    band_index: str
    pairs: str
    clusters: str
    members: str
    moves: str
    bridges: str
    rejected: str
    staged_documents: str
    staged_rejected: str
    staged_fingerprints: str
    staged_pairs: str
    staged_clusters: str
    staged_members: str
    staged_moves: str
    staged_bridges: str

    @classmethod
    def in_schema(cls, schema: str = INDEX_SCHEMA) -> IndexTables:
        return cls(**{name: f"{schema}.{name}" for name in cls.__dataclass_fields__})

    @property
    def schema(self) -> str:
        return self.batches.split(".")[0]

    def universe(self) -> Tables:
        """Where the one-shot queries read a batch's universe and write its pairs."""
        return Tables(**{name: f"{self.schema}.universe_{name}" for name in PIPELINE_TABLES})

    def staged(self) -> Tables:
        """The staged documents, where the one-shot fingerprint step reads them."""
        return replace(self.universe(), documents=self.staged_documents)


@dataclass(frozen=True)
class IndexedBatch:
    """A batch in the index: its positions are ``first_position`` to ``first_position +
    documents - 1``; ``settings`` are the index's."""

    key: str
    seq: int
    first_position: int
    documents: int
    input_sha256: str
    payload_file: str
    settings: dict


def indexed_batches(connection: duckdb.DuckDBPyConnection, tables: IndexTables) -> list[IndexedBatch]:
    """The batches in the index, in key order (none before the first is added)."""
    if not table_exists(connection, tables.batches):
        return []
    rows = connection.execute(
        f"""
        select batch_key, seq, first_position, documents, input_sha256, payload_file, settings
        from {tables.batches} order by batch_key
        """
    ).fetchall()
    return [IndexedBatch(*row[:-1], json.loads(row[-1])) for row in rows]


def payload_folder(connection: duckdb.DuckDBPyConnection) -> Path:
    """The payload files' folder, beside the connection's database file (refuses :memory:)."""
    return payloads.payload_folder(database_path(connection))


def quoted_name(name: str) -> str:
    """``name`` as a quoted SQL identifier (a column a batch brings), quotes doubled."""
    return '"' + name.replace('"', '""') + '"'
