"""A damaged installation (issue 40, class 11): a shipped data file that is missing, cut
short, not UTF-8 or of the wrong shape is one line naming it, before any case.

Nothing here touches the checkout's files, which other tests read at the same time: each
test copies the package under a temporary folder, breaks the copy (``harness.damage``)
and runs a process with the copy first on its path. The rows run the default smoke run
(``pytest --libero-profile=zero``) against one damage of each file; the matrix breaks
every file every way and reads them all through their readers, as a session does before
its first case (``session.check_shipped_data``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import asdict
from pathlib import Path

import pytest

from harness.damage import DROP, Damage, apply, copy_package
from harness.hostile import Hostile
from harness.runs import run_pytest

CHECKOUT = Path(__file__).resolve().parents[1]
FILES = ("libero_catalog.json", "libero_ood_catalog.json", "libero_inventory.json",
         "libero_ood_inventory.json", "full_mode_validation.json", "environment_room.json",
         "libero_instructions.json", "renderers.json", "published_results.json")
PROFILE = "profiles/zero.toml"
LINE = "{file} in the installed pytest-libero is damaged ("
FIX = "): reinstall pytest-libero"
TIMEOUT_S = 300.0
"""A run the rule fails to stop goes on to the smoke run's two cases: bounded."""

EDITS: dict[str, tuple[Damage, str]] = {
    "libero_catalog.json": (Damage("libero_catalog.json", "edit", ("entries", 0, "index"), "0"),
                            "entries[0].index is a str, not an int"),
    "libero_ood_catalog.json": (Damage("libero_ood_catalog.json", "edit",
                                       ("suites", "libero_10_lan", "level"), "1"),
                                "suites.libero_10_lan.level is a str"),
    "libero_inventory.json": (Damage("libero_inventory.json", "edit",
                                     ("entries", 0, "state_dim"), "92"),
                              "entries[0].state_dim is a str"),
    "libero_ood_inventory.json": (Damage("libero_ood_inventory.json", "edit",
                                         ("entries", 0, "suite"), 5),
                                  "entries[0].suite is an int, not a str"),
    "full_mode_validation.json": (Damage("full_mode_validation.json", "edit",
                                         ("suites", "libero_10", "passed"), "yes"),
                                  "suites.libero_10.passed is a str, not a bool"),
    "environment_room.json": (Damage("environment_room.json", "edit", ("no_room",), []),
                              "no_room is a list, not a dict"),
    "libero_instructions.json": (Damage("libero_instructions.json", "edit",
                                        ("entries", "libero_10-00"), DROP),
                                 "KeyError: no 'libero_10-00'"),
    "renderers.json": (Damage("renderers.json", "edit", ("renderers", 0, "name"), DROP),
                       "KeyError: no 'name'"),
    "published_results.json": (Damage("published_results.json", "edit",
                                      ("figures", 0, "success_percent"), "x"),
                               "AttributeError"),
}
WORDS = {"deleted": "No such file or directory", "cut": "not JSON", "not-utf8": "not UTF-8",
         "a-list": "a list, not a table"}


def matrix() -> list[tuple[Damage, str]]:
    """Every file every way, and the shipped profile cut short and not UTF-8."""
    found = [(Damage(file, how), words) for file in FILES for how, words in WORDS.items()]
    found += [EDITS[file] for file in FILES]
    return found + [(Damage(PROFILE, "cut"), "not valid TOML"),
                    (Damage(PROFILE, "not-utf8"), "not valid TOML")]


RUNS: dict[str, tuple[Damage, str]] = {
    "ood-catalog-cut": (Damage("libero_ood_catalog.json", "cut"), "not JSON"),
    "catalog-deleted": (Damage("libero_catalog.json", "deleted"), WORDS["deleted"]),
    "inventory-mistyped": EDITS["libero_inventory.json"],
    "ood-inventory-a-list": (Damage("libero_ood_inventory.json", "a-list"), WORDS["a-list"]),
    "validation-not-utf8": (Damage("full_mode_validation.json", "not-utf8"), "not UTF-8"),
    "room-cut": (Damage("environment_room.json", "cut"), "not JSON"),
    "instructions-task-missing": EDITS["libero_instructions.json"],
    "renderers-cut": (Damage("renderers.json", "cut"), "not JSON"),
    "published-mistyped": EDITS["published_results.json"],
    "profile-cut": (Damage(PROFILE, "cut"), "not valid TOML"),
}
"""One damage of each file, each through the default smoke run."""

_RUN_TEST = "tests/test_damaged_install.py::test_the_default_run_names_the_damaged_file"
_SEEN = ("one line before any case, exit 4, no run folder: \"{file} in the installed "
         "pytest-libero is damaged (... {words} ...): reinstall pytest-libero\"")
