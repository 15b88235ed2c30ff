"""Full mode keeps a task's environment from state to state, as openpi's loop does.

The worker's case process that ran a task's state stays, with its environment, for the
task's next state; every such case must be the episode a fresh build gives (checked by
re-executing each case from scratch with ``verify``), perturbed cases run beside it in
processes of their own, and a crash must still cost one case only, the next state
starting over in a fresh process.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.runs import records_by_case
from pytest_libero.audit.verify import verify_run

pytest_plugins = ["pytester"]

# A video frame every five controls: no test here reads the video (verify renders none).
FULL = ["--libero-video-stride=5", "--libero-mode=full", "--libero-scope=task_coverage",
        "--libero-suite=libero_10", "--libero-budget-mode=decisions",
        "--libero-max-policy-calls=3", "--libero-replan-interval=5"]

CRASHING_ADAPTER = '''
import os, signal
from pytest_libero.adapters.libero import LiberoBenchmarkAdapter


class CrashesOnState1(LiberoBenchmarkAdapter):
    def open(self, entry, **kwargs):
        episode = super().open(entry, **kwargs)
        if entry.case_id.endswith("-s1"):
            step = episode.step
            def crash(action, observe_next=True):
                if episode.controls == 2:
                    os.kill(os.getpid(), signal.SIGSEGV)
                return step(action, observe_next)
            episode.step = crash
        return episode
'''


def records(pytester: pytest.Pytester, profile: str, run_id: str) -> dict[str, dict[str, Any]]:
    return records_by_case(pytester.path / "libero-results" / profile / run_id)


def schedule(record: dict[str, Any]) -> tuple[str, int]:
    found = record["identity"]["schedule"]
    return found["environment"], found["resets_made_here"]


@pytest.mark.simulator
def test_a_tasks_states_continue_in_its_environment_and_verify_as_fresh_builds(
    pytester: pytest.Pytester,
) -> None:
    # libero_10 task 3 has a fixture with a placement range: the task where a reset
    # depends on what the previous one left. Two workers, two tasks: each task's
    # states go to one worker, in order.
    result = pytester.runpytest("--libero-profile=random", *FULL, "--libero-task-ids=3,5",
                                "--libero-init-states=0,1,3", "--libero-run-id=kept", "-n", "2")
    result.assert_outcomes(failed=6)
    found = records(pytester, "random", "kept")
    for task in ("libero_10-03", "libero_10-05"):
        cases = [found[f"{task}-s{state}"] for state in (0, 1, 3)]
        assert len({(r["worker"], r["pid"]) for r in cases}) == 1, task  # one case process
        assert [schedule(r) for r in cases] == [
            ("fresh", 0), ("kept from state 0", 0), ("kept from state 0", 1)], task
        assert [r["identity"]["schedule"]["positioning_resets"] for r in cases] == [0, 1, 3]
    assert found["libero_10-03-s0"]["worker"] != found["libero_10-05-s0"]["worker"]
    # Each case re-executed from scratch (a fresh process and environment, the i
    # resets) delivers the same observations, control by control.
    folder = pytester.path / "libero-results" / "random" / "kept"
    verified, _ = verify_run(folder, jobs=2, say=lambda line: None)
    assert sorted((v.case, v.status) for v in verified) == sorted(
        (case, "verified") for case in found)


@pytest.mark.simulator
def test_perturbed_cases_run_beside_the_kept_environment_set_up_ahead(
    pytester: pytest.Pytester,
) -> None:
    # pytest's order: s0, s0~position1, s1, s1~position1 (a kind that moves the task's
    # objects and judges the settled scene, from each state). The twin states chain as in a run
    # without perturbations; each perturbed case is a fresh build of its own, set up
    # while the case before it runs (which case sets up when, across tasks too, is the
    # host's choice: tests/test_host.py). Every case verifies as a fresh build.
    result = pytester.runpytest("--libero-profile=zero", *FULL[:-2], "--libero-max-policy-calls=2",
                                "--libero-replan-interval=5", "--libero-task-ids=0",
                                "--libero-init-states=0,1", "--libero-perturb=position:1",
                                "--libero-run-id=perturbed")
    result.assert_outcomes(failed=4)
    found = records(pytester, "zero", "perturbed")
    twins = [found[f"libero_10-00-s{state}"] for state in (0, 1)]
    perturbed = [found[f"libero_10-00-s{state}~position1"] for state in (0, 1)]
    assert all(r["perturbation"]["displacement"] for r in perturbed)
    assert [schedule(r) for r in twins] == [("fresh", 0), ("kept from state 0", 0)]
    assert twins[0]["pid"] == twins[1]["pid"]
    assert [schedule(r) for r in perturbed] == [("fresh", 0), ("fresh", 1)]
    assert not {r["pid"] for r in perturbed} & {twins[0]["pid"]}
    # Set up ahead like any fresh case; the kept state needed nothing set up.
    assert all(r["timings"]["setup_ahead_s"] > 0 for r in perturbed), [
        r["timings"] for r in perturbed]
    assert twins[1]["timings"]["setup_ahead_s"] == 0.0
    folder = pytester.path / "libero-results" / "zero" / "perturbed"
    verified, _ = verify_run(folder, jobs=2, say=lambda line: None)
    assert sorted((v.case, v.status) for v in verified) == sorted(
        (case, "verified") for case in found)


@pytest.mark.simulator
def test_a_crash_costs_one_case_and_the_next_state_starts_fresh(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(crashing_adapter=CRASHING_ADAPTER)
    pytester.syspathinsert()
    result = pytester.runpytest("--libero-profile=zero", *FULL, "--libero-task-ids=3",
                                "--libero-init-states=0-2", "--libero-run-id=crash",
                                "--libero-adapter=crashing_adapter:CrashesOnState1")
    result.assert_outcomes(failed=2, errors=1)
    found = records(pytester, "zero", "crash")
    crashed = found["libero_10-03-s1"]
    assert crashed["outcome"] == "errored"
    assert crashed["error"]["cause"] == "simulator_crash"
    assert "killed by SIGSEGV" in crashed["error"]["message"]
    assert crashed["pid"] == found["libero_10-03-s0"]["pid"]  # it ran in the kept process
    after = found["libero_10-03-s2"]
    assert after["outcome"] == "failure" and after["pid"] != crashed["pid"]
    assert schedule(after) == ("fresh", 2)  # rebuilt: seed 7 and both resets again


def test_full_mode_schedules_a_task_as_one_unit_of_work() -> None:
    from pytest_libero.config.task_scheduling import TaskScheduling

    split = TaskScheduling._split_scope
    base = "test_libero.py::test_libero_task"
    assert split(None, f"{base}[libero_10-03-s17]") == split(None, f"{base}[libero_10-03-s0]")
    assert split(None, f"{base}[libero_10-03-s0]") == f"{base}[libero_10-03]"
    assert split(None, f"{base}[libero_10-03-s0]") != split(None, f"{base}[libero_10-04-s0]")
    assert split(None, f"{base}[libero_10-03]") == f"{base}[libero_10-03]"  # fast mode
