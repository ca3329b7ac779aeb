"""The ``ignored_passages`` setting as the rest of the pipeline takes it: the passages' shingles,
which ``Shingling.ignored`` carries and every shingle set leaves out (``text.kept_shingles`` in
the reference, ``kernels._shingle_hashes`` in the kernels, which take their hashes from here)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import cache

import numpy as np
import pyarrow as pa

from ..sketch import kernels
from ..util.errors import SettingsError
from .normalize import NO_IGNORED, Shingling, kernel_text, normalize_text, token_shingles, tokenize


# a shingle is boilerplate when at least this share of the sampled documents has it
# (boilerplate.py), and so the least share ignore_shared_above can name
MIN_SHARE = 0.01
# fingerprinted's lineage entry: the passages ignore_shared_above found, which every step after it
# leaves out too, as it does ignored_passages (``with_found_passages``)
FOUND_PASSAGES = "ignored_passages_found"


def with_found_passages(settings, values: Mapping):
    """``settings`` (a ``Settings``) with the passages a table's lineage ``values`` says
    fingerprinting found added to its ignored_passages: the settings every step after it runs with."""
    found = list(values.get(FOUND_PASSAGES, []))
    return replace(settings, ignored_passages=[*settings.ignored_passages, *found]) if found else settings


def checked_passages(passages: list[str], size: int, unit: str) -> None:
    """Refuse, saying what to write, an ``ignored_passages`` setting that would leave nothing out:
    a passage shorter than a shingle, whose one shingle only a document that is nothing else has
    (the boilerplate table's own short passages, of documents that short, are not refused)."""
    for index, passage in enumerate(passages):
        tokens = len(tokenize(normalize_text(passage), unit))
        if tokens < size:
            raise SettingsError(
                f"ignored_passages[{index}] has {tokens} {unit} tokens, fewer than shingle_size ({size}), so it "
                "would leave out nothing a longer document has: give the whole passage, as boilerplate.csv shows it"
            )


def passage_shingles(passages: list[str], size: int, unit: str) -> tuple[str, ...]:
    """The shingles of ``passages`` (each normalized and shingled as a body is), sorted: what
    ``ignored_passages`` leaves out of every document; refused where they are not texts."""
    if not isinstance(passages, (list, tuple)) or not all(isinstance(passage, str) for passage in passages):
        raise SettingsError(
            f'ignored_passages must be a list of passages, e.g. ["Copyright 2026 Example Inc. All rights '
            f'reserved. Terms of use and privacy"], got {passages!r}'
        )
    shingles = set()
    for passage in passages:
        shingles |= token_shingles(tokenize(normalize_text(passage), unit), size, unit)
    return tuple(sorted(shingles))


def lineage_shingling(values: dict) -> Shingling:
    """The shingling a table was built with, from the settings its lineage records (an older
    table, without ignored_passages, ignored none)."""
    size, unit = int(values["shingle_size"]), values["shingle_unit"]
    passages = [*values.get("ignored_passages", []), *values.get(FOUND_PASSAGES, [])]
    return Shingling(size, unit, passage_shingles(passages, size, unit))


@cache
def ignored_hashes(shingling: Shingling) -> np.ndarray:
    """The kernels' hashes of ``shingling.ignored``, sorted: each shingle string shingled alone,
    which makes it the one shingle it is."""
    if not shingling.ignored:
        return NO_IGNORED
    text = kernel_text(pa.array(shingling.ignored, pa.large_string()), shingling.unit)
    values = np.empty(len(shingling.ignored), dtype=np.uint64)
    offsets = np.arange(len(shingling.ignored) + 1, dtype=np.int64)
    if not kernels.shingle_sets_kernel(text, shingling.size, offsets, values, 1):
        raise ValueError("an ignored shingle is not one shingle of shingle_size tokens")
    return np.unique(values)
