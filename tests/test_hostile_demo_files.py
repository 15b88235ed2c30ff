"""The demo's shipped files (issue 60, class R8): each is the very file this version
shipped, by a sha256 pinned in the code, read bounded as a regular file, before any case.

As tests/test_damaged_install.py does, each test copies the package under a temporary
folder, damages the copy's demo files and runs ``pytest --libero-profile=demo`` with the
copy first on the path: the same reader an installed package runs
(``importlib.resources`` gives a folder of files in both). Before the pins, a recording
replaced by a link to /dev/zero was read without end, a provenance without its hash was
an INTERNALERROR, a deleted one was blamed on the policy at its case's turn, and a
recording edited with its provenance's hash updated to match was played.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from harness.damage import PACKAGE, copy_package
from harness.hostile import Hostile
from harness.runs import run_pytest
from pytest_libero.policy.builtin.demo_files import MAX_BYTES, SHIPPED_SHA256, check_demos

TIMEOUT_S = 300.0
ONE_SHORT_CASE = ("--libero-scope=task_coverage", "--libero-suite=libero_goal", "--libero-task-ids=6",
                  "--libero-budget-mode=decisions", "--libero-max-policy-calls=2")
"""The damaged recording's case, two calls long: a run the check fails to stop is short."""
FIX = "): reinstall pytest-libero"


def demos(root: Path) -> Path:
    folder = root / "pytest_libero" / "data" / "demos"
    assert PACKAGE not in folder.resolve().parents, folder  # the copy, never the checkout's
    return folder


def to_dev_zero(root: Path) -> None:
    (demos(root) / "libero_goal-06.npy").unlink()
    (demos(root) / "libero_goal-06.npy").symlink_to("/dev/zero")


def without_hash(root: Path) -> None:
    path = demos(root) / "libero_goal-06.json"
    meta = json.loads(path.read_text())
    del meta["actions_sha256"]
    path.write_text(json.dumps(meta, indent=2) + "\n")


def deleted(root: Path) -> None:
    (demos(root) / "libero_goal-06.json").unlink()


def edited_and_rehashed(root: Path) -> None:
    """An action changed, and the provenance's hash made to match it."""
    npy, meta_path = demos(root) / "libero_goal-06.npy", demos(root) / "libero_goal-06.json"
    actions = np.load(npy)
    actions[3, 0] = 0.5
    np.save(npy, actions)
    meta = json.loads(meta_path.read_text())
    meta["actions_sha256"] = hashlib.sha256(npy.read_bytes()).hexdigest()
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")


def too_large(root: Path) -> None:
    with (demos(root) / "libero_10-00.npy").open("ab") as stream:
        stream.truncate(MAX_BYTES + 1)


DAMAGES: dict[str, tuple[Callable[[Path], None], str]] = {
    "dev-zero": (to_dev_zero, "demos/libero_goal-06.npy in the installed pytest-libero is damaged "
                              "(a character device, not a regular file"),
    "no-hash": (without_hash, "demos/libero_goal-06.json in the installed pytest-libero is damaged "
                              "(sha256 "),
    "deleted": (deleted, "demos/libero_goal-06.json in the installed pytest-libero is damaged "
                         "(No such file or directory"),
    "edited-rehashed": (edited_and_rehashed, "demos/libero_goal-06.json in the installed "
                                             "pytest-libero is damaged (sha256 "),
    "too-large": (too_large, "demos/libero_10-00.npy in the installed pytest-libero is damaged "
                             f"(holds {MAX_BYTES + 1} bytes, more than a valid one can ({MAX_BYTES})"),
}


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """A copy of the package, which the run started here imports."""
    return copy_package(tmp_path / "install")


def environment(root: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}


@pytest.mark.parametrize("name", list(DAMAGES))
def test_a_damaged_demo_file_is_one_line_before_any_case(copy: Path, tmp_path: Path, name: str) -> None:
    damage, said = DAMAGES[name]
    damage(copy)
    work, results = tmp_path / "work", tmp_path / "results"
    work.mkdir()
    run = run_pytest(["--libero-profile=demo", *ONE_SHORT_CASE, f"--libero-results={results}"], work,
                     env=environment(copy), timeout=TIMEOUT_S)
    output = run.stdout + run.stderr
    assert run.returncode == 4, output
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    [line] = [line for line in run.stderr.splitlines() if line.strip()]
    assert line.startswith("ERROR: " + said) and line.endswith(FIX), line
    assert not results.exists()  # before any case: no run folder


def test_the_pins_are_the_shipped_files_and_a_whole_copy_reads(copy: Path) -> None:
    """The control: the checkout's demo files are the pinned ones, every one is pinned, and
    the undamaged copy passes the check in a process of its own."""
    shipped = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in demos(copy).iterdir()}
    assert shipped == dict(SHIPPED_SHA256)
    check_demos()
    done = subprocess.run([sys.executable, "-c", "import pytest_libero; from pytest_libero.session import "
                           "check_shipped_data; check_shipped_data(); print(pytest_libero.__file__)"],
                          env=environment(copy), cwd=copy, capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=False)
    assert done.returncode == 0 and Path(done.stdout.strip()).is_relative_to(copy), done.stderr


_RUN = "tests/test_hostile_demo_files.py::test_a_damaged_demo_file_is_one_line_before_any_case"
_TRIED = {
    "dev-zero": "a recording (`libero_goal-06.npy`) replaced by a link to /dev/zero (read without "
                "end: MemoryError, INTERNALERROR, under a memory limit)",
    "no-hash": "a provenance file without `actions_sha256` (INTERNALERROR KeyError)",
    "deleted": "a provenance file deleted (its case errored at its turn, blamed on the policy "
               "transport, with a hint that selects it again)",
    "edited-rehashed": "an action of a recording edited, its provenance's `actions_sha256` updated "
                       "to match (accepted: the demo played it)",
    "too-large": "a recording grown past 1 MiB",
}
HOSTILE: list[Hostile] = [
    Hostile(8, f"`pytest --libero-profile=demo` (its libero_goal-06 case) with {_TRIED[name]}",
            f"exit 4 before any case, no run folder, one line: \"{said} ...{FIX}\"", f"{_RUN}[{name}]")
    for name, (_, said) in DAMAGES.items()
]
