"""The engines the project ships, by name, and how they differ: whether one reads a Parquet
input's bodies in place, and which one's tables the others are compared with. The names are
written here once: the settings' choices are these keys (``settings/choices.py``), and
``engines.for_settings`` opens each (a test holds it to them). Every engine runs every setting."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Capabilities:
    bodies_in_place: bool  # parquet_bodies in_place: documents reads a Parquet input's bodies from its files
    reference: bool  # its tables are what the engine_matches_duckdb check compares the others with


CAPABILITIES = {
    "duckdb": Capabilities(bodies_in_place=True, reference=True),
    "ray": Capabilities(bodies_in_place=False, reference=False),
}
# the engine whose tables the engine_matches_duckdb check compares the others' with
REFERENCE = next(name for name, can in CAPABILITIES.items() if can.reference)

