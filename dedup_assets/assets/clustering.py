from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from ..core.pipeline import steps
from ..core.release.diagnostics import mirror_domain_pairs
from ..core.release.plots import cluster_sizes_png, markdown_image
from ..engine_resource import EngineResource
from ..launch.user_messages import user_errors
from ..settings_resource import DedupSettings
from ..stored_tables.tables_io import WAREHOUSE_TABLES
from ..stored_tables.warehouse import DuckDBWarehouse
from .asset_common import GROUP, KINDS, checked_lineage, step_run
from .metadata import markdown_table, preview, table_metadata

# pairs of domains the clusters metadata lists
MIRROR_PAIRS_SHOWN = 10


def _describe_clusters(cursor, table: str, mode: str) -> dict:
    clusters, duplicate, singleton, largest, removed, chained = cursor.execute(
        f"""
        select count(distinct cluster_id) filter (where decision <> 'matched_reference'),
               count(distinct cluster_id) filter (where cluster_size > 1 and decision <> 'matched_reference'),
               count(*) filter (where cluster_size = 1 and decision <> 'matched_reference'),
               max(cluster_size) filter (where decision <> 'matched_reference'),
               count(*) filter (where representative_rank > 1),
               count(*) filter (where chained)
        from {table}
        """
    ).fetchall()[0]
    return {
        "cluster_mode": MetadataValue.text(mode),
        "clusters": MetadataValue.int(int(clusters)),
        "duplicate_clusters": MetadataValue.int(int(duplicate)),
        "singleton_clusters": MetadataValue.int(int(singleton)),
        "largest_cluster_size": MetadataValue.int(int(largest or 0)),
        "removed_documents": MetadataValue.int(int(removed)),
        "chained_members": MetadataValue.int(int(chained)),
        "preview": preview(
            cursor,
            f"select cluster_id, doc_id, crawled_at, token_count, decision, "
            f"round(jaccard_to_representative, 4) as jaccard_to_representative, chained from {table} "
            "where cluster_size > 1 order by cluster_id, representative_rank",
        ),
    }


@asset(
    group_name=GROUP,
    kinds=KINDS | {"networkx", "sql"},
    deps=["documents", "fingerprinted", "scored_pairs", "duplicate_pairs", "reference_matches"],
    io_manager_key=WAREHOUSE_TABLES,
)
def clusters(
    context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse, engine: EngineResource
) -> MaterializeResult:
    """Clusters of the duplicate-edge graph, one row per input document.

    `cluster_mode` components: the connected components (networkx). star: each component's
    best-ranked document keeps only the members at or above `jaccard_threshold` with it, and the
    rest are split again the same way. `cluster_id` is `cluster-` + the smallest member `doc_id`.
    Within a cluster the representative is the `keep` policy's first (by default a domain listed
    earlier in `prefer_domains`, then the newest `crawled_at`, then the most tokens; the smallest
    `doc_id` last): `representative_rank` 1 is kept (`decision = kept_representative`), the
    others are `removed_duplicate` with `representative_doc_id` naming what replaced them and
    `keep_reason` the rule that decided, with both values. A document that matches a reference
    (`reference_matches`) is `matched_reference`, in cluster `reference:<reference>:<its doc_id>`,
    which `representative_doc_id` names; it joins no component.
    `jaccard_to_representative` is each member's exact Jaccard with it; `chained` marks a member
    below the threshold, in a cluster only through other members.
    """
    lineage, settings = checked_lineage(context, dedup, warehouse)
    table = warehouse.tables.clusters
    with user_errors():
        rows = steps.clusters(step_run(context, warehouse, engine, lineage, settings))
    with warehouse.cursor() as cursor:
        mirrors = mirror_domain_pairs(cursor, warehouse.tables, MIRROR_PAIRS_SHOWN)
        return MaterializeResult(
            metadata={
                **table_metadata(cursor, table, rows),
                **_describe_clusters(cursor, table, settings.cluster_mode),
                "cluster_sizes": MetadataValue.md(
                    markdown_image(cluster_sizes_png(cursor, warehouse.tables), "cluster sizes")
                ),
                "mirror_domains": markdown_table(
                    ["domain", "domain", "duplicate pairs"],
                    ((m["domain_a"], m["domain_b"], m["pairs"]) for m in mirrors),
                ) if mirrors else MetadataValue.md("_no duplicate pair joins two domains_"),
            }
        )


@asset(group_name=GROUP, kinds=KINDS | {"sql"}, deps=["documents", "clusters"], io_manager_key=WAREHOUSE_TABLES)
def deduped_documents(
    context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse, engine: EngineResource
) -> MaterializeResult:
    """The deduplicated corpus: one representative per cluster with every input column (extra
    columns such as WARC lineage included, and `input_row`) plus `cluster_id` and `cluster_size`.

    Stored as a DuckDB view over `documents` and `clusters`, so the kept text is not copied a
    second time; the release's `deduped_documents/` folder of Parquet parts is the materialized copy."""
    lineage, settings = checked_lineage(context, dedup, warehouse)
    table = warehouse.tables.deduped_documents
    with user_errors():
        rows = steps.deduped_documents(step_run(context, warehouse, engine, lineage, settings))
    with warehouse.cursor() as cursor:
        return MaterializeResult(
            metadata={
                **table_metadata(cursor, table, rows),
                "preview": preview(cursor, f"select doc_id, domain, crawled_at, cluster_id, cluster_size from {table}"),
            }
        )
