from dagster import MetadataValue, asset

from ..core.stages import build_clusters, build_deduped_documents
from ..core.tables import TableBuild
from ..io_manager import TableRef
from ..settings import DedupSettings
from ._shared import GROUP, KINDS, lineage_for, markdown_preview, tables_of


def _describe_clusters(connection, table: str) -> dict:
    clusters, duplicate, singleton, largest, removed = connection.execute(
        f"""
        select count(distinct cluster_id),
               count(distinct cluster_id) filter (where cluster_size > 1),
               count(*) filter (where cluster_size = 1),
               max(cluster_size),
               count(*) filter (where representative_rank > 1)
        from {table}
        """
    ).fetchall()[0]
    return {
        "clusters": MetadataValue.int(int(clusters)),
        "duplicate_clusters": MetadataValue.int(int(duplicate)),
        "singleton_clusters": MetadataValue.int(int(singleton)),
        "largest_cluster_size": MetadataValue.int(int(largest or 0)),
        "removed_documents": MetadataValue.int(int(removed)),
        "preview": markdown_preview(
            connection,
            f"select cluster_id, doc_id, crawled_at, token_count, decision from {table} "
            "where cluster_size > 1 order by cluster_id, representative_rank",
        ),
    }


@asset(group_name=GROUP, kinds=KINDS | {"networkx", "sql"})
def clusters(
    dedup: DedupSettings, documents: TableRef, fingerprinted: TableRef, duplicate_pairs: TableRef
) -> TableBuild:
    """Connected components of the duplicate-edge graph (networkx), one row per input document.

    `cluster_id` is `cluster-` + the smallest member `doc_id`. Within a cluster the representative
    is the newest `crawled_at`, then the most tokens, then the smallest `doc_id`:
    `representative_rank` 1 is kept (`decision = kept_representative`), the others are
    `removed_duplicate` with `representative_doc_id` naming what replaced them.
    """
    lineage = lineage_for(
        "clusters", dedup, documents=documents, fingerprinted=fingerprinted, duplicate_pairs=duplicate_pairs
    )
    with documents.connect() as connection:
        build = build_clusters(connection, tables_of(documents))
    build.lineage = lineage
    build.describe = _describe_clusters
    return build


def _describe_deduped(connection, table: str) -> dict:
    return {
        "preview": markdown_preview(
            connection, f"select doc_id, domain, crawled_at, cluster_id, cluster_size from {table}"
        )
    }


@asset(group_name=GROUP, kinds=KINDS | {"sql"})
def deduped_documents(dedup: DedupSettings, documents: TableRef, clusters: TableRef) -> TableBuild:
    """The deduplicated corpus: one representative per cluster with every input column (extra
    columns such as WARC lineage included, and `input_row`) plus `cluster_id` and `cluster_size`.

    Stored as a DuckDB view over `documents` and `clusters`, so the kept text is not copied a
    second time; `deduped_documents.parquet` in the release is the materialized copy."""
    build = build_deduped_documents(tables_of(documents))
    build.lineage = lineage_for("deduped_documents", dedup, documents=documents, clusters=clusters)
    build.describe = _describe_deduped
    return build
