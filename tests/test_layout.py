"""The package's shape: stage packages, a thin top level, and no import cycles.

Imports inside functions count too: a cycle hidden in a function is still a cycle.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_libero"
MAX_TOP_LEVEL_MODULES = 8


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, modules: set[str]) -> Iterator[str]:
    """The package's own modules that ``path`` imports, at any depth of its code."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                yield full if full in modules else node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {name: {m for m in imported(path, modules) if m in modules and m != name}
            for name, path in paths.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every elementary cycle found by depth-first search, each reported once."""
    found: list[list[str]] = []
    seen: set[frozenset[str]] = set()

    def visit(node: str, trail: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in trail:
                loop = trail[trail.index(nxt):]
                if frozenset(loop) not in seen:
                    seen.add(frozenset(loop))
                    found.append([*loop, nxt])
            elif len(trail) < 12:
                visit(nxt, [*trail, nxt])

    for start in sorted(graph):
        visit(start, [start])
    return found


def test_no_import_cycle_between_modules() -> None:
    graph = import_graph()
    assert len(graph) > 30  # the walk found the package
    assert cycles(graph) == []


def test_no_import_cycle_between_stage_packages() -> None:
    """catalog -> selection -> case -> adapter + policy -> record -> report: one way."""
    def stage(module: str) -> str:
        parts = module.split(".")
        return parts[1] if len(parts) > 2 or (PACKAGE / parts[-1]).is_dir() else module

    stages: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        stages.setdefault(stage(module), set()).update(stage(t) for t in targets)
    for name in stages:
        stages[name].discard(name)
    assert cycles(stages) == []


def test_at_most_eight_modules_at_the_top() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": {"a"}}, [["a", "b", "a"]]),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
])
def test_the_cycle_finder_finds_cycles(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert cycles(graph) == expected


def test_ruff_clean() -> None:
    """The lint configured in pyproject.toml ([tool.ruff]) holds everywhere."""
    root = PACKAGE.parent
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "pytest_libero", "tests", "bench",
                           "catalog"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
