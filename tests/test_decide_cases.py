"""Runs that decide early (``--libero-decide``) on the real simulator, on the smallest
budgets (one policy call of one control per case): the issue's examples, a baseline
gate, ``verify`` of decided runs, and two xdist workers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.runs import run_folder, run_pytest, run_records

pytestmark = pytest.mark.simulator

TINY = ("--libero-profile=zero", "--libero-budget-mode=decisions", "--libero-max-policy-calls=1",
        "--libero-replan-interval=1", "--libero-scope=task_coverage", "--libero-suite=libero_10")
DATA = Path(__file__).parent / "data"


def summary_of(folder: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((folder / "summary.json").read_text())
    return found


@pytest.fixture(scope="module")
def decided(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The zero policy on libero_10 tasks 0-4 under a 50% gate, exact: three failures
    leave at most two successes of five."""
    where = tmp_path_factory.mktemp("decided")
    done = run_pytest(["-q", *TINY, "--libero-task-ids=0-4", "--libero-min-success=0.5",
                       "--libero-decide=exact"], where, timeout=900)
    return run_folder(where / "libero-results"), done


def test_the_zero_policy_is_decided_after_three_of_five(
        decided: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    folder, done = decided
    assert done.returncode == 1, done.stdout + done.stderr
    assert [r["case"] for r in run_records(folder)] == [f"libero_10-0{i}" for i in range(3)]
    summary = summary_of(folder)
    assert summary["counts"]["decided"] == 2 and summary["counts"]["failure"] == 3
    assert summary["decision"]["verdict"] == "fail"
    assert "decided after 3 of 5: FAIL (exact;" in done.stdout


def test_verify_reexecutes_a_decided_run_and_recomputes_its_decision(
        decided: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    folder, _ = decided
    done = subprocess.run([sys.executable, "-m", "pytest_libero.cli", "verify", str(folder)],
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "decision recomputed from the records: decided after 3 of 5: FAIL" in done.stdout
    assert "(as recorded)" in done.stdout
    report = json.loads((folder / "verify.json").read_text())
    assert report["counts"]["verified"] == 3 and report["decision"]["agrees"] is True


def test_a_baseline_gate_not_worse_for_certain_passes_after_one_case(
        decided: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path) -> None:
    """Against the decided run (three failures), no completion can make the zero policy
    significantly worse: no case the baseline passed is left to lose."""
    folder, _ = decided
    done = run_pytest(["-q", *TINY, "--libero-task-ids=0-4", f"--libero-baseline={folder}",
                       "--libero-decide=exact"], tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    mine = run_folder(tmp_path / "libero-results")
    assert len(run_records(mine)) == 1
    decision = summary_of(mine)["decision"]
    assert (decision["verdict"], decision["decided_after"]) == ("pass", 1)
    assert "baseline gate passed: decided after 1 of 5 cases (exact)" in done.stdout


def test_anytime_with_two_workers_stops_early(tmp_path: Path) -> None:
    """Ten cases under a 90% gate: two failures settle it, each worker's held next case
    is skipped as decided."""
    done = run_pytest(["-q", *TINY, "--libero-task-ids=0-9", "--libero-min-success=0.9",
                       "--libero-decide=anytime", "-n", "2"], tmp_path, timeout=900)
    assert done.returncode == 1, done.stdout + done.stderr
    folder = run_folder(tmp_path / "libero-results")
    summary = summary_of(folder)
    assert summary["decision"]["verdict"] == "fail"
    assert len(run_records(folder)) <= 6 and summary["counts"]["decided"] >= 4
    assert {r["worker"] for r in run_records(folder)} == {"gw0", "gw1"}


def test_a_replay_that_succeeds_passes_a_half_gate_after_one_case(tmp_path: Path) -> None:
    done = run_pytest(["-q", "--libero-profile=replay",
                       f"--libero-policy-option=actions={DATA / 'replay_libero_object_00.npy'}",
                       "--libero-scope=task_coverage", "--libero-suite=libero_object",
                       "--libero-task-ids=0-1", "--libero-min-success=0.5", "--libero-decide=exact",
                       "--libero-video-stride=5"],  # a frame a decision: nothing reads the video
                      tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    folder = run_folder(tmp_path / "libero-results")
    [record] = run_records(folder)
    assert record["case"] == "libero_object-00" and record["outcome"] == "success"
    assert summary_of(folder)["counts"]["decided"] == 1
