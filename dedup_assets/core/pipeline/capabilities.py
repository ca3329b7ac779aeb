"""The engines the project ships, by name, and what each can run: checked when the settings are
validated at launch, so that a setting an engine cannot honour is refused before any step instead
of failing inside one. The names are written here once: the settings' choices are these keys
(``settings/choices.py``), and ``engines.for_settings`` opens each (a test holds it to them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Capabilities:
    star_clusters: bool  # cluster_mode star: its rounds compare whole components on one node
    skip_hot_buckets: bool  # hot_buckets skip: buckets left out of the join and listed
    bodies_in_place: bool  # parquet_bodies in_place: documents reads a Parquet input's bodies from its files
    incremental: bool  # the batch index, which lives in the DuckDB file
    reference_corpora: bool  # the reference setting: matches new documents against reference indexes
    reference: bool  # its tables are what the engine_matches_duckdb check compares the others with


CAPABILITIES = {
    "duckdb": Capabilities(
        star_clusters=True, skip_hot_buckets=True, bodies_in_place=True, incremental=True, reference_corpora=True,
        reference=True,
    ),
    "ray": Capabilities(
        star_clusters=True, skip_hot_buckets=True, bodies_in_place=False, incremental=False,
        reference_corpora=False, reference=False,
    ),
}
# the engine whose tables the engine_matches_duckdb check compares the others' with
REFERENCE = next(name for name, can in CAPABILITIES.items() if can.reference)


def engine_refusal(engine: str, cluster_mode: str, hot_buckets: str, reference: list[str]) -> str | None:
    """Why ``engine`` cannot run these settings, naming what to change; None when it can."""
    can = CAPABILITIES[engine]
    if not can.star_clusters and cluster_mode != "components":
        return (
            "cluster_mode star runs on engine duckdb only: its rounds compare whole components on one "
            f"node. Use cluster_mode components with engine {engine} (the chained members are still "
            "flagged), or engine duckdb."
        )
    if not can.skip_hot_buckets and hot_buckets == "skip":
        return f"hot_buckets skip runs on engine duckdb only. Use engine duckdb, or hot_buckets refuse (the default) with engine {engine}."
    if not can.reference_corpora and reference:
        return f"reference runs on engine duckdb only. Use engine duckdb, or leave reference out with engine {engine}."
    return None
