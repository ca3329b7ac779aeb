"""The sketch scheme: everything that decides the bytes of a fingerprint, in one dict that every
``fingerprinted`` table (and so every table downstream of it) and every batch of the incremental
index records, and ``manifest.json`` reports (``derived_settings.sketch_scheme``):

- ``sketch``: ``fss`` (Fast Similarity Sketch) or ``minhash`` (the published definition);
- ``shingle_hash``: the hash function and its version, kept beside the code it versions
  (``kernels.FSS_SHINGLE_HASH``; ``minhash.BLAKE2B_SHINGLE_HASH``, which never changes);
- ``normalization``: the version of the text rule (``text.NORMALIZATION``);
- ``shingle_unit``, ``shingle_size``, ``permutations`` (num_perm), ``seed`` (minhash_seed),
  ``bands`` and ``rows`` (the bands in use and the rows of each);
- ``dedup_version``: the release of dedup-assets that built it.

Two schemes are one when every part but ``dedup_version`` agrees (:func:`scheme_differences`). The
project's version is recorded for the record only: a release that changes no fingerprint must go
on using an index and the tables it built, and one that does change them raises the version of
the part it changes, which is what refuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib import metadata

from .kernels import FSS_SHINGLE_HASH
from .minhash import BLAKE2B_SHINGLE_HASH
from ..text.normalize import NORMALIZATION

SKETCH_SCHEME = "sketch_scheme"  # its key in lineage, an index's settings and manifest.json
# the part recorded for the record, which no comparison reads (see the module's docstring)
RECORD_ONLY = "dedup_version"


@cache
def project_version() -> str:
    """The installed dedup-assets' version, as ``dedup --version`` says it."""
    try:
        return metadata.version("dedup-assets")
    except metadata.PackageNotFoundError:  # run from a checkout that is not installed
        return "unknown"


def sketch_scheme(values: Mapping[str, object]) -> dict:
    """The scheme of a run's (or an index's) settings ``values``: hash_scheme, shingle_unit,
    shingle_size, num_perm, minhash_seed, and the derived bands and rows_in_use."""
    fss = values["hash_scheme"] == "fss"
    return {
        "sketch": "fss" if fss else "minhash",
        "shingle_hash": FSS_SHINGLE_HASH if fss else BLAKE2B_SHINGLE_HASH,
        "normalization": NORMALIZATION,
        "shingle_unit": values["shingle_unit"],
        "shingle_size": values["shingle_size"],
        "permutations": values["num_perm"],
        "seed": values["minhash_seed"],
        "bands": values["bands"],
        "rows": values["rows_in_use"],
        RECORD_ONLY: project_version(),
    }


def unrecorded_scheme(values: Mapping[str, object]) -> dict:
    """The scheme of an index built before schemes were recorded, from its settings ``values``:
    the first recorded versions, which are what the code was then (an earlier text rule is refused
    by the index's layout), and no known release."""
    scheme = sketch_scheme(values)
    first_hash = "seq64-mix64-v1" if scheme["sketch"] == "fss" else "blake2b-v1"
    return {**scheme, "shingle_hash": first_hash, "normalization": "text-v1", RECORD_ONLY: None}


def scheme_differences(built: Mapping[str, object], now: Mapping[str, object]) -> list[tuple[str, object, object]]:
    """Each part of the scheme ``built`` that ``now`` differs in: (part, built's, now's), the
    project's version aside. A part one of them lacks differs."""
    parts = [part for part in {**built, **now} if part != RECORD_ONLY]
    return [(part, built.get(part), now.get(part)) for part in parts if built.get(part) != now.get(part)]


def described_differences(differences: list[tuple[str, object, object]], built_by: str, now_by: str) -> str:
    """``normalization text-v1 (index) vs text-v2 (this version)``, for each part, by ``, ``."""
    return ", ".join(f"{part} {built} ({built_by}) vs {now} ({now_by})" for part, built, now in differences)


def setting_differs(name: str, built: object, now: object) -> bool:
    """Whether a recorded setting ``name`` (a lineage key) differs from this run's: the sketch
    scheme by its parts, the project's version aside; any other by its value."""
    if name == SKETCH_SCHEME and isinstance(built, Mapping) and isinstance(now, Mapping):
        return bool(scheme_differences(built, now))
    return built != now
