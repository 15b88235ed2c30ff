"""A decided run's folder is evidence: its decide block is read strictly, and the orders it
records are recomputed from its seed and selection wherever a decision is read (merge,
verify, resume). Issue 49, classes H1 (damaged numbers) and H2 (an order the seed does
not draw).

The run is real (the plugin with the scripted adapter, tests/decide_adapter.py): 40
cases, eight of them successes, a 90% gate decided early by the betting test. Each test
edits a copy of its run.json as a forger would (hashes need no update: run.json holds
none) and expects one line and exit 2 from merge and verify (nothing written), exit 4
from a resume, before anything runs.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_runs import in_process
from decided_runs import cases, read, run

from harness.hostile import Hostile
from harness.runs import run_folder, run_records
from pytest_libero.config.decide import drawn_order
from pytest_libero.results.decider import check_decision

GATE = ("--libero-task-ids=0-39", "--libero-min-success=0.9", "--libero-decide=anytime",
        "--libero-order-seed=3")
SUCCESSES = "0,1,2,3,4,5,6,7"
BLOCK = "run.json's decide block does not read ("


@pytest.fixture(scope="module")
def decided(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("decided")
    done = run(where, *GATE, success=SUCCESSES)
    assert done.returncode == 1, done.stdout + done.stderr
    folder = run_folder(where / "libero-results")
    assert read(folder, "summary.json")["decision"]["verdict"] == "fail"
    return folder


def doctored(folder: Path, where: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of ``folder`` whose run.json's decide block ``change`` edited in place."""
    copy = where / "doctored"
    shutil.copytree(folder, copy)
    run_json = json.loads((copy / "run.json").read_text())
    change(run_json["decide"])
    (copy / "run.json").write_text(json.dumps(run_json, indent=1))
    return copy


def refused(folder: Path, where: Path) -> list[str]:
    """merge's and verify's answers: each one line, exit 2, nothing merged."""
    said = []
    for args in (["merge", str(folder), "--out", str(where / "merged")], ["verify", str(folder)]):
        code, out, err = in_process(args)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and "Traceback" not in err, (args, code, out, err)
        said.append(lines[0])
    assert not (where / "merged").exists() and not (folder / "verify.json").exists()
    return said


def test_the_untouched_run_merges_and_its_decision_verifies(decided: Path, tmp_path: Path) -> None:
    code, out, err = in_process(["merge", str(decided), "--out", str(tmp_path / "merged")])
    assert code == 0 and (tmp_path / "merged" / "summary.json").is_file(), out + err
    checked = check_decision(read(decided, "run.json"), run_records(decided), decided)
    assert checked is not None and checked["agrees"] is True, checked


