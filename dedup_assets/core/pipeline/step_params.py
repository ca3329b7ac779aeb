"""The value objects each step takes from the run's :class:`.settings.Settings`: how documents
are fingerprinted and banded, what verification accepts, what the candidate step may cost and
how clusters are made. Each checks itself when it is made, so a bad setting fails before any work."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from ..util.errors import SettingsError
from ..keep.rule import KeepPolicy
from ..sketch.kernels import MAX_SKETCH_SIZE
from ..text.normalize import Shingling
from ..text.tokenizers import TOKENIZERS

HashScheme = Literal["fss", "blake2b"]
HASH_SCHEMES: tuple[str, ...] = get_args(HashScheme)

# Beyond this many words (or characters), two pages share a shingle only if they share whole
# paragraphs (or sentences), and every shorter page has none.
MAX_SHINGLE_SIZE = 64


@dataclass(frozen=True)
class SketchParams:
    """How documents are fingerprinted and banded."""

    hash_scheme: str
    shingle_size: int
    num_perm: int
    rows_per_band: int
    minhash_seed: int
    band_count: int | None = None  # bands chosen for a threshold; None: num_perm / rows_per_band
    shingle_unit: str = "word"
    ignored_shingles: tuple[str, ...] = ()  # the ignored_passages' (text.passage_shingles)

    def __post_init__(self) -> None:
        if self.hash_scheme not in HASH_SCHEMES:
            raise SettingsError(
                f"hash_scheme must be one of {', '.join(HASH_SCHEMES)}, got {self.hash_scheme!r}"
            )
        if self.shingle_unit not in TOKENIZERS:
            raise SettingsError(
                f"shingle_unit must be one of {', '.join(TOKENIZERS)}, got {self.shingle_unit!r}"
            )
        if not 1 <= self.shingle_size <= MAX_SHINGLE_SIZE:
            raise SettingsError(
                f"shingle_size must be between 1 and {MAX_SHINGLE_SIZE} {self.shingle_unit}s, got {self.shingle_size}"
            )
        if self.band_count is not None:
            if self.band_count < 1 or self.rows_per_band < 1 or self.band_count * self.rows_per_band > self.num_perm:
                raise SettingsError(
                    f"{self.band_count} bands of {self.rows_per_band} rows need more than num_perm "
                    f"({self.num_perm}) signature values"
                )
        elif self.num_perm < 1 or self.rows_per_band < 1 or self.num_perm % self.rows_per_band:
            raise SettingsError(
                f"num_perm ({self.num_perm}) must be a positive multiple of rows_per_band "
                f"({self.rows_per_band})"
            )
        if self.hash_scheme == "fss" and self.num_perm > MAX_SKETCH_SIZE:
            raise SettingsError(f"the fss scheme supports num_perm up to {MAX_SKETCH_SIZE}")

    @property
    def bands(self) -> int:
        return self.band_count if self.band_count is not None else self.num_perm // self.rows_per_band

    @property
    def shingling(self) -> Shingling:
        return Shingling(self.shingle_size, self.shingle_unit, self.ignored_shingles)


@dataclass(frozen=True)
class Thresholds:
    """What verification accepts (Jaccard) and what it reports as a sketch match (overlap)."""

    jaccard: float
    signature_overlap: float

    def __post_init__(self) -> None:
        for name, value in (("jaccard", self.jaccard), ("signature_overlap", self.signature_overlap)):
            if not 0.0 < value <= 1.0:
                raise SettingsError(f"{name}_threshold must be in (0, 1], got {value}")


@dataclass(frozen=True)
class PairLimits:
    """What the candidate step may cost: pair slots in all, and distinct texts in one bucket.
    ``memory_budget_mb`` is set when the slot budget was derived from it."""

    max_pair_slots: int
    max_bucket_size: int
    memory_budget_mb: int | None = None
    skip_hot_buckets: bool = False  # hot_buckets: skip


@dataclass(frozen=True)
class ClusterParams:
    """How the cluster step makes clusters (``mode``; Jaccard with the representative measured
    over ``shingling``, chained below ``threshold``) and which member each keeps: the keep rule
    ``keep`` policy (``keep/rule.py``)."""

    mode: str
    shingling: Shingling
    threshold: float
    memory_budget_mb: int
    keep: KeepPolicy = field(default_factory=KeepPolicy.parse)
