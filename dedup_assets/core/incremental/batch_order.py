"""When a batch may be added: in key order, with the index's settings, and with a cluster mode,
engine and hot-bucket rule the index can run. Each refusal (``BatchOrderError``, or
``SettingsError`` for settings the index never takes) says the command to run instead
(``batch_command``, ``forget_command``), so the rules and the words that explain them are kept
together, apart from the steps that stage and add a batch."""

from __future__ import annotations

import shlex
from dataclasses import fields

from ..util.errors import DedupError
from ..keep.rule import DEFAULT_KEEP
from ..settings.model import Settings, SettingsError
from ..sketch.scheme import SKETCH_SCHEME, described_differences, scheme_differences, setting_differs, unrecorded_scheme
from .index_tables import INDEX_LAYOUT, INDEX_SETTINGS, IndexedBatch


class BatchOrderError(DedupError, RuntimeError):
    """A batch cannot be added now: an earlier one is missing, later ones depend on it, its
    settings are not the index's, or it was staged against another index."""


def order_problem(indexed: list[IndexedBatch], earlier_in_folder: list[str], key: str) -> tuple[str, list[str]] | None:
    """Why ``key`` cannot be added now, if it cannot: ``("missing", keys)`` when earlier batches of
    the folder are not in the index yet, ``("later", keys)`` when later batches already are."""
    present = {batch.key for batch in indexed}
    missing = [earlier for earlier in earlier_in_folder if earlier not in present]
    if missing:
        return "missing", missing
    later = [batch.key for batch in indexed if batch.key > key]
    if later:
        return "later", later
    return None


def settings_problems(indexed: list[IndexedBatch], current: dict) -> list[tuple[str, object, object]]:
    """Each algorithm setting the index was built with that this run would change:
    (name, the index's value, this run's value)."""
    if not indexed:
        return []
    # an index built before bands could be chosen used rows_per_band's bands, and one built
    # before prefer_domains or keep the keep rule without them
    implied = {
        "auto_bands": False,
        "bands": built_bands(indexed[0].settings),
        "rows_in_use": indexed[0].settings.get("rows_per_band"),
        "prefer_domains": [],
        "keep": list(DEFAULT_KEEP),
        "ignored_passages": [],
        "ignore_shared_above": None,
    }
    built = {**implied, **indexed[0].settings}
    # an index built before its sketch scheme was recorded was built by the first recorded
    # versions of the hash and the text rule (an earlier rule is refused by the index's layout)
    built.setdefault(SKETCH_SCHEME, unrecorded_scheme(built))
    return [
        (name, built[name], current[name])
        for name in sorted(built)
        if name in current and setting_differs(name, built[name], current[name])
    ]


def built_bands(settings: dict) -> int | None:
    """The bands an index was built with; for one from before they were recorded, num_perm / rows_per_band."""
    if "bands" in settings:
        return settings["bands"]
    if settings.get("num_perm") and settings.get("rows_per_band"):
        return settings["num_perm"] // settings["rows_per_band"]
    return None


def batch_command(key: str) -> str:
    """The command that adds batch ``key``."""
    return (
        "dagster asset materialize -m dedup_assets.definitions --select 'group:incremental' "
        f"--partition {shlex.quote(key)}"
    )


def forget_command(key: str) -> str:
    """The command that takes batch ``key`` and every later batch out of the index."""
    return f"dedup forget-batches {shlex.quote(key)}"


def refuse_out_of_order(indexed: list[IndexedBatch], earlier_in_folder: list[str], key: str) -> None:
    """Raise :class:`BatchOrderError`, saying what to run, unless ``key`` can be added now: every
    earlier batch of the folder is in the index and no later one is."""
    problem = order_problem(indexed, earlier_in_folder, key)
    if problem is None:
        return
    kind, keys = problem
    if kind == "missing":
        raise BatchOrderError(
            f"Batch {key} cannot be added before batch {keys[0]}, which is earlier in key order and "
            f"not in the index yet ({len(keys)} earlier batch{'es' if len(keys) > 1 else ''} missing: "
            f"{', '.join(keys)}). Batches are added in key order; add it first: "
            + batch_command(keys[0])
        )
    raise BatchOrderError(
        f"Batch {key} cannot be added again: later batches are in the index already ({', '.join(keys)}), "
        f"and each of them was deduplicated against batch {key} as it is. To rebuild from batch {key}, "
        f"take it and every later batch out of the index with `{forget_command(key)}`, "
        f"then add them again in key order, starting with: {batch_command(key)}"
    )


