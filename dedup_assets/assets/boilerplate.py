from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from ..core.pipeline import steps
from ..core.text.boilerplate import CLUSTERS_CHECKED, MIN_DOCUMENTS, MIN_SHARE, SAMPLE_SIZE
from ..core.release.plots import boilerplate_png, markdown_image
from ..launch.user_messages import user_errors
from ..settings_resource import DedupSettings
from ..stored_tables.warehouse import DuckDBWarehouse
from .asset_common import GROUP, KINDS, checked_lineage, step_run
from .metadata import preview, table_metadata


BOILERPLATE_DESCRIPTION = f"""The passages many documents share (a footer, a cookie notice, a chat
template), found before anything is removed: in a seeded sample of up to {SAMPLE_SIZE:,} documents
(the doc_ids with the smallest md5; all of a smaller corpus), a shingle in at least {MIN_SHARE:.0%}
of them (and {MIN_DOCUMENTS} at least) is boilerplate, and each run of tokens such shingles cover
in a document is a `passage`. One row per passage, most shared first: `sample_documents` have it,
`share` of the sample, `estimated_documents` that share of the corpus, `example_doc_ids`.
`template_clusters` names the clusters such passages may have made."""
TEMPLATE_DESCRIPTION = f"""Clusters that shared boilerplate alone may have made: of the
{CLUSTERS_CHECKED:,} largest clusters, those whose representative and first removed member, with
the shingles of `boilerplate`'s passages left out, have an exact Jaccard below
`jaccard_threshold` (a true copy of a page shares its own words too, and is not listed). One row
per such cluster: `shared_shingles`, `boilerplate_shingles`, `jaccard` and
`jaccard_without_boilerplate`. Review them before trusting their removals."""


# after clusters, though it reads none of them: then every rebuild from a stale step downstream of
# documents (`dagster asset materialize --select 'scored_pairs*'`) builds it too, and the release
# never waits for a side branch that a build of `*clusters` left out
@asset(group_name=GROUP, kinds=KINDS, deps=["documents", "clusters"], description=BOILERPLATE_DESCRIPTION)
def boilerplate(context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse) -> MaterializeResult:
    lineage, settings = checked_lineage(context, dedup, warehouse)
    with user_errors():
        rows = steps.boilerplate(step_run(context, warehouse, None, lineage, settings))
    table = warehouse.tables.boilerplate
    with warehouse.cursor() as cursor:
        top = cursor.execute(f"select passage, share from {table} order by passage_rank limit 10").fetchall()
        return MaterializeResult(
            metadata={
                **table_metadata(cursor, table, rows),
                "top_passage": MetadataValue.text(top[0][0][:500] if top else "none"),
                "top_passage_share": MetadataValue.float(round(top[0][1], 4) if top else 0.0),
                "passages": MetadataValue.md(markdown_image(boilerplate_png(top), "shared passages")),
                "preview": preview(
                    cursor,
                    f"select passage_rank, left(passage, 120) as passage, tokens, sample_documents, share, "
                    f"estimated_documents from {table} order by passage_rank",
                ),
            }
        )


@asset(group_name=GROUP, kinds=KINDS, deps=["boilerplate", "clusters"], description=TEMPLATE_DESCRIPTION)
def template_clusters(
    context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse
) -> MaterializeResult:
    lineage, settings = checked_lineage(context, dedup, warehouse)
    with user_errors():
        rows = steps.template_clusters(step_run(context, warehouse, None, lineage, settings))
    table = warehouse.tables.template_clusters
    with warehouse.cursor() as cursor:
        members = cursor.execute(f"select coalesce(sum(cluster_size), 0) from {table}").fetchall()[0][0]
        return MaterializeResult(
            metadata={
                **table_metadata(cursor, table, rows),
                "documents_in_template_clusters": MetadataValue.int(int(members)),
                "preview": preview(cursor, f"select * from {table} order by cluster_size desc, cluster_id"),
            }
        )
