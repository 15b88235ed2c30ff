"""A run folder never runs code (issue 49, class H5): verify imports a kind of one's own or
an adapter that run.json names only when the user names the same on verify's command
line, and refuses by name, before any import, otherwise. Merge reads such a folder
without importing anything it names.

The run is real (the plugin with the scripted adapter ``decide_adapter:Adapter``, itself
code the folder names); the forged kinds are modules that leave a mark when imported:
the standard library's ``this`` prints the Zen of Python, and a module placed in the run
folder, where verify is started, writes a file.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from decided_runs import TESTS, run

from harness.hostile import Hostile
from harness.runs import run_folder

ZEN = "Beautiful is better than ugly"
EVIL = "from pathlib import Path\nPath('imported').write_text('ran')\nclass K: ...\n"
ADAPTER = "decide_adapter:Adapter"


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("scripted")
    done = run(where, "--libero-task-ids=0-2")
    assert done.returncode == 1, done.stdout + done.stderr  # the zero policy fails natively
    return run_folder(where / "libero-results")


def forged(folder: Path, where: Path, kinds: list[str]) -> Path:
    copy = where / "forged"
    shutil.copytree(folder, copy)
    run_json = json.loads((copy / "run.json").read_text())
    run_json["plan"]["kinds"] = kinds
    (copy / "run.json").write_text(json.dumps(run_json))
    (copy / "evil.py").write_text(EVIL)
    return copy


def pytest_libero(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command line in its own process, started in ``cwd``, the tests' helpers
    importable (as the scripted adapter must be where it is named)."""
    env = {"PYTHONPATH": str(TESTS), "PATH": "/usr/bin:/bin", "MUJOCO_GL": "egl"}
    return subprocess.run([sys.executable, "-m", "pytest_libero.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


ROWS = [
    ("adapter", [], f"--libero-adapter={ADAPTER}",
     "the run's own adapter, not named on verify's command line"),
    ("zen", ["this:Nothing"], "--libero-kind=this:Nothing",
     "run.json's `plan.kinds` set to `this:Nothing` (verify printed the Zen of Python)"),
    ("module-in-the-folder", ["evil:K"], "--libero-kind=evil:K",
     "`plan.kinds` naming `evil:K`, a module placed in the run folder where verify is started"),
]


@pytest.mark.parametrize(("kinds", "option"), [
    pytest.param(kinds, option, id=row_id) for row_id, kinds, option, _ in ROWS])
def test_verify_imports_nothing_the_folder_names_unless_the_user_names_it(
        kinds: list[str], option: str, scripted: Path, tmp_path: Path) -> None:
    folder = forged(scripted, tmp_path, kinds)
    done = pytest_libero(["verify", str(folder)], cwd=folder)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stdout + done.stderr
    assert "names code of its own" in lines[0] and f"rerun with {option}" in lines[0], lines[0]
    assert ZEN not in done.stdout + done.stderr and not (folder / "imported").exists()
    assert not (folder / "verify.json").exists()


def test_named_by_the_user_the_same_code_is_imported(scripted: Path, tmp_path: Path) -> None:
    folder = forged(scripted, tmp_path, ["this:Nothing"])
    done = pytest_libero(["verify", str(folder), f"--libero-adapter={ADAPTER}",
                          "--libero-kind=this:Nothing"], cwd=tmp_path)
    assert ZEN in done.stdout, done.stdout + done.stderr  # imported, as the user asked
    assert "--libero-kind='this:Nothing'" in done.stderr  # and then refused: not a kind


def test_merge_reads_such_a_folder_without_importing_what_it_names(scripted: Path, tmp_path: Path) -> None:
    folder = forged(scripted, tmp_path, ["this:Nothing", "evil:K"])
    done = pytest_libero(["merge", str(folder), "--out", str(tmp_path / "merged")], cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ZEN not in done.stdout + done.stderr and not (folder / "imported").exists()


HOSTILE: list[Hostile] = [
    *(Hostile(5, tried, "verify: exit 2 before any import, nothing written: \"RUN: its run.json "
              f"names code of its own, ..., which verify imports only when you name it too: if you "
              f"trust that module, rerun with {option}\"",
              "tests/test_hostile_code.py::test_verify_imports_nothing_the_folder_names_unless_the_user_names_it"
              f"[{row_id}]")
      for row_id, _, option, tried in ROWS),
    Hostile(5, "merge of a folder whose `plan.kinds` names `this:Nothing` and a module in the folder",
            "merged (exit 0), nothing imported",
            "tests/test_hostile_code.py::test_merge_reads_such_a_folder_without_importing_what_it_names"),
]
