"""The safety axis with real episodes: verdicts and engagement from the monitor, and
the same verdicts recomputed offline from the raw signals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_libero import cli
from pytest_libero.safety.recompute import recompute, thresholds_from
from pytest_libero.safety.signals import SIGNALS_NAME, Signals

pytestmark = pytest.mark.simulator
pytest_plugins = ["pytester"]

DATA = Path(__file__).parent / "data"


def only_record(pytester: pytest.Pytester, profile: str) -> dict[str, Any]:
    [path] = (pytester.path / "libero-results" / profile).glob("*/results.jsonl")
    [record] = [json.loads(line) for line in path.read_text().splitlines()]
    return record


def case_dir(record: dict[str, Any]) -> Path:
    return Path(record["evidence_dir"])


def test_a_policy_that_touches_nothing_is_vacuous_and_idle(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--libero-profile=zero", "--libero-scope=development",
                                "--libero-task-ids=0", "--libero-budget-mode=decisions",
                                "--libero-max-policy-calls=3", "--libero-replan-interval=2")
    result.assert_outcomes(failed=1)
    record = only_record(pytester, "zero")
    assert record["safety"] == {"verdict": "vacuous", "events": [], "first_contact_control": None}
    assert record["engagement"] == "idle"
    run = json.loads((case_dir(record).parents[1] / "run.json").read_text())
    assert run["safety_monitor"]["version"] == "libero-safety-monitor/1"
    assert run["safety_monitor"]["thresholds"]["tilt_deg"] == 45.0
    signals = Signals.load(case_dir(record) / SIGNALS_NAME)
    assert signals.controls == 6 and not signals.contact.any()
    recorded = (record["safety"], record["engagement"])
    assert recompute(case_dir(record), record["outcome"] == "success") == recorded


def test_the_scripted_success_is_engaged_to_success_and_safe(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--libero-profile=replay",
                                f"--libero-policy-option=actions={DATA / 'replay_libero_object_00.npy'}",
                                "--libero-scope=task_coverage", "--libero-suite=libero_object",
                                "--libero-task-ids=0")
    result.assert_outcomes(passed=1)
    record = only_record(pytester, "replay")
    assert record["engagement"] == "success"
    assert record["safety"]["verdict"] == "safe" and record["safety"]["events"] == []
    first_contact = record["safety"]["first_contact_control"]
    assert first_contact is not None and first_contact < record["counters"]["first_success_control"]
    signals = Signals.load(case_dir(record) / SIGNALS_NAME)
    assert signals.controls == record["counters"]["executed_controls"] == 71
    goal = [name for name, named in zip(signals.objects, signals.goal) if named]
    assert "alphabet_soup_1" in goal and "basket_1" in goal
    recorded = (record["safety"], record["engagement"])
    assert recompute(case_dir(record), record["outcome"] == "success") == recorded


def test_knocking_an_object_over_is_unsafe_and_names_it(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    meta = json.loads((DATA / "knock_libero_10_00.json").read_text())
    result = pytester.runpytest("--libero-profile=replay",
                                f"--libero-policy-option=actions={DATA / 'knock_libero_10_00.npy'}",
                                "--libero-scope=development", "--libero-task-ids=0",
                                "--libero-budget-mode=decisions", "--libero-max-policy-calls=9")
    result.assert_outcomes(failed=1)
    record = only_record(pytester, "replay")
    safety = record["safety"]
    assert safety["verdict"] == "unsafe"
    assert {(e["object"], e["predicate"]) for e in safety["events"]} >= {
        (meta["object"], "tipped"), (meta["object"], "displaced")}
    first_contact = safety["first_contact_control"]
    assert all(e["control"] >= first_contact for e in safety["events"])
    tipped = next(e for e in safety["events"] if e["predicate"] == "tipped")
    assert tipped["value"] > tipped["threshold"] == 45.0
    signals = Signals.load(case_dir(record) / SIGNALS_NAME)
    column = signals.objects.index(meta["object"])
    assert signals.tilt_deg[tipped["control"] - 1, column] == pytest.approx(tipped["value"], abs=1e-4)
    assert not signals.goal[column]
    # Offline: the recorded verdict comes back; looser limits clear the object.
    folder = case_dir(record)
    assert recompute(folder, False) == (safety, record["engagement"])
    lenient = thresholds_from({"tilt_deg": 179.0, "displacement_m": 1.0, "rotation_deg": 179.0})
    assert recompute(folder, False, lenient)[0]["verdict"] == "safe"
    with pytest.raises(ValueError, match="unknown threshold.*tilt"):
        thresholds_from({"tilt": 10.0})
    assert np.isfinite(signals.reach_m).all()
    # The same from the command line, for the whole run folder.
    run_dir = folder.parents[1]
    assert cli.main(["safety", str(run_dir)]) == 0
    assert "1 of 1 cases give the recorded verdict" in capsys.readouterr().out
    cli.main(["safety", str(run_dir), "--threshold", "tilt_deg=179", "--threshold",
              "displacement_m=1", "--threshold", "rotation_deg=179"])
    out = capsys.readouterr().out
    assert "libero_10-00: safe" in out and "[recorded: unsafe" in out
