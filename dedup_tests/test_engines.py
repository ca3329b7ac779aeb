"""The engine protocol: every engine the settings accept says what it can run, and implements
every step of the protocol with the protocol's parameters (so an asset never asks which engine
it has)."""

import inspect

import pytest

from dedup_assets.core.capabilities import CAPABILITIES
from dedup_assets.core.engines import DuckDBEngine, Engine
from dedup_assets.core.setting_choices import ENGINES
from dedup_assets.core.settings import Settings, SettingsError

from .conftest import require_ray


def _steps(cls) -> dict[str, list[str]]:
    return {
        name: list(inspect.signature(member).parameters)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }


def test_every_engine_says_what_it_can_run():
    assert set(ENGINES) == set(CAPABILITIES)


def test_the_duckdb_engine_implements_every_step_of_the_protocol():
    assert _steps(DuckDBEngine) == _steps(Engine)


@pytest.mark.ray
def test_the_ray_engine_implements_every_step_of_the_protocol():
    require_ray()
    from dedup_assets.core.distributed.engine import RayStepsEngine

    steps = _steps(RayStepsEngine)
    steps.pop("__init__", None)
    assert steps == _steps(Engine)


@pytest.mark.parametrize(
    ("setting", "value", "named"),
    [("cluster_mode", "star", "cluster_mode star"), ("hot_buckets", "skip", "hot_buckets skip")],
)
def test_a_setting_the_engine_cannot_run_is_refused_at_launch(setting, value, named):
    with pytest.raises(SettingsError, match=named):
        Settings(engine="ray", **{setting: value})
    Settings(engine="duckdb", **{setting: value})  # the engine that can run it accepts it
