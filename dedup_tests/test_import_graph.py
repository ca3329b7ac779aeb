"""The import graph of ``dedup_assets`` (issue 50): no circle, and no module imports one from a
floor above its own. A circle makes the import order matter (a module reads a name another has
not defined yet) and leaves no layer that can be read or tested alone; the floors say which way
an import may go.

Every import that runs counts, inside a function too (a lazy import hides a circle, it does not
break it), and so do the packages it runs on the way (``import a.b.c`` runs ``a/b/__init__.py``).
Imports under ``if TYPE_CHECKING:`` never run and do not count."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import dedup_assets

from .source_trees import parsed

ROOT = dedup_assets.__name__
# lowest first: a module may import from its own floor and those below. A name stands for the
# module and everything under it; the package's own __init__ runs before any of them and is on none
FLOORS = (
    ("the library", ("core",)),
    ("launch configuration", ("launch",)),
    ("resources", ("settings_resource", "stored_tables", "engine_resource")),
    ("assets", ("assets", "checks", "batch_runs")),
    ("definitions", ("definitions",)),
    ("runner", ("run", "cli")),
)
LIBRARY = f"{ROOT}.core"

Graph = Mapping[str, Mapping[str, int]]  # module -> the modules of ours it imports -> a line that does


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
        or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runs(node: ast.AST) -> Iterator[ast.AST]:
    """``node`` and what is under it, but for the bodies of ``if TYPE_CHECKING:``."""
    yield node
    for field, value in ast.iter_fields(node):
        if field == "body" and _type_checking(node):
            continue
        for child in value if isinstance(value, list) else [value]:
            if isinstance(child, ast.AST):
                yield from _runs(child)


def imported(tree: ast.Module, module: str, is_package: bool) -> Iterator[tuple[str, int]]:
    """The absolute names ``module`` imports and their lines: ``from x import y`` gives ``x`` and
    ``x.y`` (``y`` may be a submodule; a name that is not one drops out of the graph)."""
    package = module if is_package else module.rpartition(".")[0]
    for node in _runs(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]) if node.level else ""
            name = ".".join(part for part in (base, node.module) if part)
            yield name, node.lineno
            yield from ((f"{name}.{alias.name}", node.lineno) for alias in node.names)


def import_graph(sources: Mapping[str, tuple[str, bool]]) -> dict[str, dict[str, int]]:
    """Module -> the modules among ``sources`` (name -> (text, is a package)) it runs by importing:
    each one imported and the packages above it, but for those above the importer itself, which
    have run before it."""
    graph: dict[str, dict[str, int]] = {}
    trees = parsed([source for source, _ in sources.values()])
    for (module, (_, is_package)), tree in zip(sources.items(), trees, strict=True):
        own = {module.rsplit(".", depth)[0] for depth in range(module.count(".") + 1)}
        edges = graph.setdefault(module, {})
        for name, line in imported(tree, module, is_package):
            parts = name.split(".")
            for target in (".".join(parts[:end]) for end in range(1, len(parts) + 1)):
                if target in sources and target not in own:
                    edges.setdefault(target, line)
    return graph


def circles(graph: Graph) -> list[list[str]]:
    """One circle (its modules, the first again at the end) through each group of modules that
    import one another (a strongly connected component of two or more, by Tarjan's algorithm)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in graph.get(module, ()):
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            group = {stack.pop()}
            while module not in group:
                group.add(stack.pop())
            groups.append(group)

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return [_circle_in(graph, group) for group in groups if len(group) > 1]


def _circle_in(graph: Graph, group: set[str]) -> list[str]:
    """The shortest way from the group's first module back to itself, within the group."""
    start = min(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while start not in came_from:  # breadth first, so the first way back is a shortest one
        reached = []
        for module in frontier:
            for target in sorted(graph.get(module, ())):
                if target in group and target not in came_from:
                    came_from[target] = module
                    reached.append(target)
        frontier = reached
    path = [start]
    while len(path) == 1 or path[-1] != start:
        path.append(came_from[path[-1]])
    return path[::-1]


def _under(module: str, name: str) -> bool:
    return module == name or module.startswith(f"{name}.")


def floor(module: str) -> int | None:
    for number, (_, names) in enumerate(FLOORS):
        if any(_under(module, f"{ROOT}.{name}") for name in names):
            return number
    return None


def upward(graph: Graph) -> list[str]:
    """Each import of a module on a higher floor than the importer's, as a sentence."""
    return [
        f"{module} (floor {FLOORS[floor(module)][0]!r}) imports {target} (floor {FLOORS[floor(target)][0]!r}) "
        f"on line {line}"
        for module, targets in sorted(graph.items()) if floor(module) is not None
        for target, line in sorted(targets.items()) if floor(target) is not None and floor(target) > floor(module)
    ]


def _package_sources() -> dict[str, tuple[str, bool]]:
    """Each module of ours by name: its text, and whether it is a package's ``__init__``."""
    package = Path(dedup_assets.__file__).parent
    sources = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        sources[".".join(parts[:-1] if is_package else parts)] = (path.read_text(encoding="utf-8"), is_package)
    return sources


def test_no_module_imports_itself_through_others():
    found = circles(import_graph(_package_sources()))
    assert not found, "import circles: " + "; ".join(" -> ".join(circle) for circle in found)


def test_every_module_imports_only_from_its_floor_and_below():
    graph = import_graph(_package_sources())
    assert [module for module in graph if module != ROOT and floor(module) is None] == [], (
        "put these modules on a floor of FLOORS"
    )
    assert graph[ROOT] == {}, f"{ROOT}/__init__.py runs before every module of ours, so it imports none"
    assert upward(graph) == []


def test_the_library_imports_neither_dagster_nor_the_rest_of_the_package():
    library = {module: source for module, source in _package_sources().items() if floor(module) == 0}
    trees = parsed([source for source, _ in library.values()])
    wrong = [
        f"{module} line {line}: {name}"
        for (module, (_, is_package)), tree in zip(library.items(), trees, strict=True)
        for name, line in imported(tree, module, is_package)
        if name.split(".")[0] == "dagster" or name.startswith("dagster_")
        or _under(name, ROOT) and not _under(name, LIBRARY)
    ]
    assert wrong == []


# the checks themselves, on hand-made modules: they must be able to fail


def test_relative_imports_resolve_and_type_checking_ones_do_not_count():
    sources = {
        "p": ("", True),
        "p.a": ("from . import b\nfrom .sub.c import name\n", False),
        "p.b": ("def late():\n    from .a import x\n", False),
        "p.sub": ("", True),
        "p.sub.c": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import x\nfrom .. import b\n", False),
    }
    assert import_graph(sources) == {
        "p": {}, "p.a": {"p.b": 1, "p.sub": 2, "p.sub.c": 2}, "p.b": {"p.a": 2}, "p.sub": {}, "p.sub.c": {"p.b": 4},
    }


def test_the_circle_finder_names_a_circle_and_passes_a_graph_without_one():
    assert circles({"a": {"b": 1}, "b": {"c": 1}, "c": {"d": 1}, "d": {}}) == []
    assert circles({"a": {"b": 1}, "b": {"c": 1, "d": 1}, "c": {"a": 1}, "d": {}}) == [["a", "b", "c", "a"]]
    # two circles apart, the longer one reached first
    assert sorted(circles({"x": {"y": 1}, "y": {"z": 1}, "z": {"x": 1, "m": 1}, "m": {"n": 1}, "n": {"m": 1}})) == [
        ["m", "n", "m"], ["x", "y", "z", "x"],
    ]


def test_an_import_from_a_higher_floor_is_named():
    launch, core = f"{ROOT}.launch.environment", f"{ROOT}.core.settings"
    assert upward({launch: {core: 3}, core: {}}) == []
    assert upward({core: {launch: 7}, launch: {}}) == [
        f"{core} (floor 'the library') imports {launch} (floor 'launch configuration') on line 7"
    ]
