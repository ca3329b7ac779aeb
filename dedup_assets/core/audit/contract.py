"""Fixture contracts: an input may ship ``<stem>.expected.json`` with the results it must give."""

from __future__ import annotations

import json
import math
from pathlib import Path


def contract_path_for(input_path: Path) -> Path:
    return input_path.with_name(input_path.name.split(".")[0] + ".expected.json")


def load_contract(input_path: Path) -> dict | None:
    path = contract_path_for(input_path)
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def settings_mismatch(contract: dict, settings: dict) -> dict:
    """Settings the contract was written for that differ in this run: ``{name: (expected, got)}``."""
    return {
        name: (expected, settings.get(name))
        for name, expected in contract.get("settings", {}).items()
        if settings.get(name) != expected
    }


def contract_mismatches(
    contract: dict, counts: dict, reasons: dict[str, int], duplicate_clusters: list[dict]
) -> list[str]:
    """Human-readable differences between a run and its contract; empty when it holds."""
    problems = []
    for name, expected in contract.get("counts", {}).items():
        actual = counts.get(name)
        same = (
            actual is not None and math.isclose(actual, expected, abs_tol=5e-5)
            if isinstance(expected, float)
            else actual == expected
        )
        if not same:
            problems.append(f"{name}: expected {expected}, got {actual}")
    for reason, expected in contract.get("pair_reasons", {}).items():
        if reasons.get(reason, 0) != expected:
            problems.append(f"pairs with reason {reason}: expected {expected}, got {reasons.get(reason, 0)}")
    if "duplicate_clusters" in contract:
        actual_clusters = {c["cluster_id"]: c for c in duplicate_clusters}
        expected_clusters = {c["cluster_id"]: c for c in contract["duplicate_clusters"]}
        for cluster_id in sorted(set(actual_clusters) | set(expected_clusters)):
            expected, actual = expected_clusters.get(cluster_id), actual_clusters.get(cluster_id)
            if expected != actual:
                problems.append(f"{cluster_id}: expected {expected}, got {actual}")
    return problems