def set_field(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(block: dict[str, Any]) -> None:
        *parents, key = path.split(".")
        for parent in parents:
            block = block[parent]
        block[key] = value
    return change


DAMAGED_NUMBERS: list[tuple[str, str, Any, str]] = [
    ("alpha-zero", "alpha", 0, "alpha is 0, outside (0, 1)"),
    ("alpha-negative", "alpha", -0.05, "alpha is -0.05, outside (0, 1)"),
    ("alpha-text", "alpha", "nan", "alpha is 'nan', not a finite number"),
    ("alpha-null", "alpha", None, "alpha is None, not a finite number"),
    ("seed-fraction", "order_seed", 7.9, "order_seed is 7.9, not a whole number"),
    ("seed-bool", "order_seed", True, "order_seed is True, not a whole number"),
    ("seed-text", "order_seed", "3", "order_seed is '3', not a whole number"),
    ("margin-above-one", "margin", 2, "margin is 2, outside [0, 1]"),
    ("threshold-negative", "gates.min_success", -1, "gates.min_success is -1, outside [0, 1]"),
    ("threshold-text", "gates.min_success", "0.9", "gates.min_success is '0.9', not a finite number"),
    ("baseline-alpha-above-one", "gates.baseline_alpha", 1.5, "gates.baseline_alpha is 1.5, outside (0, 1)"),
    ("gates-a-list", "gates", [0.9], "gates is a list, not a table"),
    ("mode-capitalised", "mode", "Anytime", "mode is 'Anytime'; a run writes one of exact, anytime"),
    ("order-text", "order", "libero_90-00", "order is not a list of case ids"),
    ("running-numbers", "running", [1, 2], "running is not a list of case ids"),
    ("baseline-outcome", "baseline", {"libero_90-00": "won"},
     "baseline is not a table of case ids to success or failure"),
]


@pytest.mark.parametrize(("path", "value", "said"), [
    pytest.param(path, value, said, id=row_id) for row_id, path, value, said in DAMAGED_NUMBERS])
def test_a_damaged_decide_number_is_one_line(
        path: str, value: Any, said: str, decided: Path, tmp_path: Path) -> None:
    folder = doctored(decided, tmp_path, set_field(path, value))
    for line in refused(folder, tmp_path):
        assert BLOCK + said + ")" in line, line


def test_a_seed_past_any_float_is_refused_not_overflowed(decided: Path, tmp_path: Path) -> None:
    folder = doctored(decided, tmp_path, lambda block: None)
    text = (folder / "run.json").read_text()
    assert '"order_seed": 3' in text
    (folder / "run.json").write_text(text.replace('"order_seed": 3', '"order_seed": 1e400'))
    for line in refused(folder, tmp_path):
        assert BLOCK + "order_seed is inf, not a whole number)" in line, line


def successes_first(block: dict[str, Any]) -> None:
    wins = {f"libero_90-{int(i):02d}" for i in SUCCESSES.split(",")}
    block["order"] = sorted(block["order"], key=lambda case: case not in wins)
    block["running"] = block["order"]


def one_success_twenty_times(block: dict[str, Any]) -> None:
    block["order"] = ["libero_90-00"] * 20 + block["order"][:20]
    block["running"] = block["order"]


def one_case_left_out(block: dict[str, Any]) -> None:
    block["order"] = block["order"][:-1]
    block["running"] = block["order"]


def one_case_more(block: dict[str, Any]) -> None:
    block["order"] = [*block["order"], "libero_90-77"]
    block["running"] = block["order"]


def running_reversed(block: dict[str, Any]) -> None:
    block["running"] = list(reversed(block["order"]))


ORDERS: list[tuple[Callable[[dict[str, Any]], None], str, str]] = [
    (successes_first, "the eight successes moved to the front of `decide.order`, the seed kept "
     "(a FAIL decided after 7 of 40 would read as a PASS)",
     "order is not the order seed 3 draws from its 40 selected cases: 40 recorded, first different "
     "at position "),
    (one_success_twenty_times, "one success listed 20 times in `decide.order`",
     "order is not the order seed 3 draws from its 40 selected cases"),
    (one_case_left_out, "`decide.order` without its last case",
     "39 recorded, first different at position 40 (none where"),
    (one_case_more, "`decide.order` with a case the run did not select",
     "41 recorded, first different at position 41 (libero_90-77 where none belongs)"),
    (running_reversed, "`decide.running` reversed",
     "running is not the order seed 3 draws from its 40 selected cases"),
]


@pytest.mark.parametrize(("change", "said"), [
    pytest.param(change, said, id=change.__name__) for change, _, said in ORDERS])
def test_an_order_the_seed_does_not_draw_is_refused_everywhere(
        change: Callable[[dict[str, Any]], None], said: str, decided: Path, tmp_path: Path) -> None:
    folder = doctored(decided, tmp_path, change)
    for line in refused(folder, tmp_path):
        assert BLOCK in line and said in line, line
    resumed = run(tmp_path, *GATE, f"--libero-resume={folder}", success=SUCCESSES)
    assert resumed.returncode == 4, resumed.stdout + resumed.stderr
    assert f"--libero-resume={folder}: " in resumed.stderr and said in resumed.stderr, resumed.stderr
    assert len(run_records(folder)) == len(run_records(decided))  # nothing ran


def test_the_drawn_order_is_what_the_run_recorded(decided: Path) -> None:
    assert read(decided, "run.json")["decide"]["order"] == list(drawn_order(cases(range(40)), 3))


def test_a_decision_file_beside_a_run_that_decides_nothing_is_refused(
        decided: Path, tmp_path: Path) -> None:
    folder = doctored(decided, tmp_path, lambda block: block.clear())
    run_json = json.loads((folder / "run.json").read_text())
    run_json["decide"] = None
    (folder / "run.json").write_text(json.dumps(run_json))
    assert (folder / "decision.json").is_file()
    for line in refused(folder, tmp_path):
        assert "holds decision.json, but its run.json decides nothing (decide is null)" in line, line


MERGE_VERIFY = "merge and verify: exit 2, nothing written, one line: "
HOSTILE: list[Hostile] = [
    *(Hostile(1, f"run.json `decide.{path}` set to {json.dumps(value)}", MERGE_VERIFY +
              f'"{BLOCK}{said}); it was not written by pytest-libero, or it is damaged: ..."',
              f"tests/test_hostile_decisions.py::test_a_damaged_decide_number_is_one_line[{row_id}]")
      for row_id, path, value, said in DAMAGED_NUMBERS),
    Hostile(1, "run.json `decide.order_seed` 1e400 (an OverflowError in merge)",
            MERGE_VERIFY + f'"{BLOCK}order_seed is inf, not a whole number); ..."',
            "tests/test_hostile_decisions.py::test_a_seed_past_any_float_is_refused_not_overflowed"),
    *(Hostile(2, tried, MERGE_VERIFY + f'"{BLOCK}{said} ..."; a resume: exit 4, the same line '
              "after --libero-resume=RUN, nothing run",
              f"tests/test_hostile_decisions.py::test_an_order_the_seed_does_not_draw_is_refused_everywhere"
              f"[{change.__name__}]")
      for change, tried, said in ORDERS),
    Hostile(2, "`decide: null` in run.json beside the run's decision.json",
            MERGE_VERIFY + '"RUN holds decision.json, but its run.json decides nothing '
                           '(decide is null); ..."',
            "tests/test_hostile_decisions.py::test_a_decision_file_beside_a_run_that_decides_nothing_is_refused"),
]
