"""The incremental graph: one partition per batch of the batch folder (``DEDUP_BATCHES``), each
deduplicated against every document of the earlier batches. Each step stages the batch in a table
of the ``incremental`` schema; ``batch_release`` adds it to the index in one transaction and
writes its release, so a batch that fails half way leaves the index as it was."""


from dataclasses import replace

from dagster import AssetExecutionContext, AssetSpec, MaterializeResult, MetadataValue, asset, multi_asset

from ..batch_runs.batch_partitions import BATCHES, folder_batches
from ..core.read.batches import Batch, key_path_name
from ..core.incremental.batch_order import batch_command, index_settings
from ..core.incremental.batch_steps import (
    add_to_index, stage_clusters, stage_documents, stage_fingerprints, stage_pairs,
)
from ..core.pipeline.run import Run
from ..core.incremental.index_reports import batch_release_queries
from ..core.incremental.index_tables import IndexTables
from ..core.lsh.candidates import FOUND_BY
from ..core.release.publish import publish_batch_release
from ..core.sketch.scheme import setting_differs
from ..core.storage.store import read_lineage, table_exists
from ..core.release.summary import reason_counts
from ..launch.user_messages import refusal, user_errors
from ..engine_resource import EngineResource
from ..settings_resource import DedupSettings
from ..stored_tables.warehouse import DuckDBWarehouse
from .asset_common import step_run
from .metadata import markdown_table, preview, scalar, table_metadata

GROUP = "incremental"
KINDS = {"duckdb", "arrow"}
TABLES = IndexTables.in_schema()


def _batch(context: AssetExecutionContext) -> Batch:
    with user_errors():
        return folder_batches().batch(context.partition_key)


def _batch_run(
    context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse, engine: EngineResource | None = None
) -> Run:
    """The partition's batch as ``core.incremental.batch_steps`` adds it: a one-shot step's run
    over the index's tables, with the batch's key (``engine``: for the steps that ask for one)."""
    with user_errors():
        settings = dedup.settings()
    run = step_run(context, warehouse, engine, {}, settings)
    return replace(
        run, tables=TABLES, batch=context.partition_key,
        engine_for=lambda: engine.for_settings(settings, warehouse.path, TABLES.schema),
    )


def staged_batch_lineage(warehouse: DuckDBWarehouse, table: str, key: str) -> dict:
    """The lineage of the staged table a step or a batch check reads: it must hold batch ``key``
    (the staging tables hold the batch staged last); else it fails with the command that stages
    it again."""
    with warehouse.cursor() as cursor:
        lineage = read_lineage(cursor, table) if table_exists(cursor, table) else {}
    if lineage.get("batch_key") != key:
        held = f"batch {lineage['batch_key']}" if lineage.get("batch_key") else "no batch"
        raise refusal(
            f"{table} holds {held}, not batch {key}: stage batch {key} from its first "
            f"step: {batch_command(key)}"
        )
    return lineage


def _staged_lineage(context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse, table: str) -> dict:
    """The lineage of the staged table this step reads: it must hold this batch, staged with
    this run's settings; else the step fails with the command that stages it again."""
    key = context.partition_key
    lineage = staged_batch_lineage(warehouse, table, key)
    rebuild = batch_command(key)
    with user_errors():
        current = index_settings(dedup.settings())
    changed = [name for name in current if setting_differs(name, lineage.get(name), current[name])]
    if changed:
        raise refusal(
            f"{table} was staged with other settings than this run's ({', '.join(changed)}): "
            f"stage batch {key} again from its first step with this run's settings: {rebuild}"
        )
    return lineage


DOCUMENTS_DESCRIPTION = """The batch's input, validated as in the one-shot `documents`, staged in
`incremental.staged_documents`. Refuses, before reading, a batch whose earlier batches are not in
the index yet, one that later batches already depend on, and settings other than the index's. A
doc_id an earlier batch holds is rejected (`duplicate_doc_id`), as a one-shot run over every batch
would."""

REJECTED_DESCRIPTION = """The batch's input rows that did not become documents, with their reason
(`incremental.staged_rejected`)."""


