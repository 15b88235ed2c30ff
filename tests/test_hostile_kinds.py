"""A kind of one's own that fails says so in one line, before any case (issue 49, classes
H3 and H4): a module that raises, does not parse or exits while it is imported, a
relative name, a kind whose constructor, name or levels raise, a ``not_applicable`` that
raises, an ``instruction()`` that raises or gives something other than text.

Each row runs the user's command (``pytest --libero-profile=zero --libero-kind=...
--libero-perturb=...``) against kinds written to a folder on PYTHONPATH, and expects
pytest's usage error: exit 4, one line naming the kind and the cause, no traceback, no
run folder.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from harness.hostile import Hostile
from harness.runs import run_pytest

KINDS = textwrap.dedent('''
    from typing import Any, ClassVar

    from pytest_libero.perturb.kind import Kind, KindApplied


    class Base(Kind):
        name = "hk"
        levels: ClassVar[dict[int, dict[str, float]]] = {
            1: {"x": 0.1}, 2: {"x": 0.2}, 3: {"x": 0.3}, 4: {"x": 0.4}}
        applied = KindApplied

        def parameters(self, rng: Any, first: Any, magnitudes: Any, context: Any) -> dict[str, Any]:
            return {}


    class BrokenInit(Base):
        def __init__(self) -> None:
            raise RuntimeError("no GPU for the kind")


    class BrokenName(Base):
        @property
        def name(self) -> str:
            raise RuntimeError("name lookup failed")


    class BrokenLevels(Base):
        @property
        def levels(self) -> dict[int, dict[str, float]]:
            raise KeyError("levels")


    class BrokenApplicable(Base):
        def not_applicable(self, entry: Any, level: int) -> str | None:
            raise RuntimeError("cannot tell")


    class NumberInstruction(Base):
        def instruction(self, twin: str, level: int) -> Any:
            return 12345


    class RaisingInstruction(Base):
        def instruction(self, twin: str, level: int) -> Any:
            raise ValueError("no words")
''')
MODULES = {
    "hk_kinds.py": KINDS,
    "hk_raises.py": "raise RuntimeError('boom at import')\n",
    "hk_syntax.py": "def broken(:\n",
    "hk_exits.py": "import sys\nsys.exit(3)\n",
}
ONE_CASE = ("--libero-profile=zero", "--libero-scope=task_coverage", "--libero-suite=libero_10",
            "--libero-task-ids=0", "--libero-budget-mode=decisions", "--libero-max-policy-calls=1")
CASE = "libero_10-00~hk1"

ROWS: list[tuple[str, int, str, str, str]] = [
    ("module-raises", 3, "hk_raises:Base", "a module that raises at import",
     "--libero-kind='hk_raises:Base': importing 'hk_raises' raised RuntimeError: boom at import; "
     "fix the module"),
    ("syntax-error", 3, "hk_syntax:Base", "a module with a syntax error",
     "--libero-kind='hk_syntax:Base': importing 'hk_syntax' raised SyntaxError: invalid syntax"),
    ("sys-exit", 3, "hk_exits:Base", "a module that calls sys.exit(3)",
     "--libero-kind='hk_exits:Base': importing 'hk_exits' raised SystemExit: 3; fix the module"),
    ("relative-name", 3, ".hk_kinds:Base", "a relative module name",
     "--libero-kind='.hk_kinds:Base': '.hk_kinds' is a relative module name; give the module's "
     "full dotted name"),
    ("constructor-raises", 3, "hk_kinds:BrokenInit", "a kind whose constructor raises",
     "--libero-kind='hk_kinds:BrokenInit': making the kind raised RuntimeError: no GPU for the kind"),
    ("name-raises", 3, "hk_kinds:BrokenName", "a kind whose name raises",
     "--libero-kind='hk_kinds:BrokenName': reading its name and levels raised RuntimeError: name "
     "lookup failed"),
    ("levels-raise", 3, "hk_kinds:BrokenLevels", "a kind whose levels raise",
     "--libero-kind='hk_kinds:BrokenLevels': reading its name and levels raised KeyError: 'levels'"),
    ("not-applicable-raises", 3, "hk_kinds:BrokenApplicable", "a kind whose not_applicable() raises",
     f"perturbation kind 'hk': its not_applicable() raised RuntimeError: cannot tell for {CASE}"),
    ("instruction-a-number", 4, "hk_kinds:NumberInstruction", "a kind whose instruction() gives 12345",
     f"perturbation kind 'hk': its instruction() gave 12345 for {CASE}, a int; it must return the "
     "instruction's text, or None to keep the task's own"),
    ("instruction-raises", 4, "hk_kinds:RaisingInstruction", "a kind whose instruction() raises",
     f"perturbation kind 'hk': its instruction() raised ValueError: no words for {CASE}"),
]


@pytest.fixture(scope="module")
def kinds_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("kinds")
    for name, source in MODULES.items():
        (folder / name).write_text(source)
    return folder


@pytest.mark.parametrize(("spec", "said"), [
    pytest.param(spec, said, id=row_id) for row_id, _, spec, _, said in ROWS])
def test_a_failing_kind_of_ones_own_is_one_line_before_any_case(
        spec: str, said: str, kinds_folder: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(kinds_folder), os.environ.get("PYTHONPATH")]))}
    done = run_pytest([*ONE_CASE, f"--libero-kind={spec}", "--libero-perturb=hk:1"], tmp_path,
                      env=env, timeout=300)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 4, done.stdout[-3000:] + done.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("ERROR: "), lines
    assert said in lines[0], lines[0]
    assert "Traceback" not in done.stdout + done.stderr and "INTERNALERROR" not in done.stdout
    assert not (tmp_path / "libero-results").exists()


HOSTILE: list[Hostile] = [
    Hostile(klass, f"`--libero-kind={spec}`: {tried}",
            f'exit 4 before any case, no run folder: "ERROR: {said}"',
            f"tests/test_hostile_kinds.py::test_a_failing_kind_of_ones_own_is_one_line_before_any_case"
            f"[{row_id}]")
    for row_id, klass, spec, tried, said in ROWS
]
