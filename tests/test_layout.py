"""The package's shape: stage packages in one order, a thin top level, no import cycles.

Imports inside functions count too: a cycle or an upward import hidden in a function is
still one.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_libero"
MAX_TOP_LEVEL_MODULES = 8

# Lowest first; a package imports only from its own layer's package and the layers below
# (docs/architecture.md, "The packages", describes this order).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("pytest_libero", "data", "files", "children"),  # the root (its version), packaged data,
                                         # crash-safe file helpers, the bounded child process
                                         # (children.py): they import nothing of ours
    ("protocol",),          # the contract: parameters, errors, hashing, identities, the GL choice
    ("catalog",),           # the frozen entries, their case ids and the selection over them
    ("perturb",),           # generated perturbations of catalog entries, their table and draw
    ("safety",),            # the evaluator-side monitor: signals and verdicts, no simulator
    ("goals",),             # each goal predicate's course and the partial-credit score
    ("policy",),            # the policy contract, its codecs and transports
    ("bridges",),           # servers in another model family's environment, on the policy contract
    ("config",),            # options, profiles and the run plan, made of catalog, perturb and policy
    ("certify",),           # check-server: a policy server held to the contract, no simulator
    ("adapters",),          # the simulator side of a case; the only code that imports LIBERO
    ("evidence",),          # the files a case keeps, written beside the episode
    ("episode",),           # one case's life: set-up, loop, record, the process that runs it
    ("results",),           # the run folder, summaries, gates and merges over records
    ("publish",),           # what people publish from finished runs: compare, table, CSV, card
    ("planning",),          # a run's cost before it starts: probe, model, pytest-libero plan
    ("report",),            # what people read: terminal, Allure, figures
    ("audit",),             # verify: re-executes the recorded cases
    ("export",),            # evidence as data: a run folder as a LeRobot dataset, in a tracker
    ("api",),               # evaluate from Python: a policy object served in-process, a child run
    ("conformance",),       # the shipped test module the plugin collects
    ("session",),           # one session's work for the hooks: checks, run folder, each case's run
    ("hookspecs",),         # the hooks other plugins implement: each case's record, the run's end
    ("serve", "cli", "plugin"),  # entry points: a policy server, the command line, the pytest hooks
)
SIMULATOR_ADAPTER = "pytest_libero.adapters.libero"
RUNS_CASES = ("adapters", "episode")
"""Only where a case runs may the simulator adapter itself be imported: the controller's
code (results, report, audit, the plugin) reaches an adapter through the registry alone."""


SIMULATOR_IMPORTERS = {
    "pytest_libero.adapters.libero",
    "pytest_libero.adapters.setup_work",
    "pytest_libero.episode.preload",
    "pytest_libero.catalog.inventory",
    "pytest_libero.evidence.renderer",
    "pytest_libero.perturb.kinds.environment",
    "pytest_libero.perturb.kinds.object",
}
"""The modules that import LIBERO, robosuite or MuJoCo (docs/architecture.md names each
and why); every other one reaches the simulator through them."""
SIMULATOR_PACKAGES = ("libero", "robosuite", "mujoco")


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


def stage(module: str) -> str:
    """``pytest_libero.catalog.entries`` -> ``catalog``; ``pytest_libero.files`` -> ``files``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else module


def upward_imports(graph: dict[str, set[str]], layers: tuple[tuple[str, ...], ...]) -> list[str]:
    """Every import of a package from a higher layer, or from another package of its own."""
    rank = {package: n for n, layer in enumerate(layers) for package in layer}
    found = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            here, there = stage(module), stage(target)
            if here != there and rank[there] >= rank[here]:
                found.append(f"{module} ({here}) imports {target} ({there})")
    return found


def test_every_package_has_its_place_in_the_order() -> None:
    placed = [package for layer in LAYERS for package in layer]
    assert len(placed) == len(set(placed))
    present = {stage(module) for module in import_graph()}
    assert present == set(placed), "place a new package in LAYERS, with its reason"


PUBLIC_API = {("pytest_libero", module) for module in (
    "pytest_libero.api.evaluate", "pytest_libero.api.evaluation", "pytest_libero.policy.contract",
    "pytest_libero.perturb.kind", "pytest_libero.adapters.base", "pytest_libero.episode.record")}
"""The root re-exports the public surface (tests/test_public_surface.py) for ``from
pytest_libero import evaluate, Kind, ...``: each imported on first use (a module
``__getattr__``), named for type checkers only, so nothing that imports the root loads it."""


def test_no_package_imports_a_higher_one() -> None:
    graph = {module: {t for t in targets if (module, t) not in PUBLIC_API}
             for module, targets in import_graph().items()}
    assert upward_imports(graph, LAYERS) == []


def test_the_root_loads_evaluate_only_when_it_is_asked_for() -> None:
    done = subprocess.run([sys.executable, "-c", "import sys, pytest_libero; "
                           "print(any(m.startswith('pytest_libero.api') for m in sys.modules)); "
                           "from pytest_libero import evaluate; print(evaluate.__module__)"],
                          capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["False", "pytest_libero.api.evaluate"]


def test_the_simulator_adapter_is_imported_only_where_cases_run() -> None:
    importers = sorted(module for module, targets in import_graph().items()
                       if SIMULATOR_ADAPTER in targets and stage(module) not in RUNS_CASES)
    assert importers == []


def simulator_importers() -> set[str]:
    found = set()
    for path in PACKAGE.rglob("*.py"):
        if any(name.split(".")[0] in SIMULATOR_PACKAGES for name in imported(path, set())):
            found.add(module_name(path))
    return found


def test_the_simulator_is_imported_only_where_the_docs_say() -> None:
    assert simulator_importers() == SIMULATOR_IMPORTERS
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = doc.split("## Where the simulator is imported", 1)[1].split("\n## ", 1)[0]
    named = {"pytest_libero." + m.removesuffix(".py").replace("/", ".")
             for m in re.findall(r"^\| `([a-z_/]+\.py)` \|", section, re.MULTILINE)}
    assert named == SIMULATOR_IMPORTERS


@pytest.mark.parametrize("graph, expected", [
    ({"pytest_libero.catalog.entries": {"pytest_libero.perturb.levels"}},
     ["pytest_libero.catalog.entries (catalog) imports pytest_libero.perturb.levels (perturb)"]),
    ({"pytest_libero.perturb.levels": {"pytest_libero.catalog.entries", "pytest_libero.files"}}, []),
    ({"pytest_libero.cli": {"pytest_libero.plugin"}},
     ["pytest_libero.cli (cli) imports pytest_libero.plugin (plugin)"]),
])
def test_the_order_check_finds_upward_imports(graph: dict[str, set[str]], expected: list[str]) -> None:
    assert upward_imports(graph, LAYERS) == expected


def test_no_import_cycle_between_stage_packages() -> None:
    """catalog -> selection -> case -> adapter + policy -> record -> report: one way."""
    stages: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        stages.setdefault(stage(module), set()).update(stage(t) for t in targets)
    for name in stages:
        stages[name].discard(name)
    assert cycles(stages) == []


def test_the_package_never_imports_the_project_s_own_helpers() -> None:
    """harness/ (and tests/, bench/, release/) serve the checkout, not the installed wheel."""
    outside = ("harness", "bench", "release", "tests", "_common", "scripted_policies", "ports")
    found = {(module, name) for module, path in
             ((module_name(p), p) for p in PACKAGE.rglob("*.py"))
             for name in imported(path, set()) if name.split(".")[0] in outside}
    assert found == set()


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
                           "release", "harness"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
