from __future__ import annotations

import pandas as pd
from dagster import MetadataValue, Output, asset

from ..core.fingerprint import band_memberships as memberships_of
from ..core.fingerprint import fingerprint_documents
from ..settings import DedupSettings
from ._shared import GROUP, lineage_for, preview, stamped, user_errors


@asset(group_name=GROUP, kinds={"duckdb", "pandas"})
def fingerprinted(dedup: DedupSettings, documents: pd.DataFrame):
    """Per-document fingerprint: token and shingle counts, a content hash of the normalized text
    (equal hashes mark exact duplicates) and the `num_perm`-value MinHash signature (UBIGINT[]).

    Text is normalized (NFD, marks dropped, lowercase, punctuation and `_` to space, whitespace
    collapsed) and cut into ordered `shingle_size`-token shingles. Depends on `shingle_size`,
    `num_perm` and `minhash_seed`.
    """
    lineage = lineage_for("fingerprinted", dedup, documents=documents)
    with user_errors():
        params = dedup.sketch_params()
    frame = fingerprint_documents(documents, params)
    return Output(
        stamped(frame, lineage),
        metadata={
            "documents": MetadataValue.int(len(frame)),
            "documents_without_shingles": MetadataValue.int(int((frame["shingle_count"] == 0).sum())),
            "mean_tokens": MetadataValue.float(round(float(frame["token_count"].mean()), 2)),
            "mean_shingles": MetadataValue.float(round(float(frame["shingle_count"].mean()), 2)),
            "num_perm": MetadataValue.int(params.num_perm),
            "preview": preview(frame, ["doc_id", "token_count", "shingle_count", "content_hash"]),
        },
    )


@asset(group_name=GROUP, kinds={"duckdb", "pandas"})
def band_memberships(dedup: DedupSettings, fingerprinted: pd.DataFrame):
    """One row per (document, LSH band): the band key `"{band:03d}:" + blake2b-64 hex` of
    `rows_per_band` consecutive signature values. Documents without shingles have no rows, so
    they never share a bucket. Depends on `rows_per_band`.
    """
    lineage = lineage_for("band_memberships", dedup, fingerprinted=fingerprinted)
    with user_errors():
        params = dedup.sketch_params()
    frame = memberships_of(fingerprinted, params.rows_per_band)
    bucket_sizes = frame.groupby("lsh_band").size()
    return Output(
        stamped(frame, lineage),
        metadata={
            "bands": MetadataValue.int(params.bands),
            "rows_per_band": MetadataValue.int(params.rows_per_band),
            "documents_in_buckets": MetadataValue.int(int(frame["doc_id"].nunique())),
            "distinct_buckets": MetadataValue.int(len(bucket_sizes)),
            "shared_buckets": MetadataValue.int(int((bucket_sizes > 1).sum())),
            "preview": preview(frame),
        },
    )
