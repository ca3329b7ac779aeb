"""Which settings produced a table, and refusing to mix tables built from different ones.

Every stored table carries a lineage dict: the input identity and the settings of its own stage
plus everything it inherited from upstream. A downstream asset compares its inputs' lineage with
the settings of the current run before it computes anything. Two stages also record facts the
release reports and that follow from those settings: the input's size (documents) and the LSH
bucket figures (candidate_pairs).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..core.util.errors import DedupError
from ..core.pipeline.step_assets import rerun_from
from ..core.read.ingest import changed_in_place_files
from ..core.settings.lineage import STAGE_SETTINGS, changed_settings
from ..core.sketch.scheme import SKETCH_SCHEME, described_differences, scheme_differences, setting_differs
from ..core.storage.tables import READ_IN_PLACE
from ..launch.environment import INPUT


class StaleUpstream(DedupError, RuntimeError):
    """An input table was built with other settings (or another input) than this run uses."""


def first_affected_asset(setting: str) -> str:
    for asset_name, names in STAGE_SETTINGS.items():
        if setting in names:
            return asset_name
    return "documents"  # the input identity, or anything unknown: rebuild from the start


def _run_settings(current: Mapping[str, object]) -> dict:
    """This run's settings that are not at their defaults, and its input unless it is the default:
    the rebuild runs with them, not with the bundled fixture and the defaults."""
    changed = changed_settings(current)
    if Path(str(current["input_path"])) != Path(INPUT.default).resolve():
        changed = {"input_path": str(current["input_path"]), **changed}
    return changed


def _rebuild_start(settings: list[str]) -> str:
    """The earliest stage the changed ``settings`` affect (dict order of STAGE_SETTINGS is pipeline
    order): it and everything downstream of it are built again."""
    order = list(STAGE_SETTINGS)
    return min((first_affected_asset(name) for name in settings), key=order.index)


def combined_lineage(
    asset_name: str, current: Mapping[str, object], upstreams: Mapping[str, Mapping[str, object]]
) -> dict:
    """Check the upstream tables against ``current`` settings and each other; return the lineage
    of the asset being built (inherited entries plus its own stage's settings)."""
    problems: list[str] = []
    changed: list[str] = []
    merged: dict[str, object] = {}
    seen_from: dict[str, str] = {}
    for upstream_name, lineage in upstreams.items():
        layout = lineage.get("table_layout", 1)  # tables before the layout was recorded
        if layout != current["table_layout"]:
            problems.append(
                f"{upstream_name} was built by another version of dedup-assets (table layout "
                f"{layout}; this version writes layout {current['table_layout']})"
            )
            changed.append("table_layout")
        for key, value in lineage.items():
            if key == "table_layout":  # checked above
                merged[key] = value
            elif key == SKETCH_SCHEME and key in current and setting_differs(key, value, current[key]):
                # the project's version alone is no difference: a release that changes no
                # fingerprint goes on using the tables an earlier one built
                differences = scheme_differences(value, current[key])
                problems.append(
                    f"{upstream_name} was fingerprinted with another sketch scheme ("
                    f"{described_differences(differences, upstream_name, 'this version')})"
                )
                changed.append(key)
            elif key in current and setting_differs(key, value, current[key]):
                problems.append(
                    f"{upstream_name} was built with {key}={value!r}, this run uses "
                    f"{key}={current[key]!r}"
                )
                changed.append(key)
            elif key in merged and setting_differs(key, value, merged[key]):
                problems.append(
                    f"{upstream_name} has {key}={value!r} but {seen_from[key]} has "
                    f"{key}={merged[key]!r}"
                )
                changed.append(key)
            else:
                merged.setdefault(key, value)
                seen_from.setdefault(key, upstream_name)
    if problems:
        start = _rebuild_start(changed)
        raise StaleUpstream(
            f"Cannot build {asset_name} from tables made with other settings: "
            + "; ".join(problems)
            + f". Re-materialize {start} and everything downstream of it.",
            fix=_run_settings(current),
            select=rerun_from(start, asset_name),
        )
    merged.update({name: current[name] for name in STAGE_SETTINGS.get(asset_name, ())})
    return dict(sorted(merged.items()))


def refuse_changed_input(lineage: Mapping[str, object], current: Mapping[str, object], asset_name: str) -> None:
    """Refuse tables built on a documents view whose Parquet files have changed since it read
    them, for asset ``asset_name``: the bodies it gives now are not the ones those tables were
    built from."""
    changed = changed_in_place_files(lineage.get(READ_IN_PLACE, []))
    if changed:
        raise StaleUpstream(
            f"The input has changed since documents read it: {'; '.join(changed)}. documents reads "
            "a Parquet input's bodies from its files (parquet_bodies: in_place), so the tables built "
            "on it no longer match them. Restore the file, or read it again: re-materialize documents "
            "and everything downstream of it.",
            fix=_run_settings(current),
            select=rerun_from("documents", asset_name),
        )
