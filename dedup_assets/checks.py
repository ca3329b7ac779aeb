"""Asset checks as plain functions of the tables they judge.

Assets yield these results next to their output (``check_specs``), so a check never reloads a
table, and a blocking check stops downstream assets from running on bad data.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from dagster import AssetCheckResult, AssetCheckSeverity, AssetCheckSpec, MetadataValue

from .core.contract import contract_mismatches, contract_path_for, load_contract, settings_mismatch
from .core.select import KEPT

_SHOWN = 5


def spec(name: str, asset: str, description: str, blocking: bool = True) -> AssetCheckSpec:
    return AssetCheckSpec(name=name, asset=asset, description=description, blocking=blocking)


def _result(name: str, failures: list[str], passed_text: str, **metadata) -> AssetCheckResult:
    return AssetCheckResult(
        check_name=name,
        passed=not failures,
        severity=AssetCheckSeverity.ERROR,
        description=passed_text if not failures else "; ".join(failures[:_SHOWN])
        + (f" (and {len(failures) - _SHOWN} more)" if len(failures) > _SHOWN else ""),
        metadata={"problems": MetadataValue.int(len(failures)), **metadata},
    )


def doc_id_unique(documents: pd.DataFrame) -> AssetCheckResult:
    repeated = sorted(documents.loc[documents["doc_id"].duplicated(), "doc_id"].unique())
    failures = [f"doc_id {doc_id!r} appears more than once" for doc_id in repeated]
    return _result("doc_id_unique", failures, f"{len(documents)} documents, all doc_id unique")


def pairs_ordered_and_unique(name: str, pairs: pd.DataFrame) -> AssetCheckResult:
    failures = []
    unordered = pairs[pairs["left_doc_id"] >= pairs["right_doc_id"]]
    failures += [f"pair ({l}, {r}) is not left < right" for l, r in zip(unordered["left_doc_id"], unordered["right_doc_id"])]
    repeated = pairs[pairs.duplicated(["left_doc_id", "right_doc_id"])]
    failures += [f"pair ({l}, {r}) appears more than once" for l, r in zip(repeated["left_doc_id"], repeated["right_doc_id"])]
    return _result(name, failures, f"{len(pairs)} pairs, each ordered left < right and unique")


def duplicate_edges_meet_threshold(duplicate_pairs: pd.DataFrame, threshold: float) -> AssetCheckResult:
    weak = duplicate_pairs[duplicate_pairs["jaccard"] < threshold]
    failures = [
        f"edge ({l}, {r}) has Jaccard {j:.4f} < {threshold}"
        for l, r, j in zip(weak["left_doc_id"], weak["right_doc_id"], weak["jaccard"])
    ]
    weakest = float(duplicate_pairs["jaccard"].min()) if len(duplicate_pairs) else None
    return _result(
        "duplicate_edges_meet_threshold",
        failures,
        f"all {len(duplicate_pairs)} edges have Jaccard >= {threshold}",
        weakest_jaccard=MetadataValue.float(weakest) if weakest is not None else MetadataValue.text("no edges"),
    )


def every_document_in_one_cluster(documents: pd.DataFrame, clusters: pd.DataFrame) -> AssetCheckResult:
    counts = clusters["doc_id"].value_counts()
    failures = [f"{doc_id} is in {n} clusters" for doc_id, n in counts[counts > 1].items()]
    missing = sorted(set(documents["doc_id"]) - set(clusters["doc_id"]))
    failures += [f"{doc_id} is in no cluster" for doc_id in missing]
    unknown = sorted(set(clusters["doc_id"]) - set(documents["doc_id"]))
    failures += [f"{doc_id} is clustered but not an input document" for doc_id in unknown]
    return _result(
        "every_document_in_one_cluster",
        failures,
        f"{len(documents)} documents in {clusters['cluster_id'].nunique()} clusters",
    )


def one_representative_per_cluster(clusters: pd.DataFrame) -> AssetCheckResult:
    kept = clusters[clusters["decision"] == KEPT].groupby("cluster_id").size()
    per_cluster = kept.reindex(clusters["cluster_id"].unique(), fill_value=0)
    failures = [f"{cluster_id} has {n} representatives" for cluster_id, n in per_cluster[per_cluster != 1].items()]
    return _result(
        "one_representative_per_cluster", failures, f"{len(per_cluster)} clusters, one representative each"
    )


def representatives_account_for_input(
    documents: pd.DataFrame, clusters: pd.DataFrame, deduped: pd.DataFrame
) -> AssetCheckResult:
    removed = int((clusters["decision"] != KEPT).sum())
    failures = []
    if len(deduped) + removed != len(documents):
        failures.append(f"{len(deduped)} representatives + {removed} removed != {len(documents)} input documents")
    expected = set(clusters.loc[clusters["decision"] == KEPT, "doc_id"])
    if set(deduped["doc_id"]) != expected:
        failures.append("deduped_documents does not hold exactly the representatives chosen in clusters")
    return _result(
        "representatives_account_for_input",
        failures,
        f"{len(deduped)} representatives + {removed} removed = {len(documents)} input documents",
    )


def fixture_contract(
    input_path: Path, settings: dict, counts: dict, clusters: pd.DataFrame, scored_pairs: pd.DataFrame
) -> AssetCheckResult:
    """Compare the run with ``<input>.expected.json`` when the input ships one."""
    contract = load_contract(input_path)
    contract_file = str(contract_path_for(input_path))
    if contract is None:
        return AssetCheckResult(
            check_name="fixture_contract",
            passed=True,
            description=f"no contract for this input ({contract_file} does not exist)",
            metadata={"evaluated": False},
        )
    changed = settings_mismatch(contract, settings)
    if changed:
        described = ", ".join(f"{k}={got} (contract: {want})" for k, (want, got) in changed.items())
        return AssetCheckResult(
            check_name="fixture_contract",
            passed=True,
            description=f"contract {contract_file} is for other settings: {described}; not compared",
            metadata={"evaluated": False},
        )
    failures = contract_mismatches(contract, counts, clusters, scored_pairs)
    return _result(
        "fixture_contract",
        failures,
        f"run matches {contract_file}",
        evaluated=True,
        contract=contract_file,
    )
