"""Test helpers shared by the report tests: synthetic case records and an Allure run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from harness.runs import run_pytest
from pytest_libero.catalog.case_id import CaseId
from pytest_libero.episode.record import CaseRecord


def synthetic_record(case: str, outcome: str, **extra: Any) -> CaseRecord:
    """The fields summaries and reports read, for a case id of either mode."""
    case_id = CaseId.parse(case)
    suite, index = case_id.suite, case_id.index
    entry: dict[str, Any] = {"suite": suite, "index": index, "name": f"TASK_{suite}_{index}",
                             "language": "do it", "bddl_file": "x.bddl",
                             "init_states_file": "x.pruned_init"}
    if case_id.state is not None:
        entry["init_state"] = case_id.state
    variant = case_id.variant
    applied = {} if variant is None else {  # what a run's adapter records it applied
        "perturbation": {"kind": variant.kind, "level": 1 if variant.level is None else variant.level}}
    return cast(CaseRecord, {"case": case, "outcome": outcome, "entry": entry, "profile": "zero",
                             "evidence_class": "infrastructure", "track": "rgb",
                             "budget": {"mode": "horizon", "control_cap": 520}, **applied, **extra})


def allure_results(tmp_path: Path) -> dict[str, dict[str, Any]]:
    """Run the test files in ``tmp_path`` under allure-pytest; its results by test name."""
    alluredir = tmp_path / "allure-results"
    done = run_pytest(["-q", "-p", "no:libero", f"--alluredir={alluredir}", str(tmp_path)],
                      tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    results = {}
    for path in alluredir.glob("*-result.json"):
        result = json.loads(path.read_text())
        results[result["name"].split(":")[0]] = result
    return results
