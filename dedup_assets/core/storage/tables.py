"""The pipeline's table names and its SQL: one ``.sql`` file per query under ``sql/``.

Queries name tables with ``{placeholders}`` filled from :class:`Tables` (identifiers only);
values from users are always bound parameters, named in each file's header.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

SQL_DIR = Path(__file__).parent.parent / "sql"
SCHEMA = "dedup"  # where the pipeline's tables live in the database
INDEX_SCHEMA = "incremental"  # the incremental index's tables, in the same database
CONSISTENCY_SCHEMA = "engine_consistency"  # the consistency check's scratch run, in the same database
# The version of the tables' columns, recorded in every table's lineage: raised when a table gains,
# loses or changes a column, so that a database an older version built is rebuilt, not misread.
# 2: candidate_pairs, scored_pairs and duplicate_pairs have found_by.
# 3: a copy group's first copy is its first document in input order (was: the smallest doc_id).
# 4: clusters has jaccard_to_representative and chained.
# 5: lineage records the bands in use (bands, rows_in_use) and auto_bands.
# 6: tokens in every script (a Han, Hiragana or Katakana character each; marks that are letters
#    kept), lineage records shingle_unit; and the input contract: only doc_id and body are
#    required, so undated rows are documents.
# 7: fingerprinted writes the recall audit's true pairs (audit_true_pairs), exact copies included.
# 8: audit_true_pairs holds the documents each distinct sampled set found, one per text where not
#    sampled (sampled_doc_id, doc_id, jaccard, sample_place); recall_audit counts them per pair of
#    texts (pairs).
# 9: a document without tokens has a content hash and band keys made from its trimmed body, so
#    its exact copies are a copy group (fingerprinted, band_memberships and the pairs change).
# 10: clusters name each removed member's keep_reason (the keep policy's rule and both values);
#     boilerplate and template_clusters are new.
# 11: reference_matches is new, and a document that matches a reference is in clusters as
#     matched_reference.
TABLE_LAYOUT = 11
PIPELINE_TABLES = (
    "documents",
    "rejected_documents",
    "fingerprinted",
    "band_memberships",
    "candidate_pairs",
    "scored_pairs",
    "duplicate_pairs",
    "reference_matches",
    "clusters",
    "boilerplate",
    "template_clusters",
    "deduped_documents",
    "recall_audit",
    "evaluation",
)

# documents' validated rows without the bodies a view reads from the input's Parquet files
# (``ingest.build_documents``): a table of the documents asset, not an asset of its own
DOCUMENT_ROWS = "document_rows"
# and the files it reads them from, each with its first row's place in document_rows, so that a
# few bodies can be read by row number (``ingest.document_bodies``)
IN_PLACE_FILES = "in_place_files"
# the buckets over max_bucket_size that hot_buckets: skip left out of the self-join
# (``lsh/candidates.py``'s ``hot_bucket_rows``): a table of the candidate_pairs asset, beside it in its schema
HOT_BUCKETS = "hot_buckets"
# the documents lineage entry naming those files: [path, bytes, mtime_ns] each
READ_IN_PLACE = "input_read_in_place"
# the documents lineage entry naming the files of an input folder that no reader reads
INPUT_SKIPPED_FILES = "input_skipped_files"
# the documents lineage entry with each input file's stamp before it was hashed (InputFile.stamps)
INPUT_STAMPS = "input_stamps"
# the reference_matches lineage entry (and manifest.json's) naming each reference and its input
REFERENCES = "references"


@dataclass(frozen=True)
class Tables:
    """Qualified table names, e.g. ``Tables.in_schema("dedup")``."""

    documents: str
    rejected_documents: str
    fingerprinted: str
    band_memberships: str
    candidate_pairs: str
    scored_pairs: str
    duplicate_pairs: str
    reference_matches: str
    clusters: str
    boilerplate: str
    template_clusters: str
    deduped_documents: str
    recall_audit: str
    evaluation: str

    @classmethod
    def in_schema(cls, schema: str) -> Tables:
        return cls(**{name: f"{schema}.{name}" for name in PIPELINE_TABLES})


def beside(table: str, name: str) -> str:
    """Table ``name`` in the schema of ``table`` (schema-qualified)."""
    return f"{table.rpartition('.')[0]}.{name}"


def in_schema_of(table: str, name: str) -> str:
    """``name`` as it stands when schema-qualified, else :func:`beside` ``table``."""
    return name if "." in name else beside(table, name)


def sql_string(text: str) -> str:
    """``text`` as a quoted SQL literal, quotes doubled: for a view, which cannot take bound
    parameters, naming files."""
    return "'" + text.replace("'", "''") + "'"


GLOB_MARK = re.compile(r"([*?[])")  # what makes a name a pattern, to DuckDB and to glob


def duckdb_file(path: str | Path) -> str | None:
    """``path`` as DuckDB's ``read_*`` functions take it to name that one file or folder; None
    if they cannot. They read a name with ``*``, ``?`` or ``[`` as a glob (DuckDB 2.0: beside
    ``a1.parquet``, ``a[1].parquet`` reads ``a1.parquet``), so each is put alone in brackets,
    where it matches itself. Their glob splits names at a backslash as well, so a path with
    one and a glob mark cannot be named at all."""
    text = str(path)
    if not GLOB_MARK.search(text):
        return text
    return None if "\\" in text else GLOB_MARK.sub(r"[\1]", text)


@cache
def _template(name: str) -> str:
    return (SQL_DIR / f"{name}.sql").read_text(encoding="utf-8")


def sql(name: str, tables: Tables) -> str:
    """The named query with the caller's table names filled in (identifiers only, never values)."""
    return _template(name).format(**asdict(tables))


def sql_over(name: str, **relations: str) -> str:
    """The named query over the caller's relations: each a name or a parenthesized query, never
    a value."""
    return _template(name).format(**relations)
