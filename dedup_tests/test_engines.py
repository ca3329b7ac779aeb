"""The engine protocol: every engine the settings accept says what it can run, is opened by the
library's factory, and implements every step of the protocol with the protocol's parameters (so an
asset never asks which engine it has); no module but the engines' own compares an engine's name."""

import ast
import importlib.util
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dedup_assets
from dedup_assets.core.pipeline import engines
from dedup_assets.core.pipeline.capabilities import CAPABILITIES
from dedup_assets.core.pipeline.engines import DuckDBEngine, Engine
from dedup_assets.core.settings.choices import ENGINES
from dedup_assets.core.settings.model import Settings

from .conftest import require_ray
from .source_trees import parsed


def _steps(cls) -> dict[str, list[str]]:
    return {
        name: list(inspect.signature(member).parameters)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }


def test_every_engine_says_what_it_can_run_and_the_factory_opens_it():
    assert set(ENGINES) == set(CAPABILITIES) == set(engines.OPENERS)


def test_the_factory_opens_the_duckdb_engine_without_importing_ray(tmp_path):
    """The default install has no Ray: the definitions and a duckdb run never import it."""
    script = (
        "import sys; from contextlib import ExitStack\n"
        "import dedup_assets.definitions\n"
        "from dedup_assets.core.pipeline.engines import for_settings\n"
        "from dedup_assets.core.settings.model import Settings\n"
        "with ExitStack() as session:\n"
        f"    print(type(for_settings(Settings(engine='duckdb'), {str(tmp_path / 'db.duckdb')!r}, session)).__name__)\n"
        "print(sorted(name for name in sys.modules\n"
        "             if name == 'ray' or name.startswith(('ray.', 'dedup_assets.core.distributed.engine'))))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.split("\n")[:2] == ["DuckDBEngine", "[]"]


def test_an_engine_whose_extra_is_missing_is_refused_naming_the_missing_package(tmp_path):
    """Daft made unimportable in a process of its own: the refusal names it (and Ray, where it is
    not installed either), and says what to install."""
    script = (
        "import sys\n"
        "sys.modules['daft'] = None\n"
        "from contextlib import ExitStack\n"
        "from dedup_assets.core.pipeline import engines\n"
        "from dedup_assets.core.settings.model import Settings\n"
        "with ExitStack() as session:\n"
        "    try:\n"
        f"        engines.for_settings(Settings(engine='ray'), {str(tmp_path / 'db.duckdb')!r}, session)\n"
        "    except engines.EngineUnavailable as error:\n"
        "        print(error)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    # every missing package named, as the default install (make setup) has none of the extra
    missing = "daft is" if importlib.util.find_spec("ray") else "ray and daft are"
    assert re.search(rf"engine ray needs the ray extra .*, and {missing} not installed .*make setup-ray.*engine: duckdb", result.stdout)


def _engine_name_comparisons(path: Path, tree: ast.Module) -> list[str]:
    names = set(CAPABILITIES)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            values = [e for o in operands for e in (o.elts if isinstance(o, (ast.Tuple, ast.List, ast.Set)) else [o])]
            if any(isinstance(value, ast.Constant) and value.value in names for value in values):
                found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_only_the_engines_modules_compare_an_engine_name():
    """A step that differs by engine is a method of the engine or a row of its capabilities, so
    that a new engine is added in one place, not found by its name across the package and the
    benchmark."""
    package = Path(dedup_assets.__file__).parent
    own = {package / "core" / "pipeline" / "engines.py", package / "core" / "pipeline" / "capabilities.py"}
    paths = [
        path
        for path in sorted([*package.rglob("*.py"), *(package.parent / "benchmarks").rglob("*.py")])
        if path not in own and "distributed" not in path.parts
    ]
    trees = parsed([path.read_text(encoding="utf-8") for path in paths])
    found = [line for path, tree in zip(paths, trees, strict=True) for line in _engine_name_comparisons(path, tree)]
    assert found == []


def test_the_duckdb_engine_implements_every_step_of_the_protocol():
    assert _steps(DuckDBEngine) == _steps(Engine)


@pytest.mark.ray
def test_the_ray_engine_implements_every_step_of_the_protocol():
    require_ray()
    from dedup_assets.core.distributed.engine import RayStepsEngine

    steps = _steps(RayStepsEngine)
    steps.pop("__init__", None)
    assert steps == _steps(Engine)


@pytest.mark.parametrize(("setting", "value"), [("cluster_mode", "star"), ("hot_buckets", "skip")])
def test_every_engine_accepts_star_clusters_and_skipped_hot_buckets(setting, value):
    """test_ray_engine.py compares their releases with the DuckDB engine's byte for byte."""
    for engine in ENGINES:
        Settings(engine=engine, **{setting: value})
