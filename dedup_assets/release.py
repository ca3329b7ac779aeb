"""Release files: the tables a reviewer downloads, written byte-identically for identical runs."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .core.inputs import file_sha256
from .core.select import KEPT

LIBRARIES = (
    "dagster",
    "dagster-duckdb",
    "dagster-duckdb-pandas",
    "duckdb",
    "pandas",
    "pyarrow",
    "networkx",
    "numpy",
)


def library_versions() -> dict[str, str]:
    return {name: metadata.version(name) for name in ("dedup-assets", *LIBRARIES)}


def _joined(values) -> str:
    return ";".join(sorted(set(values)))


def cluster_inspection(
    clusters: pd.DataFrame, documents: pd.DataFrame, duplicate_pairs: pd.DataFrame
) -> pd.DataFrame:
    """One row per multi-member cluster: who was kept, who was removed, and the weakest edge."""
    multi = clusters[clusters["cluster_size"] > 1].merge(
        documents[["doc_id", "domain"]], on="doc_id"
    )
    summary = multi.groupby("cluster_id", sort=True).agg(
        cluster_size=("cluster_size", "first"),
        representative_doc_id=("representative_doc_id", "first"),
        members=("doc_id", _joined),
        domains=("domain", _joined),
    )
    removed = (
        multi[multi["decision"] != KEPT].groupby("cluster_id")["doc_id"].agg(_joined)
    ).rename("removed_doc_ids")
    edges = duplicate_pairs.merge(
        clusters[["doc_id", "cluster_id"]], left_on="left_doc_id", right_on="doc_id"
    )
    edge_stats = edges.groupby("cluster_id").agg(
        edge_count=("jaccard", "size"),
        weakest_jaccard=("jaccard", "min"),
        weakest_signature_overlap=("signature_overlap", "min"),
    )
    inspection = summary.join(removed).join(edge_stats).reset_index()
    return inspection.astype({"edge_count": "int64"})


def fingerprint_release(fingerprinted: pd.DataFrame, band_memberships: pd.DataFrame) -> pd.DataFrame:
    """Fingerprints with each document's LSH band keys in band order (empty for empty bodies)."""
    keys = band_memberships.sort_values(["doc_id", "band_index"]).groupby("doc_id")["lsh_band"].agg(list)
    release = fingerprinted.copy()
    release["lsh_bands"] = [keys.get(doc_id, []) for doc_id in release["doc_id"]]
    return release


def write_table(frame: pd.DataFrame, path: Path) -> None:
    if path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    else:
        frame.to_csv(path, index=False, lineterminator="\n")


def write_release(output_dir: Path, tables: dict[str, pd.DataFrame], manifest: dict) -> dict:
    """Write every table to ``output_dir`` under its file name, then ``manifest.json`` listing them
    with row counts and checksums. Returns the manifest as written."""
    output_dir.mkdir(parents=True, exist_ok=True)
    outputs = []
    for file_name, frame in tables.items():
        path = output_dir / file_name
        write_table(frame, path)
        outputs.append({"file": file_name, "rows": len(frame), "sha256": file_sha256(path)})
    written = {**manifest, "outputs": outputs}
    (output_dir / "manifest.json").write_text(
        json.dumps(written, indent=2, sort_keys=False) + "\n", encoding="utf-8"
    )
    return written
