from __future__ import annotations


import pandas as pd
from dagster import MetadataValue, Output, asset

from .. import checks
from ..core.fingerprint import lsh_probability
from ..core.lsh import bucket_pressure
from ..core.summary import run_counts
from ..release import cluster_inspection, fingerprint_release, library_versions, write_release
from ..settings import DedupSettings
from ._shared import GROUP, lineage_for, stamped


@asset(
    group_name=GROUP,
    kinds={"duckdb", "pandas", "parquet", "json"},
    check_specs=[
        checks.spec(
            "fixture_contract",
            "manifest",
            "When the input ships <name>.expected.json, the run's counts, pair reasons and "
            "duplicate clusters match it.",
        )
    ],
)
def manifest(
    dedup: DedupSettings,
    documents: pd.DataFrame,
    fingerprinted: pd.DataFrame,
    band_memberships: pd.DataFrame,
    candidate_pairs: pd.DataFrame,
    scored_pairs: pd.DataFrame,
    duplicate_pairs: pd.DataFrame,
    clusters: pd.DataFrame,
    deduped_documents: pd.DataFrame,
):
    """Writes the release files to `DEDUP_OUTPUT_DIR` (fingerprints, candidate summary, scored and
    duplicate pairs, clusters, cluster inspection, deduped documents) and `manifest.json` with
    the settings, the input's size and sha256, library versions, every file's checksum and the run
    counts. The stored table holds the counts, one row per metric.
    """
    lineage = lineage_for(
        "manifest",
        dedup,
        documents=documents,
        fingerprinted=fingerprinted,
        band_memberships=band_memberships,
        candidate_pairs=candidate_pairs,
        scored_pairs=scored_pairs,
        duplicate_pairs=duplicate_pairs,
        clusters=clusters,
        deduped_documents=deduped_documents,
    )
    pressure = bucket_pressure(band_memberships)
    counts = run_counts(documents, candidate_pairs, pressure.pair_slots, duplicate_pairs, clusters)
    params = dedup.sketch_params()
    candidate_summary = pd.DataFrame(
        [
            {
                "document_rows": counts["document_rows"],
                "possible_pair_rows": counts["possible_pair_rows"],
                "candidate_pair_rows": counts["candidate_pair_rows"],
                "candidate_reduction_ratio": counts["candidate_reduction_ratio"],
                "candidate_pair_slots": pressure.pair_slots,
                "largest_bucket_size": pressure.largest_bucket_size,
                "bands": params.bands,
                "rows_per_band": params.rows_per_band,
                "lsh_probability_at_threshold": round(
                    lsh_probability(dedup.jaccard_threshold, params.bands, params.rows_per_band), 4
                ),
            }
        ]
    )
    written = write_release(
        dedup.output_folder(),
        {
            "fingerprinted.parquet": fingerprint_release(fingerprinted, band_memberships),
            "candidate_summary.csv": candidate_summary,
            "scored_pairs.parquet": scored_pairs,
            "duplicate_pairs.csv": duplicate_pairs,
            "clusters.csv": clusters,
            "cluster_inspection.csv": cluster_inspection(clusters, documents, duplicate_pairs),
            "deduped_documents.parquet": deduped_documents,
        },
        {
            "product": "dedup-assets",
            "settings": dedup.algorithm_settings(),
            "input": {
                "path": lineage["input_path"],
                "rows": len(documents),
                "byte_size": lineage["input_byte_size"],
                "sha256": lineage["input_sha256"],
            },
            "versions": library_versions(),
            "counts": counts,
            "pair_reasons": scored_pairs["reason"].value_counts().sort_index().to_dict(),
        },
    )
    frame = pd.DataFrame({"metric": list(counts), "value": [float(v) for v in counts.values()]})
    yield Output(
        stamped(frame, lineage),
        metadata={
            "output_dir": MetadataValue.path(str(dedup.output_folder())),
            "files": MetadataValue.md(
                pd.DataFrame(written["outputs"]).to_markdown(index=False)
            ),
            **{name: value for name, value in counts.items()},
        },
    )
    yield checks.fixture_contract(
        dedup.input_file(), dedup.algorithm_settings(), counts, clusters, scored_pairs
    )
