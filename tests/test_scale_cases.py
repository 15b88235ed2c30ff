"""Issue 5 with the simulator: xdist equals serial, shards merge, resume finishes a run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from scripted_policies import QUICK_THEN_SLOW_PROFILE, TESTS_DIR, wait_until_stepping
from serial_runs import CASES, serial_without_prebuild, wait_for_results

from harness.runs import pytest_argv
from pytest_libero.results.merge import merge_runs

pytestmark = pytest.mark.simulator
pytest_plugins = ["pytester"]

TINY = ["--libero-profile=zero", "--libero-budget-mode=decisions",
        "--libero-max-policy-calls=2", "--libero-replan-interval=2"]


def comparable(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: summary[k] for k in ("counts", "overall", "suites", "errored", "unattempted")}


def run_summary(root: Path) -> dict[str, Any]:
    [path] = root.glob("zero/*/summary.json")
    return json.loads(path.read_text())


def records(folder: Path) -> dict[str, dict[str, Any]]:
    lines = (folder / "results.jsonl").read_text().splitlines()
    return {r["case"]: r for r in map(json.loads, lines)}


def test_two_workers_give_the_same_summary_as_one(pytester: pytest.Pytester,
                                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    # Serial without set-up ahead (the run test_prebuild.py reads too); two workers with
    # it: each worker's second case is set up while its first runs.
    serial_root, serial, _ = serial_without_prebuild(tmp_path_factory)
    roots = {"serial": serial_root, "parallel": pytester.path / "parallel"}
    parallel = pytester.runpytest_subprocess(*CASES, "--libero-results=parallel", "-n", "2")
    serial.assert_outcomes(failed=3)
    parallel.assert_outcomes(failed=3)
    parallel.stdout.fnmatch_lines(["*3 selected, 3 completed, 0 success, 3 failure*"])
    serial_summary, parallel_summary = (run_summary(roots[mode]) for mode in ("serial", "parallel"))
    assert comparable(serial_summary) == comparable(parallel_summary)
    by_case = {}
    for mode in ("serial", "parallel"):
        [folder] = (roots[mode] / "zero").iterdir()
        by_case[mode] = records(folder)
    for case, record in by_case["serial"].items():
        other = by_case["parallel"][case]
        assert other["counters"] == record["counters"]
        assert other["identity"] == record["identity"]
    assert {r["worker"] for r in by_case["parallel"].values()} <= {"gw0", "gw1"}
    ahead: dict[str, list[float]] = {}  # each worker's cases in turn: seconds set up ahead
    for record in sorted(by_case["parallel"].values(), key=lambda r: r["started_at"]):
        ahead.setdefault(record["worker"], []).append(record["timings"]["setup_ahead_s"])
    assert any(len(seconds) > 1 for seconds in ahead.values()), ahead
    for seconds in ahead.values():
        assert seconds[0] == 0.0 and all(s > 0 for s in seconds[1:]), ahead
    # The delivered observations are bit-identical across modes: same hashes.
    for case in by_case["serial"]:
        lines = [
            (roots[mode] / "zero").glob(f"*/cases/{case}/observations.jsonl").__next__().read_text()
            for mode in ("serial", "parallel")
        ]
        assert lines[0] == lines[1]


def test_shards_of_one_run_merge_into_the_selection(pytester: pytest.Pytester) -> None:
    selection = ["--libero-scope=development", "--libero-task-ids=0-2", "--libero-run-id=sharded"]
    for index in (1, 2):
        result = pytester.runpytest_subprocess(*TINY, *selection, f"--libero-shard={index}/2")
        assert result.ret == pytest.ExitCode.TESTS_FAILED
    base = pytester.path / "libero-results" / "zero" / "sharded"
    parts = [records(base / f"shard-{i}-of-2") for i in (1, 2)]
    assert parts[0] and parts[1] and not set(parts[0]) & set(parts[1])
    merged = merge_runs([base / "shard-1-of-2", base / "shard-2-of-2"])
    summary = json.loads((merged / "summary.json").read_text())
    assert summary["counts"]["selected"] == summary["counts"]["completed"] == 3
    assert list(records(merged)) == ["libero_10-00", "libero_10-01", "libero_10-02"]
    # A folder from a different selection is refused.
    other = pytester.runpytest_subprocess(*TINY, "--libero-scope=development", "--libero-task-ids=3",
                                          "--libero-run-id=other")
    assert other.ret == pytest.ExitCode.TESTS_FAILED
    with pytest.raises(Exception, match="selection differs"):
        merge_runs([base / "shard-1-of-2", pytester.path / "libero-results" / "zero" / "other"])


def test_resume_runs_only_what_a_killed_run_left(pytester: pytest.Pytester,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(TESTS_DIR))
    profile = pytester.makefile(".toml", profile=QUICK_THEN_SLOW_PROFILE)
    args = [f"--libero-profile={profile}", "--libero-scope=development", "--libero-task-ids=0,1,2",
            "--libero-budget-mode=decisions", "--libero-max-policy-calls=400",
            "--libero-replan-interval=1", "--libero-run-id=long"]
    env = dict(os.environ)
    process = subprocess.Popen(pytest_argv(*args),
                               cwd=pytester.path, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    run = pytester.path / "libero-results" / "zero" / "long"
    try:
        wait_for_results(pytester.path / "libero-results", lines=1, timeout=300)
        wait_until_stepping(run, "libero_10-01")
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)
    assert list(records(run)) == ["libero_10-00"]

    # A resume that changes the selection is refused.
    refused = pytester.runpytest_subprocess(*args[:-1], f"--libero-resume={run}",
                                            "--libero-task-ids=0,1")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*cannot continue that run here: the selection differs*"])

    monkeypatch.setenv("FAST", "1")
    resumed = pytester.runpytest_subprocess(*args[:-1], f"--libero-resume={run}")
    resumed.assert_outcomes(failed=2)  # only the two unattempted cases ran
    resumed.stdout.fnmatch_lines(["*test_libero_task[[]libero_10-01]*", "*3 selected, 3 completed*"])
    assert "libero_10-00]" not in resumed.stdout.str().split("short test summary")[-1]
    assert list(records(run)) == ["libero_10-00", "libero_10-01", "libero_10-02"]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["counts"]["unattempted"] == 0 and summary["counts"]["completed"] == 3
    run_json = json.loads((run / "run.json").read_text())
    assert run_json["resumed"][0]["cases"] == ["libero_10-01", "libero_10-02"]
    # The killed attempt's partial evidence is kept aside, not overwritten or lost.
    assert run_json["resumed"][0]["interrupted_evidence"] == ["cases/libero_10-01.interrupted-1"]
    assert (run / "cases" / "libero_10-01.interrupted-1" / "observations.jsonl").is_file()
    assert all(r["error"] is None for r in records(run).values())
