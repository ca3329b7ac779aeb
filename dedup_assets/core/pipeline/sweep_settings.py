"""What the ``parameter_sweep`` asset runs: combinations of settings, each applied to the run's."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from ..util.errors import SettingsError
from ..settings.model import Settings


def _swept(default, doc: str):
    """A field of :class:`SweepCombination`: the run's default, and the short description the
    ``dedup`` resource's sweep_combinations shows (``settings_resource.py`` makes its fields from these)."""
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True)
class SweepCombination:
    """One point of the parameter sweep: the settings it sets; every other one is the run's."""

    num_perm: int = _swept(Settings.num_perm, "MinHash values per signature.")
    rows_per_band: int = _swept(Settings.rows_per_band, "Signature values per LSH band (unused with auto_bands).")
    auto_bands: bool = _swept(Settings.auto_bands, "Bands and rows chosen for jaccard_threshold.")
    false_negative_weight: float = _swept(
        Settings.false_negative_weight, "With auto_bands: the weight of missed duplicates."
    )
    jaccard_threshold: float = _swept(Settings.jaccard_threshold, "Exact shingle Jaccard of a duplicate.")
    shingle_size: int = _swept(Settings.shingle_size, "Tokens per shingle.")

    def applied_to(self, run: Settings) -> Settings:
        """The run's settings with this combination's in their place, checked as any settings are."""
        # the combination's settings are set, not filled by the run's preset
        return replace(run, preset=None, **asdict(self))


# At the default threshold and shingle size: fixed bands from loose to strict at 64, 128 and 256
# signature values, and the bands auto_bands chooses at each, weighing missed duplicates evenly
# (0.5) and heavily (0.9).
DEFAULT_SWEEP_COMBINATIONS = (
    *(
        SweepCombination(num_perm=num_perm, rows_per_band=rows)
        for num_perm, rows in ((64, 4), (64, 8), (128, 4), (128, 8), (128, 16), (256, 8), (256, 16))
    ),
    *(
        SweepCombination(num_perm=num_perm, auto_bands=True, false_negative_weight=weight)
        for num_perm in (64, 128, 256)
        for weight in (0.5, 0.9)
    ),
)


@dataclass(frozen=True)
class SweepSettings:
    """What the ``parameter_sweep`` asset runs: its combinations, on a sample of ``sample_size``
    documents (seeded by the run's minhash_seed; 0: every document)."""

    combinations: tuple[SweepCombination, ...] = DEFAULT_SWEEP_COMBINATIONS
    sample_size: int = 20_000

    def __post_init__(self) -> None:
        if not self.combinations:
            raise SettingsError("sweep_combinations must name at least one combination")
        if len(set(self.combinations)) < len(self.combinations):
            raise SettingsError("sweep_combinations names a combination twice")
        if self.sample_size < 0:
            raise SettingsError(f"sweep_sample_size must be at least 0, got {self.sample_size}")

    def settings(self, run: Settings) -> list[Settings]:
        """Each combination applied to the run's settings; a bad one fails naming its place."""
        applied = []
        for index, combination in enumerate(self.combinations):
            try:
                applied.append(combination.applied_to(run))
            except SettingsError as error:
                raise SettingsError(f"sweep_combinations[{index}]: {error}") from None
        return applied

    def as_dict(self) -> dict:
        """The sweep's settings under the resource's field names."""
        return {
            "sweep_combinations": [asdict(combination) for combination in self.combinations],
            "sweep_sample_size": self.sample_size,
        }