def refuse_other_settings(indexed: list[IndexedBatch], current: dict, key: str) -> None:
    """Raise :class:`BatchOrderError` when this run's algorithm settings differ from the index's."""
    problems = settings_problems(indexed, current)
    # a setting that changes the scheme is named as that setting, with the index's value to run with
    problems, scheme = [p for p in problems if p[0] != SKETCH_SCHEME], [p for p in problems if p[0] == SKETCH_SCHEME]
    if not problems:
        if scheme:
            refuse_other_scheme(indexed, scheme[0][1], scheme[0][2], key)
        return
    changed = "; ".join(f"the index has {name}={built!r}, this run {name}={now!r}" for name, built, now in problems)
    # the settings themselves: a derived figure (bands, rows_in_use) differs because one of them does
    settable = {setting.name for setting in fields(Settings)}
    raise BatchOrderError(
        f"Cannot add batch {key} with other settings than the batches already in the index ({changed}): "
        "every batch of an index is deduplicated with one set of settings, as one run over all of them "
        f"would be. Start a new index (`{forget_command(indexed[0].key)}` takes every batch out, or set "
        "DEDUP_DATABASE to a new file), or run it with the index's settings.",
        fix={name: built for name, built, _ in problems if name in settable},
    )


def refuse_other_scheme(indexed: list[IndexedBatch], built: dict, now: dict, key: str) -> None:
    """Raise :class:`BatchOrderError`, in one line, for an index whose settings are this run's but
    whose sketch scheme is not (another version of the hash or of the text rule): it names the
    parts that differ and how to re-fingerprint the index, which is to add its batches again."""
    first = indexed[0].key
    raise BatchOrderError(
        f"Cannot add batch {key}: the index was fingerprinted with another sketch scheme "
        f"({described_differences(scheme_differences(built, now), 'index', 'this version')}), whose "
        f"fingerprints cannot be compared with this version's. Re-fingerprint the index: "
        f"`{forget_command(first)}` takes every batch out, then add them again in key order, "
        f"starting with: {batch_command(first)}"
    )


def index_settings(settings: Settings) -> dict:
    """The settings every batch of one index shares: those that change any table (the input's
    path aside, which is each batch's own). Refuses ``cluster_mode`` star: a batch's decisions
    are final, and a star split of a component could move a document another batch kept."""
    if settings.cluster_mode != "components":
        raise SettingsError(
            f"cluster_mode {settings.cluster_mode!r} applies to the one-shot graph only: the "
            "incremental index clusters batches by connected components. Run the batches with "
            "cluster_mode 'components', or run the one-shot graph over the batch folder (DEDUP_INPUT) "
            "for star clusters."
        )
    if settings.hot_buckets != "refuse":
        raise SettingsError(
            f"hot_buckets {settings.hot_buckets!r} applies to the one-shot graph only: a batch's "
            "decisions are final, and the index keeps no list of the buckets a batch left out. Run "
            "the batches with hot_buckets 'refuse', or the one-shot graph over the batch folder "
            "(DEDUP_INPUT) with hot_buckets 'skip'."
        )
    if settings.ignore_shared_above is not None:
        raise SettingsError(
            "ignore_shared_above applies to the one-shot graph only: every batch of an index must leave "
            "out the same passages, and a share would find others in each batch. Name the passages in "
            "ignored_passages instead (the one-shot run's boilerplate.csv lists them)."
        )
    if settings.reference:
        raise SettingsError(
            "reference applies to the one-shot graph only: a batch is deduplicated against the "
            "index of the earlier batches, which holds no reference. Run the batches without "
            "reference, or the one-shot graph over the batch folder (DEDUP_INPUT) with it."
        )
    values = {**settings.as_dict(), **settings.derived(), "table_layout": INDEX_LAYOUT}
    return {name: values[name] for name in INDEX_SETTINGS}
