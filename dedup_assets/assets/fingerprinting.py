from dagster import AssetExecutionContext, MetadataValue, asset

from ..core.stages import build_band_memberships, build_fingerprinted
from ..core.tables import TableBuild
from ..errors import user_errors
from ..io_manager import TableRef
from ..settings import DedupSettings
from ._shared import GROUP, KINDS, lineage_for, markdown_preview, tables_of


def _describe_fingerprints(connection, table: str) -> dict:
    stats = connection.execute(
        f"select count(*) filter (where shingle_count = 0), avg(token_count), avg(shingle_count) from {table}"
    ).fetchall()[0]
    return {
        "documents_without_shingles": MetadataValue.int(int(stats[0])),
        "mean_tokens": MetadataValue.float(round(float(stats[1] or 0), 2)),
        "mean_shingles": MetadataValue.float(round(float(stats[2] or 0), 2)),
        "preview": markdown_preview(
            connection,
            f"select doc_id, token_count, shingle_count, printf('%016x', content_hash) as content_hash, "
            f"printf('%016x', signature[1]) as signature_1 from {table} order by doc_id",
        ),
    }


@asset(group_name=GROUP, kinds=KINDS | {"numba"})
def fingerprinted(context: AssetExecutionContext, dedup: DedupSettings, documents: TableRef) -> TableBuild:
    """Per-document fingerprint: `token_count`, distinct `shingle_count`, `content_hash` of the
    normalized token sequence (equal for exact duplicates), the `num_perm`-value `signature`
    (UBIGINT[], exact) and the `lsh_bands` hashes of `rows_per_band` values each.

    Text is normalized (NFD, marks dropped, lowercase, punctuation and `_` to space, whitespace
    collapsed) and cut into ordered `shingle_size`-token shingles. `hash_scheme` picks the fast
    compiled sketch (`fss`) or the published blake2b MinHash. Streams `batch_size` documents at a
    time and logs progress.
    """
    lineage = lineage_for("fingerprinted", dedup, documents=documents)
    with user_errors():
        params = dedup.sketch_params()
    build = build_fingerprinted(
        documents.connect(), tables_of(documents), params, dedup.batch_size, context.log.info
    )
    build.lineage = lineage
    build.metadata = {
        "hash_scheme": params.hash_scheme,
        "num_perm": MetadataValue.int(params.num_perm),
        "bands": MetadataValue.int(params.bands),
        "rows_per_band": MetadataValue.int(params.rows_per_band),
    }
    build.describe = _describe_fingerprints
    return build


def _describe_bands(connection, table: str) -> dict:
    # Bucket sizes are measured once, by candidate_pairs, before its join. The preview takes the
    # first rows in fingerprinted order (DuckDB keeps insertion order through the view's unnest):
    # ordering 16 rows per document cost 1.7 s per 1M.
    return {
        "preview": markdown_preview(
            connection,
            f"select doc_id, band_index, printf('%03d:%016x', band_index, lsh_band) as band_key "
            f"from {table}",
        ),
    }


@asset(group_name=GROUP, kinds=KINDS | {"sql"})
def band_memberships(dedup: DedupSettings, fingerprinted: TableRef) -> TableBuild:
    """One row per (document, LSH band): `band_index` and `lsh_band`, the band's 64-bit key
    (`printf('%03d:%016x', band_index, lsh_band)` is the published key under `blake2b`).
    Documents without shingles have no rows, so they never share a bucket.

    Stored as a DuckDB view that unnests `fingerprinted.lsh_bands`, so the 16M rows of a 1M-document
    corpus at 16 bands are not written to the database a second time."""
    build = build_band_memberships(tables_of(fingerprinted))
    build.lineage = lineage_for("band_memberships", dedup, fingerprinted=fingerprinted)
    build.describe = _describe_bands
    return build
