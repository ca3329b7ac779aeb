"""Named sets of settings, and what to set when the audit measures too little recall.

A preset fills the settings it names that are at their defaults: a setting given any other value
keeps it (a value equal to the default cannot be told from one left unset, so the preset fills it).
"""

from __future__ import annotations

from dataclasses import replace

PRESETS: dict[str, dict] = {
    # recall first, for web pages with light edits: 20 bands of 6 rows make 92% of the pairs at
    # J = 0.7 candidates (the published 8 x 8 of 64 values make 38%), for twice the signature values
    "web": {"num_perm": 128, "auto_bands": True, "false_negative_weight": 0.9},
}
# the false_negative_weight a suggestion beyond the preset uses: at 0.7 and 128 values, 23 bands of
# 5 rows, which make 98% of the pairs at the threshold candidates
RECALL_WEIGHT = 0.98


def preset_values(preset: str | None, values: dict, defaults: dict) -> dict:
    """What ``preset`` sets among ``values``: its settings whose value is still the default."""
    named = PRESETS.get(preset, {}) if preset else {}
    return {name: value for name, value in named.items() if values[name] == defaults[name]}


def more_recall(settings, max_perm: int) -> tuple[dict, object] | None:
    """The first changes that make LSH find more of the pairs at or above the threshold than
    ``settings`` (a ``Settings``) do, and the settings they make: the web preset; bands chosen with
    misses weighing more; then twice the signature values (up to ``max_perm``). None when none does."""
    weight = max(RECALL_WEIGHT, settings.false_negative_weight)
    tries = [
        {"preset": "web"},
        {"auto_bands": True, "false_negative_weight": weight},
        {"num_perm": min(settings.num_perm * 2, max_perm), "auto_bands": True, "false_negative_weight": weight},
    ]
    for changes in tries:
        changed = replace(settings, **changes)
        if changed.lsh_recall() > settings.lsh_recall() + 1e-9:
            return changes, changed
    return None


def recall_shortfalls(audit: dict, min_recall: float) -> list[tuple[str, dict]]:
    """The audit's figures (``audit/recall.py``'s ``audit_summary``) below ``min_recall``, each named: every
    true pair, the near copies, then each Jaccard band (all at or above the threshold), since a
    healthy total can hide the band of light edits that the bands in use mostly miss."""
    near = audit.get("near_copies") or {}
    named = [
        ("recall", audit),
        # with no exact copies among the true pairs, the near copies are every pair: named once
        ("near-copy recall", near if near.get("true_pairs") != audit.get("true_pairs") else {}),
        *((f"recall in Jaccard band {band}", figures) for band, figures in (audit.get("by_jaccard_band") or {}).items()),
    ]
    return [(name, figures) for name, figures in named if figures.get("true_pairs") and figures["recall"] < min_recall]
