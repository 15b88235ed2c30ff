"""Full mode with the real simulator: one case per (entry, state), in native order, each
the episode openpi's loop runs from that state; partial runs, shards, resume and gates."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from libero_native import reference_loop_first_observations

from harness.runs import run_records
from pytest_libero.audit.verify import verify_run
from pytest_libero.catalog.entries import load_catalog
from pytest_libero.catalog.inventory import installed_files, load_states, states_sha256
from pytest_libero.protocol.hashing import array_sha256
from pytest_libero.protocol.identity import protocol_identity
from pytest_libero.protocol.parameters import CAMERAS, FULL_SEED

pytestmark = pytest.mark.simulator
pytest_plugins = ["pytester"]

FULL = ["--libero-profile=zero", "--libero-mode=full", "--libero-scope=task_coverage",
        "--libero-suite=libero_object", "--libero-task-ids=0", "--libero-budget-mode=decisions",
        "--libero-max-policy-calls=2", "--libero-replan-interval=2"]


def run_folder(pytester: pytest.Pytester, run_id: str) -> Path:
    return pytester.path / "libero-results" / "zero" / run_id


def first_hashes(case_dir: Path) -> dict[str, str]:
    first = json.loads((case_dir / "observations.jsonl").read_text().splitlines()[0])
    return {camera: first["images"][camera]["sha256"] for camera in CAMERAS}


def test_each_state_is_a_case_run_in_native_order_as_the_reference_loop_runs_it(
    pytester: pytest.Pytester,
) -> None:
    result = pytester.runpytest(*FULL, "--libero-init-states=3,0", "--libero-run-id=states", "-v")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*test_libero_task[[]libero_object-00-s0]*",
                                 "*test_libero_task[[]libero_object-00-s3]*",
                                 "*full mode: 2 cases (1 tasks x 2 states)*",
                                 "*PARTIAL full-mode run: init states 0,3 of 0-49*"])
    summary = json.loads((run_folder(pytester, "states") / "summary.json").read_text())
    assert summary["partial"] and summary["suites"]["libero_object"]["comparable"] is False
    folder = run_folder(pytester, "states")
    run = json.loads((folder / "run.json").read_text())
    assert run["protocol_identity"] == protocol_identity("full") != protocol_identity("fast")
    assert run["plan"]["mode"] == "full"
    assert run["plan"]["selection"]["init_states"] == [0, 3]
    assert run["plan"]["partial"] == ["init states 0,3 of 0-49",
                                      "budget mode decisions, not the reference horizons"]
    assert run["plan"]["cases"] == ["libero_object-00-s0", "libero_object-00-s3"]

    entry = load_catalog().suite_entries("libero_object")[0]
    _, states_file = installed_files(entry.bddl_file, entry.init_states_file)
    released = load_states(states_file)
    reference = reference_loop_first_observations("libero_object", 0, {0, 3}, seed=FULL_SEED)
    for record, state in zip(run_records(folder), (0, 3)):
        assert record["case"] == f"libero_object-00-s{state}"
        assert record["entry"]["init_state"] == state
        identity = record["identity"]
        assert identity["init_state_index"] == state and identity["seed"] == FULL_SEED
        assert identity["state_sha256"] == states_sha256(
            np.ascontiguousarray(released[state], dtype=np.float64))
        assert identity["schedule"]["positioning_resets"] == state
        # The first delivered observation is the reference loop's, byte for byte.
        native = reference[state]
        expected = {camera: array_sha256(np.ascontiguousarray(native[f"{camera}_image"][::-1, ::-1]))
                    for camera in CAMERAS}
        assert first_hashes(folder / "cases" / record["case"]) == expected
    # State 3 is a different episode from state 0.
    assert first_hashes(folder / "cases" / "libero_object-00-s0") != first_hashes(
        folder / "cases" / "libero_object-00-s3")


def test_resume_and_the_baseline_gate_work_case_by_case(pytester: pytest.Pytester) -> None:
    # -x stops after the first (failed) case: the second is left unattempted.
    states = ["--libero-init-states=0,1"]
    stopped = pytester.runpytest(*FULL, *states, "--libero-run-id=first", "-x")
    stopped.assert_outcomes(failed=1)
    folder = run_folder(pytester, "first")
    assert [r["case"] for r in run_records(folder)] == ["libero_object-00-s0"]

    resumed = pytester.runpytest(*FULL, *states, f"--libero-resume={folder}")
    resumed.assert_outcomes(failed=1)
    assert [r["case"] for r in run_records(folder)] == ["libero_object-00-s0", "libero_object-00-s1"]
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["counts"]["unattempted"] == 0 and summary["counts"]["completed"] == 2
    # The resumed folder proves itself by re-execution, case by case.
    verified, _ = verify_run(folder, jobs=2, say=lambda line: None)
    assert [(v.case, v.status) for v in verified] == [
        ("libero_object-00-s0", "verified"), ("libero_object-00-s1", "verified")]

    # The baseline gate pairs the two runs by (entry, state).
    gated = pytester.runpytest(*FULL, *states, "--libero-run-id=second", f"--libero-baseline={folder}")
    gated.stdout.fnmatch_lines(["*baseline gate passed: 2 paired cases*"])
    # A fast-mode run is not a baseline for a full-mode one.
    fast = pytester.runpytest("--libero-profile=zero", "--libero-scope=task_coverage",
                              "--libero-suite=libero_object", "--libero-task-ids=0",
                              f"--libero-baseline={folder}")
    assert fast.ret == pytest.ExitCode.USAGE_ERROR
    fast.stderr.fnmatch_lines([f"*ran protocol {protocol_identity('full')}, this run is "
                               f"{protocol_identity('fast')}*"])
