"""Settings refuse a bad value when they are made, before any step runs, with a message naming the
setting, what it takes and what it got."""

from __future__ import annotations

import pytest

from dedup_assets.core.util.errors import SettingsError
from dedup_assets.core.settings.choices import CHOICES
from dedup_assets.core.settings.model import Settings

# named here, not read from CHOICES, so a setting dropped from it fails rather than goes untested
WORD_SETTINGS = ["cluster_mode", "engine", "hot_buckets", "parquet_bodies", "release_compression"]


def test_every_word_setting_is_checked():
    assert sorted(CHOICES) == WORD_SETTINGS


@pytest.mark.parametrize("name", WORD_SETTINGS)
def test_a_word_setting_takes_each_of_its_words_and_refuses_another_naming_them(name):
    for word in CHOICES[name]:
        assert getattr(Settings(**{name: word}), name) == word
    with pytest.raises(SettingsError) as refused:
        Settings(**{name: "nonsense"})
    assert str(refused.value) == f"{name} must be one of {', '.join(CHOICES[name])}, got 'nonsense'"


def test_the_refusal_reads_as_a_sentence():
    with pytest.raises(SettingsError, match=r"^cluster_mode must be one of components, star, got 'nonsense'$"):
        Settings(cluster_mode="nonsense")


@pytest.mark.parametrize("name", ["false_negative_weight", "min_recall"])
@pytest.mark.parametrize("value", [-0.01, 1.01])
def test_a_share_outside_0_to_1_is_refused(name, value):
    with pytest.raises(SettingsError) as refused:
        Settings(**{name: value})
    assert str(refused.value) == f"{name} must be between 0 and 1, got {value}"


@pytest.mark.parametrize("name", ["false_negative_weight", "min_recall"])
def test_a_share_may_be_0_or_1(name):
    assert getattr(Settings(**{name: 0.0}), name) == 0.0
    assert getattr(Settings(**{name: 1.0}), name) == 1.0
