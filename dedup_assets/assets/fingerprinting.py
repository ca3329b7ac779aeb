from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from ..core.pipeline import steps
from ..core.text.normalize import shingling_warning
from ..engine_resource import EngineResource
from ..launch.user_messages import user_errors
from ..settings_resource import DedupSettings
from ..stored_tables.warehouse import DuckDBWarehouse
from .asset_common import GROUP, KINDS, checked_lineage, step_run
from .metadata import preview, table_metadata


def _describe_fingerprints(cursor, table: str) -> dict:
    stats = cursor.execute(
        f"select count(*) filter (where shingle_count = 0), avg(token_count), avg(shingle_count) from {table}"
    ).fetchall()[0]
    return {
        "documents_without_shingles": MetadataValue.int(int(stats[0])),
        "mean_tokens": MetadataValue.float(round(float(stats[1] or 0), 2)),
        "mean_shingles": MetadataValue.float(round(float(stats[2] or 0), 2)),
        "preview": preview(
            cursor,
            f"select doc_id, token_count, shingle_count, printf('%016x', content_hash) as content_hash, "
            f"printf('%016x', signature[1]) as signature_1 from {table} order by doc_id",
        ),
    }


@asset(group_name=GROUP, kinds=KINDS | {"numba"}, deps=["documents"])
def fingerprinted(
    context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse, engine: EngineResource
) -> MaterializeResult:
    """Per-document fingerprint: `token_count`, distinct `shingle_count`, `content_hash` of the
    normalized token sequence (equal for exact duplicates), the `num_perm`-value `signature`
    (UBIGINT[], exact) and the `lsh_bands` hashes of `rows_per_band` values each.

    Text is normalized (NFD, accents dropped and other marks recomposed, lowercase, punctuation
    and `_` to space, whitespace collapsed; every Han, Hiragana and Katakana character a token)
    and cut into ordered shingles of `shingle_size` tokens, or characters with `shingle_unit`
    `char`. `hash_scheme` picks the fast
    compiled sketch (`fss`) or the published blake2b MinHash. Streams `batch_size` documents at a
    time and logs progress.

    The recall audit's ground truth rides on the same pass: the `audit_sample_size` doc_ids with
    the smallest hash keyed by `minhash_seed` (0: all) are read first, and every batch is searched
    for their pairs at Jaccard ≥ `jaccard_threshold` (prefix filtering, exact Jaccard), exact
    copies included. They are stored beside this table in `audit_true_pairs`, one row per sampled
    text and each text it finds (`audit_true_pair_rows`; a group of identical copies is one
    text), which `recall_audit` counts and compares with the pairs the pipeline found.
    """
    lineage, settings = checked_lineage(context, dedup, warehouse)
    params = settings.sketch_params()
    with user_errors():
        written = steps.fingerprint(step_run(context, warehouse, engine, lineage, settings))
    warning = shingling_warning(params.shingling, written.rows)
    if warning:
        context.log.warning(warning)
    with warehouse.cursor() as cursor:
        return MaterializeResult(
            metadata={
                **table_metadata(cursor, warehouse.tables.fingerprinted, written.rows),
                "hash_scheme": params.hash_scheme,
                "shingling": f"{params.shingle_size} {params.shingle_unit}s",
                "num_perm": MetadataValue.int(params.num_perm),
                "bands": MetadataValue.int(params.bands),
                "rows_per_band": MetadataValue.int(params.rows_per_band),
                **_describe_fingerprints(cursor, warehouse.tables.fingerprinted),
                "audit_sampled_documents": MetadataValue.int(written.sampled),
                "audit_true_pair_rows": MetadataValue.int(written.audit_rows),
            }
        )


@asset(group_name=GROUP, kinds=KINDS | {"sql"}, deps=["fingerprinted"])
def band_memberships(
    context: AssetExecutionContext, dedup: DedupSettings, warehouse: DuckDBWarehouse
) -> MaterializeResult:
    """One row per (document, LSH band): `band_index` and `lsh_band`, the band's 64-bit key
    (`printf('%03d:%016x', band_index, lsh_band)` is the published key under `blake2b`).
    Documents without shingles have no rows, so they never share a bucket.

    Stored as a DuckDB view that unnests `fingerprinted.lsh_bands`, so the band keys are not
    written to the database a second time."""
    lineage, settings = checked_lineage(context, dedup, warehouse)
    table = warehouse.tables.band_memberships
    rows = steps.band_memberships(step_run(context, warehouse, None, lineage, settings))
    with warehouse.cursor() as cursor:
        # Bucket sizes are measured once, by candidate_pairs. The preview takes the first rows in
        # fingerprinted order (DuckDB keeps insertion order through the view's unnest): ordering
        # every band row would cost more than the rest of this step.
        return MaterializeResult(
            metadata={
                **table_metadata(cursor, table, rows),
                "preview": preview(
                    cursor,
                    f"select doc_id, band_index, printf('%03d:%016x', band_index, lsh_band) as band_key "
                    f"from {table}",
                ),
            }
        )
