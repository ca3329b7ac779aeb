"""The engines the project ships, by name, and what each can run: checked when the settings are
validated at launch, so that a setting an engine cannot honour is refused before any step instead
of failing inside one. The names are written here once: the settings' choices are these keys
(``settings/choices.py``), and ``engines.for_settings`` opens each (a test holds it to them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Capabilities:
    bodies_in_place: bool  # parquet_bodies in_place: documents reads a Parquet input's bodies from its files
    reference_corpora: bool  # the reference setting: matches new documents against reference indexes
    reference: bool  # its tables are what the engine_matches_duckdb check compares the others with


CAPABILITIES = {
    "duckdb": Capabilities(bodies_in_place=True, reference_corpora=True, reference=True),
    "ray": Capabilities(bodies_in_place=False, reference_corpora=False, reference=False),
}
# the engine whose tables the engine_matches_duckdb check compares the others' with
REFERENCE = next(name for name, can in CAPABILITIES.items() if can.reference)


def engine_refusal(engine: str, reference: list[str]) -> str | None:
    """Why ``engine`` cannot run these settings, naming what to change; None when it can."""
    can = CAPABILITIES[engine]
    if not can.reference_corpora and reference:
        return f"reference runs on engine duckdb only. Use engine duckdb, or leave reference out with engine {engine}."
    return None
