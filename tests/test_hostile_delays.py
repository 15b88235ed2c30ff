"""A reply's recorded delay is checked, before anything re-executes, against the record's
chunks and the clock's rule (issue 49, class H8).

One real run, a zero policy on libero_10 task 0 beside its ``latency:2`` companion, three
calls of four controls. Each test edits a copy of its latency case as a forger would,
actions.jsonl and (where it says so) the record's chunks, the hashes updated in both
records so that every file still has its recorded sha256; verify must then answer
MISMATCH in one line naming the call, without starting a simulator, and export must
refuse in one line before lerobot loads. Genuine delays verify: the latency cases'
tests (tests/test_latency_cases.py) verify real kind and realtime runs.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_runs import in_process

from harness.hostile import Hostile
from harness.runs import run_folder, run_pytest
from pytest_libero.evidence.layout import ACTIONS_NAME, RECORD_NAME
from pytest_libero.results.layout import RESULTS_NAME, RUN_NAME, VERIFY_NAME, case_path

pytestmark = pytest.mark.simulator

LATE, TWIN = "libero_10-00~latency2", "libero_10-00"
RUN = ["-q", "--libero-profile=zero", "--libero-scope=task_coverage", "--libero-suite=libero_10",
       "--libero-task-ids=0", "--libero-budget-mode=decisions", "--libero-max-policy-calls=3",
       "--libero-replan-interval=4", "--libero-perturb=latency:2", "--libero-run-id=late"]

Line = dict[str, Any]


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("delays")
    done = run_pytest(RUN, where, timeout=900)
    assert done.returncode == 1 and "2 failed" in done.stdout, done.stdout + done.stderr  # no success
    folder = run_folder(where / "libero-results")
    lines = actions(folder, LATE)
    assert [line["delay_controls"] for line in lines] == [2, 2, 2], lines
    return folder


def actions(folder: Path, case: str) -> list[Line]:
    return [json.loads(line) for line in (case_path(folder, case) / ACTIONS_NAME).read_text().splitlines()]


def doctored(folder: Path, where: Path, case: str, change: Callable[[list[Line], list[Line]], None],
             run: Callable[[dict[str, Any]], None] | None = None) -> Path:
    """A copy of ``folder`` whose case ``case`` had ``change(actions lines, record chunks)``
    applied, its actions.jsonl rehashed in both of its records; ``run`` edits run.json."""
    copy = where / "doctored"
    shutil.copytree(folder, copy)
    lines = actions(copy, case)
    episode_json = case_path(copy, case) / RECORD_NAME
    record = json.loads(episode_json.read_text())
    change(lines, record["chunks"])
    data = "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines).encode()
    (case_path(copy, case) / ACTIONS_NAME).write_bytes(data)
    record["evidence"]["files"][ACTIONS_NAME].update(sha256=hashlib.sha256(data).hexdigest(),
                                                     bytes=len(data))
    episode_json.write_text(json.dumps(record))
    results = [json.loads(line) for line in (copy / RESULTS_NAME).read_text().splitlines()]
    (copy / RESULTS_NAME).write_text("".join(
        json.dumps(record if r["case"] == case else r) + "\n" for r in results))
    if run is not None:
        run_json = json.loads((copy / RUN_NAME).read_text())
        run(run_json)
        (copy / RUN_NAME).write_text(json.dumps(run_json))
    return copy


def delay(value: Any, *, chunks: bool = True) -> Callable[[list[Line], list[Line]], None]:
    """Call 1's delay set to ``value`` in actions.jsonl (its usable control with it) and,
    with ``chunks``, in the record's chunks too."""
    def change(lines: list[Line], summaries: list[Line]) -> None:
        for row in (lines[0], summaries[0]) if chunks else (lines[0],):
            row["delay_controls"] = value
            if type(value) is int:
                row["usable_at_control"] = row["sent_at_control"] + value
    return change


def first_run_action(index: int) -> Callable[[list[Line], list[Line]], None]:
    def change(lines: list[Line], summaries: list[Line]) -> None:
        for row in (lines[1], summaries[1]):
            row["first_executed_index"] = index
    return change


def sent_later(lines: list[Line], summaries: list[Line]) -> None:
    """Call 3 sent a control later than the clock makes it due (a delay of 3 recorded
    where 2 ran, the call's own fields kept consistent)."""
    for row in (lines[2], summaries[2]):
        row["sent_at_control"] += 1
        row["usable_at_control"] += 1


def untouched(lines: list[Line], summaries: list[Line]) -> None:
    pass


def realtime(run_json: dict[str, Any]) -> None:
    run_json["plan"]["clock"] = "realtime"


def sideways(run_json: dict[str, Any]) -> None:
    run_json["plan"]["clock"] = "sideways"