@multi_asset(
    specs=[
        AssetSpec("batch_documents", group_name=GROUP, kinds=KINDS, description=DOCUMENTS_DESCRIPTION),
        AssetSpec("batch_rejected_documents", group_name=GROUP, kinds=KINDS, description=REJECTED_DESCRIPTION),
    ],
    partitions_def=BATCHES,
)
def batch_documents(
    context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse, engine: EngineResource
):
    key = context.partition_key
    batch = _batch(context)
    with user_errors():
        staged = stage_documents(_batch_run(context, dedup, warehouse, engine), batch.path, folder_batches().earlier(key))
    lineage, stats, earlier_ids, rejected = staged.lineage, staged.stats, staged.earlier_doc_ids, staged.rejected
    if stats.rejected:
        context.log.warning(
            f"batch {key}: {len(stats.rejected):,} of {stats.rows:,} input rows rejected: "
            + ", ".join(f"{reason} {rows:,}" for reason, rows in sorted(stats.rejected_by_reason.items()))
        )
    with warehouse.cursor() as cursor:
        yield MaterializeResult(
            asset_key="batch_documents",
            metadata={
                **table_metadata(cursor, TABLES.staged_documents, stats.documents),
                "documents": MetadataValue.int(stats.documents),
                "input_path": MetadataValue.path(lineage["input_path"]),
                "input_sha256": lineage["input_sha256"],
                "first_position": MetadataValue.int(lineage["first_position"]),
                "doc_ids_in_earlier_batches": MetadataValue.int(earlier_ids),
                "preview": preview(cursor, f"select doc_id, domain, crawled_at, title, input_row from {TABLES.staged_documents}"),
            },
        )
        yield MaterializeResult(
            asset_key="batch_rejected_documents",
            metadata={
                **table_metadata(cursor, TABLES.staged_rejected, rejected),
                "rejected_by_reason": markdown_table(["reason", "rows"], sorted(stats.rejected_by_reason.items())),
                "preview": preview(cursor, f"select * from {TABLES.staged_rejected}"),
            },
        )


@asset(group_name=GROUP, kinds=KINDS | {"numba"}, partitions_def=BATCHES, deps=["batch_documents"])
def batch_fingerprints(
    context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse, engine: EngineResource
) -> MaterializeResult:
    """The batch's fingerprints, as the one-shot `fingerprinted` makes them
    (`incremental.staged_fingerprints`)."""
    lineage = _staged_lineage(context, dedup, warehouse, TABLES.staged_documents)
    rows = stage_fingerprints(_batch_run(context, dedup, warehouse, engine), lineage)
    with warehouse.cursor() as cursor:
        return MaterializeResult(
            metadata={
                **table_metadata(cursor, TABLES.staged_fingerprints, rows),
                "documents_without_shingles": MetadataValue.int(
                    scalar(cursor, f"select count(*) from {TABLES.staged_fingerprints} where shingle_count = 0")
                ),
            }
        )


@asset(group_name=GROUP, kinds=KINDS | {"sql"}, partitions_def=BATCHES, deps=["batch_fingerprints"])
def batch_pairs(context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse) -> MaterializeResult:
    """Scored pairs of the batch's documents, with each other and with every document of the
    earlier batches, kept or removed (`incremental.staged_pairs`, columns as `scored_pairs`).

    The earlier documents that share a band key with the batch are found in the index's
    `band_index`; the one-shot candidate and scoring queries then run on them and the batch
    (the `universe_*` tables), and the pairs with a batch document are kept. So the pairs of all
    batches together are those of one run over all of them."""
    lineage = _staged_lineage(context, dedup, warehouse, TABLES.staged_fingerprints)
    with user_errors():
        rows, pairs = stage_pairs(_batch_run(context, dedup, warehouse), lineage)
    table = TABLES.staged_pairs
    with warehouse.cursor() as cursor:
        within, with_earlier, accepted = cursor.execute(
            f"""
            with new as (select doc_id from {TABLES.staged_fingerprints}),
            pairs as (
              select is_duplicate,
                     left_doc_id in (select doc_id from new) and right_doc_id in (select doc_id from new) as within
              from {table}
            )
            select count(*) filter (where within), count(*) filter (where not within),
                   count(*) filter (where is_duplicate)
            from pairs
            """
        ).fetchall()[0]
        found_by = dict(cursor.execute(f"select found_by, count(*) from {table} group by found_by").fetchall())
        return MaterializeResult(
            metadata={
                **table_metadata(cursor, table, rows),
                "candidates_within_batch": MetadataValue.int(int(within)),
                "candidates_with_earlier_batches": MetadataValue.int(int(with_earlier)),
                "accepted_pairs": MetadataValue.int(int(accepted)),
                "earlier_documents_compared": MetadataValue.int(
                    pairs.universe_documents - scalar(cursor, f"select count(*) from {TABLES.staged_fingerprints}")
                ),
                "reshingled_documents": MetadataValue.int(pairs.reshingled),
                "grouped_pair_slots": MetadataValue.int(pairs.pressure.pair_slots),
                "pairs_found_by": markdown_table(
                    ["found_by", "pairs"], [(name, found_by.get(name, 0)) for name in FOUND_BY]
                ),
                "reasons": markdown_table(["reason", "pairs"], reason_counts(cursor, table).items()),
                "preview": preview(
                    cursor,
                    f"select left_doc_id, right_doc_id, round(jaccard, 4) as jaccard, found_by, reason from {table}",
                ),
            }
        )


