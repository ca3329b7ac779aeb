"""Settings refuse a bad value when they are made, before any step runs, with a message naming the
setting, what it takes and what it got."""

from __future__ import annotations

import pytest

from dedup_assets.core.errors import SettingsError
from dedup_assets.core.settings import CHOICES, Settings


@pytest.mark.parametrize("name", sorted(CHOICES))
def test_a_word_setting_takes_each_of_its_words_and_refuses_another_naming_them(name):
    for word in CHOICES[name]:
        assert getattr(Settings(**{name: word}), name) == word
    with pytest.raises(SettingsError) as refused:
        Settings(**{name: "nonsense"})
    assert str(refused.value) == f"{name} must be one of {', '.join(CHOICES[name])}, got 'nonsense'"


@pytest.mark.parametrize("name", ["false_negative_weight", "min_recall"])
@pytest.mark.parametrize("value", [-0.01, 1.01])
def test_a_share_outside_0_to_1_is_refused(name, value):
    Settings(**{name: 0.0})
    Settings(**{name: 1.0})
    with pytest.raises(SettingsError) as refused:
        Settings(**{name: value})
    assert str(refused.value) == f"{name} must be between 0 and 1, got {value}"