_TRIED = {
    "ood-catalog-cut": "the OOD catalog cut short: read by every run, even the default smoke run",
    "catalog-deleted": "the catalog deleted",
    "inventory-mistyped": "an inventory row's state_dim written as text",
    "ood-inventory-a-list": "the OOD inventory a JSON list, not a table",
    "validation-not-utf8": "the full-mode validation not UTF-8 (a fast run used not to read it)",
    "room-cut": "the environment room table cut short",
    "instructions-task-missing": "the instruction table without one native task",
    "renderers-cut": "the known renderers cut short (used to end the run in a traceback "
                     "after its cases)",
    "published-mistyped": "a published figure's percentages written as text",
    "profile-cut": "a shipped profile (zero.toml) cut short",
}
HOSTILE: list[Hostile] = [
    *(Hostile(11, _TRIED[name], _SEEN.format(file=damage.file, words=words),
              f"{_RUN_TEST}[{name}]") for name, (damage, words) in RUNS.items()),
    Hostile(11, "each of the ten shipped files deleted, cut short, not UTF-8, a list "
            "instead of a table, and a field of the wrong type or missing",
            "the same line from every reader; no traceback",
            "tests/test_damaged_install.py::test_every_damage_of_every_shipped_file_is_one_line"),
]


def environment(root: Path) -> dict[str, str]:
    """The copy first on the path (each process runs in a folder of the copy, so the
    checkout, this process's folder, is not the first place a module is found)."""
    return {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """A copy of the package, which the processes started here import."""
    root = copy_package(tmp_path / "install")
    found = subprocess.run([sys.executable, "-c", "import pytest_libero; print(pytest_libero.__file__)"],
                           env=environment(root), cwd=tmp_path, capture_output=True, text=True,
                           timeout=60, check=True).stdout
    assert Path(found.strip()).is_relative_to(root), found  # the copy, not the checkout
    return root


def assert_one_line(answer: str, damage: Damage, words: str) -> None:
    line = LINE.format(file=damage.file)
    assert answer.startswith(line) and answer.endswith(FIX), answer
    assert answer.count(line) == 1 and words in answer and "\n" not in answer, answer


@pytest.mark.parametrize("name", list(RUNS))
def test_the_default_run_names_the_damaged_file(copy: Path, tmp_path: Path, name: str) -> None:
    damage, words = RUNS[name]
    apply(damage, copy)
    work = tmp_path / "work"
    work.mkdir()
    results = tmp_path / "results"
    run = run_pytest(["--libero-profile=zero", f"--libero-results={results}"], work,
                     env=environment(copy), timeout=TIMEOUT_S)
    output = run.stdout + run.stderr
    assert run.returncode == 4, output
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    [line] = [line for line in run.stderr.splitlines() if line.strip()]
    assert line.startswith("ERROR: "), line
    assert_one_line(line.removeprefix("ERROR: "), damage, words)
    assert not results.exists()  # before any case: no run folder


PROBE = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    root = Path(sys.argv[1])
    sys.path.append(sys.argv[2])  # the checkout, for harness
    from harness.damage import Damage, apply
    from pytest_libero import session
    from pytest_libero.config.profiles import load_profile
    assert Path(session.__file__).is_relative_to(root), session.__file__
    answers = []
    for raw in json.loads(sys.stdin.read()):
        damage = Damage(raw["file"], raw["how"], tuple(raw["where"]), raw["value"])
        path = root / "pytest_libero" / "data" / damage.file
        kept = path.read_bytes()
        apply(damage, root)
        read, write = os.pipe()
        pid = os.fork()  # a fresh process: nothing read yet, nothing cached
        if pid == 0:
            os.close(read)
            try:
                session.check_shipped_data()
                load_profile("zero")
                answer = "no error"
            except BaseException as exc:
                answer = f"{type(exc).__name__}: {exc}"
            os.write(write, answer.encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as stream:
            answers.append(stream.read().decode())
        os.waitpid(pid, 0)
        path.write_bytes(kept)
    print(json.dumps(answers))
""")


def test_every_damage_of_every_shipped_file_is_one_line(copy: Path) -> None:
    damages = matrix()
    probe = subprocess.run([sys.executable, "-c", PROBE, str(copy), str(CHECKOUT)],
                           input=json.dumps([asdict(d) for d, _ in damages]),
                           env=environment(copy), cwd=copy, capture_output=True, text=True,
                           timeout=TIMEOUT_S, check=False)
    assert probe.returncode == 0, probe.stderr
    answers = json.loads(probe.stdout)
    assert len(answers) == len(damages) == 9 * 5 + 2
    for (damage, words), answer in zip(damages, answers, strict=True):
        kind, _, line = answer.partition(": ")
        assert kind == "DamagedInstall", (damage, answer)
        assert_one_line(line, damage, words)


def test_the_copy_is_whole_before_it_is_damaged(copy: Path) -> None:
    """The matrix's control: the undamaged copy reads cleanly (an answer above is the
    damage's, not a broken copy's)."""
    probe = subprocess.run([sys.executable, "-c", PROBE, str(copy), str(CHECKOUT)],
                           input="[]", env=environment(copy), cwd=copy, capture_output=True,
                           text=True, timeout=TIMEOUT_S, check=False)
    assert probe.returncode == 0 and json.loads(probe.stdout) == [], probe.stderr
    run = subprocess.run([sys.executable, "-c", "from pytest_libero import session; "
                          "session.check_shipped_data(); print('whole')"],
                         env=environment(copy), cwd=copy, capture_output=True, text=True,
                         timeout=TIMEOUT_S, check=False)
    assert run.stdout.strip() == "whole", run.stderr
