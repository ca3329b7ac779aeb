"""Named jobs, so runs show what they did instead of ``__ASSET_JOB``."""

from dagster import AssetSelection, define_asset_job

from ..assets.asset_common import GROUP

# the whole one-shot graph, with its checks
dedup_all = define_asset_job(
    "dedup_all",
    selection=AssetSelection.groups(GROUP),
    description="Every asset of the deduplication graph, from the input to the release files.",
)

# after changing jaccard_threshold or signature_overlap_threshold: the stored candidates are
# scored again and everything after them rebuilt, without fingerprinting again
rescore = define_asset_job(
    "rescore",
    selection=AssetSelection.assets("scored_pairs").downstream(),
    description="Score the stored candidate pairs again and rebuild edges, clusters and the release.",
)

PIPELINE_JOBS = [dedup_all, rescore]