@asset(group_name=GROUP, kinds=KINDS | {"networkx"}, partitions_def=BATCHES, deps=["batch_pairs"])
def batch_clusters(
    context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse
) -> MaterializeResult:
    """Decisions for the batch's documents (`incremental.staged_clusters`: the one-shot
    `clusters` columns plus `representative_batch`). A document kept in an earlier batch stays
    kept; a new document in a cluster with a kept document is `removed_duplicate` in favour of it
    (`representative_doc_id`, `representative_batch`); a cluster of new documents only keeps one
    by the one-shot `keep` policy, and `keep_reason` says why each removed one went (or that an
    earlier batch's copy stays kept). Where the batch joins clusters that each have a kept document, all stay
    kept and a bridge names them (`incremental.staged_bridges`)."""
    lineage = _staged_lineage(context, dedup, warehouse, TABLES.staged_pairs)
    key = context.partition_key
    written = stage_clusters(_batch_run(context, dedup, warehouse), lineage)
    rows, moved, bridges = (written[t] for t in (TABLES.staged_clusters, TABLES.staged_moves, TABLES.staged_bridges))
    table = TABLES.staged_clusters
    with warehouse.cursor() as cursor:
        kept, removed, against_earlier = cursor.execute(
            f"""
            select count(*) filter (where decision like 'kept%'), count(*) filter (where decision like 'removed%'),
                   count(*) filter (where decision like 'removed%' and representative_batch <> ?)
            from {table}
            """,
            [key],
        ).fetchall()[0]
        return MaterializeResult(
            metadata={
                **table_metadata(cursor, table, rows),
                "kept_documents": MetadataValue.int(int(kept)),
                "removed_documents": MetadataValue.int(int(removed)),
                "removed_against_earlier_batches": MetadataValue.int(int(against_earlier)),
                "bridges": MetadataValue.int(bridges),
                "earlier_documents_renamed": MetadataValue.int(moved),
                "bridges_preview": preview(cursor, f"select * from {TABLES.staged_bridges}"),
                "preview": preview(
                    cursor,
                    f"select doc_id, cluster_id, decision, representative_doc_id, representative_batch from {table} "
                    "where cluster_size > 1 order by cluster_id, representative_rank",
                ),
            }
        )


@asset(
    group_name=GROUP,
    kinds=KINDS | {"parquet", "json"},
    partitions_def=BATCHES,
    deps=["batch_clusters", "batch_rejected_documents"],
)
def batch_release(context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse) -> MaterializeResult:
    """Adds the staged batch to the index in one transaction (replacing it when it is the latest
    batch and is built again), then writes its release to `DEDUP_OUTPUT_DIR/batches/KEY/` (each
    character of the key but letters, digits, `-_.+=,@~` and space spelled `%XX`), switched
    in whole: `deduped_documents/` (the batch's kept documents, in Parquet parts), `duplicate_pairs.csv` (the
    edges found for it), `clusters.csv`, `bridges.csv`, `rejected_documents.csv` and
    `manifest.json` (the batch's counts and the running totals)."""
    _staged_lineage(context, dedup, warehouse, TABLES.staged_clusters)
    key = context.partition_key
    run = _batch_run(context, dedup, warehouse)
    with warehouse.cursor() as cursor, user_errors():
        manifest = add_to_index(run, cursor)
        written = publish_batch_release(
            cursor, dedup.output_folder(), key, batch_release_queries(cursor, TABLES, key), manifest,
            database=warehouse.path, log=context.log.info, compression=run.settings.release_compression,
            keep=run.settings.releases_kept,
        )
    counts, totals = written["counts"], written["totals"]
    return MaterializeResult(
        metadata={
            "output_dir": MetadataValue.path(str(dedup.output_folder() / "batches" / key_path_name(key))),
            "files": markdown_table(
                ["file", "rows", "sha256"], ((o["file"], o["rows"], o["sha256"][:12] + "…") for o in written["outputs"])
            ),
            **{name: MetadataValue.int(value) for name, value in counts.items()},
            **{f"total_{name}": MetadataValue.int(value) for name, value in totals.items()},
        }
    )


INCREMENTAL_ASSETS = [batch_documents, batch_fingerprints, batch_pairs, batch_clusters, batch_release]