CASES: list[tuple[str, str, Callable[[list[Line], list[Line]], None],
                  Callable[[dict[str, Any]], None] | None, str, str]] = [
    ("minus-five", "call 1's delay_controls -5 in actions.jsonl and the record's chunks", delay(-5), None,
     LATE, "actions.jsonl: call 1's delay_controls is -5, not a count of controls"),
    ("text", "call 1's delay_controls \"2\" (text)", delay("2"), None,
     LATE, "actions.jsonl: call 1's delay_controls is '2', not a count of controls"),
    ("boolean", "call 1's delay_controls true", delay(True), None,
     LATE, "actions.jsonl: call 1's delay_controls is True, not a count of controls"),
    ("trillion", "call 1's delay_controls 10^12, usable_at and the record's chunks agreeing", delay(10**12),
     None, LATE, "actions.jsonl: call 1 is recorded 1000000000000 controls late; the case's "
                 "perturbation makes it 2"),
    ("actions-only", "call 1's delay 3 in actions.jsonl only", delay(3, chunks=False), None,
     LATE, "actions.jsonl: call 1's delay_controls is 3, the record's chunks say 2"),
    ("twin-late", "the unperturbed twin's call 1 recorded 1 control late everywhere", delay(1), None,
     TWIN, "actions.jsonl: call 1 is recorded 1 control late; the synchronous protocol makes it 0"),
    ("first-action", "call 2's first executed action moved to index 3", first_run_action(3), None,
     LATE, "actions.jsonl: call 2 first ran its action 3, but a reply 2 controls late first runs "
           "its action 2"),
    ("sent-later", "call 3 sent a control after the clock makes it due", sent_later, None,
     LATE, "actions.jsonl: call 3 was sent at control 9, but the clock sends it at 8 (call 2: "
           "sent at 4, 5 actions, 2 controls late, K = 4)"),
    ("realtime", "run.json's `plan.clock` turned to realtime under synchronous delays", untouched,
     realtime, TWIN, "actions.jsonl: call 1 is recorded 0 controls late; the realtime clock at its "
                     "measured "),
]


@pytest.mark.parametrize(("change", "run", "case", "said"), [
    pytest.param(change, run, case, said, id=name) for name, _, change, run, case, said in CASES])
def test_a_delay_no_rule_made_is_a_mismatch_before_re_execution(
        change: Callable[[list[Line], list[Line]], None], run: Callable[[dict[str, Any]], None] | None,
        case: str, said: str, ran: Path, tmp_path: Path) -> None:
    folder = doctored(ran, tmp_path, case, change, run)
    code, out, err = in_process(["verify", str(folder), "--case", case])
    assert code == 1 and "Traceback" not in err, (code, out, err)
    [line] = [line for line in out.splitlines() if line.startswith(f"{case} ")]
    assert f"{case} MISMATCH: " in line and said in line and len(line) < 400, line
    assert "renderer here" not in out  # settled without a simulator
    verdict = json.loads((folder / VERIFY_NAME).read_text())["cases"][0]
    assert verdict["status"] == "mismatch" and said in verdict["reason"], verdict
    code, out, err = in_process(["export", str(folder), "--lerobot", str(tmp_path / "dataset")])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and said in lines[0], (code, out, err)
    assert not (tmp_path / "dataset").exists()


def test_a_clock_that_is_neither_is_refused_by_name(ran: Path, tmp_path: Path) -> None:
    folder = doctored(ran, tmp_path, LATE, untouched, sideways)
    for args in (["verify", str(folder)], ["export", str(folder), "--lerobot", str(tmp_path / "ds")]):
        code, out, err = in_process(args)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1, (args, code, out, err)
        assert "plan.clock is 'sideways', not synchronous or realtime" in lines[0], lines


def test_the_genuine_delays_pass_the_check(ran: Path, tmp_path: Path) -> None:
    """The untouched copy: the check finds nothing, so verify goes on to re-execute."""
    from pytest_libero.audit.verify import precheck
    from pytest_libero.results.run_reader import read_run

    folder = doctored(ran, tmp_path, LATE, untouched)
    read = read_run(folder)
    for record in read.records:
        assert precheck(read, record) == case_path(folder, record["case"]), record["case"]


VERIFY_EXPORT = "verify: MISMATCH, settled before any re-execution; export: exit 2, nothing written: "
HOSTILE: list[Hostile] = [
    *(Hostile(8, tried, VERIFY_EXPORT + f'"{said}..."',
              f"tests/test_hostile_delays.py::test_a_delay_no_rule_made_is_a_mismatch_before_re_execution"
              f"[{name}]")
      for name, tried, _, _, _, said in CASES),
    Hostile(8, "run.json's `plan.clock` \"sideways\"",
            "verify and export: exit 2, one line: \"run.json ... plan.clock is 'sideways', not "
            "synchronous or realtime\"",
            "tests/test_hostile_delays.py::test_a_clock_that_is_neither_is_refused_by_name"),
]
