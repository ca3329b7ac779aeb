from __future__ import annotations

import pandas as pd
from dagster import MetadataValue, Output, asset

from .. import checks
from ..core.pipeline import cluster_members, representatives
from ..settings import DedupSettings
from ._shared import GROUP, lineage_for, preview, stamped


@asset(
    group_name=GROUP,
    kinds={"duckdb", "pandas", "networkx"},
    check_specs=[
        checks.spec(
            "every_document_in_one_cluster",
            "clusters",
            "Every input document is in exactly one cluster.",
        ),
        checks.spec(
            "one_representative_per_cluster",
            "clusters",
            "Each cluster keeps exactly one representative.",
        ),
    ],
)
def clusters(
    dedup: DedupSettings,
    documents: pd.DataFrame,
    fingerprinted: pd.DataFrame,
    duplicate_pairs: pd.DataFrame,
):
    """Connected components of the duplicate-edge graph (networkx), one row per input document.

    `cluster_id` is `cluster-` + the smallest member `doc_id`. Within a cluster the representative
    is the newest `crawled_at`, then the most tokens, then the smallest `doc_id`;
    `representative_rank` 1 is kept (`decision = kept_representative`), the rest are
    `removed_duplicate` with `representative_doc_id` naming what replaced them.
    """
    lineage = lineage_for(
        "clusters",
        dedup,
        documents=documents,
        fingerprinted=fingerprinted,
        duplicate_pairs=duplicate_pairs,
    )
    frame = cluster_members(documents, fingerprinted, duplicate_pairs)
    sizes = frame.drop_duplicates("cluster_id")["cluster_size"]
    multi = frame[frame["cluster_size"] > 1]
    yield Output(
        stamped(frame, lineage),
        metadata={
            "clusters": MetadataValue.int(len(sizes)),
            "duplicate_clusters": MetadataValue.int(int((sizes > 1).sum())),
            "singleton_clusters": MetadataValue.int(int((sizes == 1).sum())),
            "largest_cluster_size": MetadataValue.int(int(sizes.max())),
            "removed_documents": MetadataValue.int(int((frame["representative_rank"] > 1).sum())),
            "preview": preview(
                multi, ["cluster_id", "doc_id", "crawled_at", "token_count", "decision"]
            ),
        },
    )
    yield checks.every_document_in_one_cluster(documents, frame)
    yield checks.one_representative_per_cluster(frame)


@asset(
    group_name=GROUP,
    kinds={"duckdb", "pandas"},
    check_specs=[
        checks.spec(
            "representatives_account_for_input",
            "deduped_documents",
            "Representatives plus removed duplicates equal the input documents.",
        )
    ],
)
def deduped_documents(dedup: DedupSettings, documents: pd.DataFrame, clusters: pd.DataFrame):
    """The deduplicated corpus: one representative per cluster, with every input column
    (extra columns such as WARC lineage included) plus `cluster_id` and `cluster_size`."""
    lineage = lineage_for("deduped_documents", dedup, documents=documents, clusters=clusters)
    frame = representatives(documents, clusters)
    yield Output(
        stamped(frame, lineage),
        metadata={
            "representatives": MetadataValue.int(len(frame)),
            "removed_documents": MetadataValue.int(len(documents) - len(frame)),
            "kept_share": MetadataValue.float(round(len(frame) / len(documents), 4)),
            "preview": preview(frame, ["doc_id", "domain", "crawled_at", "cluster_id", "cluster_size"]),
        },
    )
    yield checks.representatives_account_for_input(documents, clusters, frame)
