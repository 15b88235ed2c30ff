"""Whole runs that decide early (``--libero-decide``), without the simulator: the plugin
with a scripted adapter (tests/decide_adapter.py), so a case costs milliseconds.

What is checked is the plumbing around the maths (tested in test_decide_stats.py): the
order cases run in, that no case starts once the verdict is decided (without xdist, and
with two workers), the ``decided`` class in the summary, the exit code, the terminal
line, resume, merge, the recomputed decision, the Allure panel, the xdist scheduler, and
the usage errors.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from decided_runs import cases, read, run

from harness.runs import run_folder, run_records
from pytest_libero.config.decide import drawn_order, random_head, running_order
from pytest_libero.config.decide_scheduling import DecideScheduling, units_of
from pytest_libero.report.allure import environment_items
from pytest_libero.results.decider import check_decision

pytest_plugins = ["pytester"]

@pytest.fixture(scope="module")
def exact_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """Five cases that all fail, a 50% gate: decided after three."""
    where = tmp_path_factory.mktemp("exact")
    done = run(where, "--libero-task-ids=0-4", "--libero-min-success=0.5", "--libero-decide=exact")
    return run_folder(where / "libero-results"), done


def test_exact_stops_once_no_outcome_left_can_change_the_verdict(
        exact_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    folder, done = exact_run
    assert done.returncode == 1, done.stdout + done.stderr
    assert [r["case"] for r in run_records(folder)] == cases(range(3))  # native order
    summary = read(folder, "summary.json")
    assert summary["counts"]["decided"] == 2 and summary["counts"]["unattempted"] == 0
    assert summary["decided"] == cases(range(3, 5))
    decision = summary["decision"]
    assert (decision["mode"], decision["verdict"], decision["decided_after"], decision["of"]) == (
        "exact", "fail", 3, 5)
    assert decision["interval"] == {"low": 0.0, "high": 0.4, "kind": "certain", "over": 3}
    assert read(folder, "decision.json")["verdict"] == "fail"
    assert "decided after 3 of 5: FAIL (exact; min-success fail: 0 successes so far, at most 2 " \
           "possible, 50.0% needed)" in done.stdout
    assert "min-success gate FAILED: decided after 3 of 5 cases (exact)" in done.stdout
    assert read(folder, "run.json")["decide"]["order"] == cases(range(5))


def test_a_success_passes_a_half_gate_after_one_case(tmp_path: Path) -> None:
    done = run(tmp_path, "--libero-task-ids=0-1", "--libero-min-success=0.5",
               "--libero-decide=exact", success="0,1")
    assert done.returncode == 0, done.stdout + done.stderr
    folder = run_folder(tmp_path / "libero-results")
    assert [r["case"] for r in run_records(folder)] == cases(range(1))
    summary = read(folder, "summary.json")
    assert summary["decision"]["verdict"] == "pass" and summary["counts"]["decided"] == 1
    assert summary["gates"][0]["passed"]


def test_anytime_runs_the_drawn_order_and_stops_on_the_betting_test(tmp_path: Path) -> None:
    """No xdist: the cases run exactly in the drawn order, up to the decision."""
    done = run(tmp_path, "--libero-task-ids=0-89", "--libero-min-success=0.5",
               "--libero-decide=anytime", "--libero-order-seed=5")
    assert done.returncode == 1, done.stdout + done.stderr
    folder = run_folder(tmp_path / "libero-results")
    order = drawn_order(cases(range(90)), 5)
    block = read(folder, "run.json")["decide"]
    assert (block["order"], block["order_seed"], block["alpha"]) == (list(order), 5, 0.05)
    ran = [r["case"] for r in run_records(folder)]
    decision = read(folder, "summary.json")["decision"]
    assert ran == list(order[:decision["decided_after"]])
    assert decision["gates"][0]["by"] == "anytime" and decision["decided_after"] < 15
    assert decision["gates"][0]["statistic"]["wealth_fail"] >= 20
    assert "the rate is below 50.0%" in done.stdout


def test_anytime_under_xdist_hands_out_no_case_after_the_decision(tmp_path: Path) -> None:
    """Two workers: each holds at most two cases, so past the decision only what was
    already held may run (and the held next case is skipped as decided)."""
    done = run(tmp_path, "--libero-task-ids=0-39", "--libero-min-success=0.9",
               "--libero-decide=anytime", "--libero-order-seed=3", "-n", "2")
    assert done.returncode == 1, done.stdout + done.stderr
    folder = run_folder(tmp_path / "libero-results")
    order = drawn_order(cases(range(40)), 3)
    decision = read(folder, "summary.json")["decision"]
    ran = {r["case"] for r in run_records(folder)}
    assert decision["verdict"] == "fail" and decision["decided_after"] < 10
    bound = decision["gates"][0]["statistic"]["exact"]
    finished = bound["successes"] + bound["failures"] + bound["errored"]  # at the decision
    assert ran <= set(order[:finished + 4])  # handed out in order, two held per worker
    summary = read(folder, "summary.json")
    assert summary["counts"]["decided"] == 40 - len(ran)


def test_a_workers_held_case_is_skipped_as_decided(tmp_path: Path) -> None:
    """Worker A holds cases 0 and 2, B cases 1 and 3. Case 1 fails a 100% gate while A is
    still in case 0 (slow): when A's turn comes to case 2, the run is decided."""
    done = run(tmp_path, "--libero-task-ids=0-3", "--libero-min-success=1",
               "--libero-decide=exact", "-n", "2", "-rs", success="0", slow="0")
    assert done.returncode == 1, done.stdout + done.stderr
    ran = [r["case"] for r in run_records(run_folder(tmp_path / "libero-results"))]
    assert "libero_90-02" not in ran and {"libero_90-00", "libero_90-01"} <= set(ran)
    assert "not run: decided after" in done.stdout


def test_resuming_a_decided_run_says_it_is_complete(
        exact_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path) -> None:
    folder, _ = exact_run
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    done = run(tmp_path, "--libero-task-ids=0-4", "--libero-min-success=0.5",
               "--libero-decide=exact", f"--libero-resume={copy}")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "was decided after 3 of 5: FAIL" in done.stderr
    assert "the run is complete: no case is left to run" in done.stderr
    assert len(run_records(copy)) == 3
    refused = run(tmp_path, "--libero-task-ids=0-4", "--libero-min-success=0.5",
                  f"--libero-resume={copy}")
    assert refused.returncode == 4
    assert "the early decision (--libero-decide) differs" in refused.stderr


def test_merge_keeps_a_decision_and_refuses_to_mix_decided_and_undecided_runs(
        exact_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path) -> None:
    folder, _ = exact_run
    from pytest_libero import cli

    merged = tmp_path / "merged"
    assert cli.main(["merge", str(folder), "--out", str(merged)]) == 0
    summary = read(merged, "summary.json")
    assert summary["counts"]["decided"] == 2 and summary["decision"]["decided_after"] == 3
    other = tmp_path / "undecided"
    other.mkdir()
    run(other, "--libero-task-ids=0-4")
    plain = read(run_folder(other / "libero-results"), "summary.json")
    assert "decided" not in plain["counts"] and "decision" not in plain  # no such class
    with pytest.raises(SystemExit) as refused:
        cli.main(["merge", str(folder), str(run_folder(other / "libero-results")),
                  "--out", str(tmp_path / "mixed")])
    assert refused.value.code == 2
    assert not (tmp_path / "mixed").exists()


def test_the_decision_recomputed_from_the_records_is_checked_against_the_recorded(
        exact_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path) -> None:
    folder, _ = exact_run
    found = check_decision(read(folder, "run.json"), run_records(folder), folder)  # type: ignore[arg-type]
    assert found is not None and found["agrees"] is True
    assert found["recomputed"] == {"mode": "exact", "verdict": "fail", "decided_after": 3, "of": 5}
    copy = tmp_path / "tampered"
    shutil.copytree(folder, copy)
    summary = read(copy, "summary.json")
    summary["decision"]["decided_after"] = 2
    (copy / "summary.json").write_text(json.dumps(summary))
    found = check_decision(read(copy, "run.json"), run_records(copy), copy)  # type: ignore[arg-type]
    assert found is not None and found["agrees"] is False


def test_the_allure_panel_says_whether_the_run_was_decided() -> None:
    run_json: dict[str, Any] = {"run_id": "r", "plan": {}, "decide": {"mode": "exact"}}
    assert ("decided", "no: --libero-decide=exact ran every case") in environment_items(run_json)
    run_json["decision"] = {"line": "decided after 3 of 5: FAIL (exact; ...)"}
    assert ("decided", "decided after 3 of 5: FAIL (exact; ...)") in environment_items(run_json)
    assert not any(k == "decided" for k, _ in environment_items({"run_id": "r", "plan": {}}))


@pytest.mark.parametrize(("args", "words"), [
    (("--libero-decide=exact",), "no gate is asked for"),
    (("--libero-decide=soon", "--libero-min-success=0.5"), "allowed: exact, anytime"),
    (("--libero-decide=anytime", "--libero-min-success=0.5", "--libero-alpha=0"),
     "--libero-alpha='0' must be a number between 0 and 1, exclusive"),
    (("--libero-decide=anytime", "--libero-min-success=0.5", "--libero-alpha=1"),
     "--libero-alpha='1' must be a number between 0 and 1, exclusive"),
    (("--libero-decide=anytime", "--libero-baseline=x", "--libero-baseline-margin=-0.1"),
     "--libero-baseline-margin='-0.1' must be a number at least 0"),
    (("--libero-decide=anytime", "--libero-min-success=0.5", "--libero-order-seed=1.5"),
     "--libero-order-seed='1.5' is not an integer"),
    (("--libero-decide=anytime", "--libero-min-success=0.5", "--libero-shard=1/2"),
     "cannot be used with --libero-shard: a shard sees only its own cases"),
    (("--libero-decide=exact", "--libero-min-success=0.5", "--libero-shard=1/2"),
     "cannot be used with --libero-shard"),
    (("--libero-alpha=0.1", "--libero-min-success=0.5"), "--libero-alpha need --libero-decide"),
    (("--libero-decide=exact", "--libero-min-success=0.5", "--libero-order-seed=3"),
     "apply to --libero-decide=anytime only"),
    (("--libero-decide=anytime", "--libero-min-success=0.5", "--libero-baseline-margin=0.1"),
     "--libero-baseline-margin applies to --libero-baseline"),
    (("--libero-decide=anytime", "--libero-min-success=0.5", "--libero-decide-score=progress"),
     "--libero-decide-score=progress compares this run with a baseline, case by case: add "
     "--libero-baseline=RUN_DIR"),
    (("--libero-decide=anytime", "--libero-baseline=x", "--libero-decide-score=partial"),
     "--libero-decide-score='partial': allowed: success, progress"),
    (("--libero-decide=exact", "--libero-baseline=x", "--libero-decide-score=progress"),
     "apply to --libero-decide=anytime only"),
    (("--libero-baseline=x", "--libero-decide-score=progress"), "need --libero-decide=anytime"),
])
def test_bad_decide_options_are_usage_errors(pytester: pytest.Pytester, args: tuple[str, ...],
                                             words: str) -> None:
    result = pytester.runpytest("--libero-profile=zero", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert words in result.stderr.str()
    assert not (pytester.path / "libero-results").exists()


def test_full_mode_runs_the_drawn_orders_head_then_native_order() -> None:
    native = [f"libero_10-{t:02d}-s{s}" for t in range(10) for s in range(50)]
    order = drawn_order(native, 1)
    running = running_order(order, native, "full")
    head = random_head(500)
    assert (head, random_head(6500), random_head(40)) == (200, 325, 40)
    assert running[:head] == order[:head]
    assert list(running[head:]) == [c for c in native if c not in set(order[:head])]
    assert running_order(order, native, "fast") == order


class Node:
    """What DecideScheduling asks of an xdist node."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.gateway = SimpleNamespace(id=name)
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent += indices

    def shutdown(self) -> None:
        self.shutting_down = True


def scheduler(nodeids: list[str], decided: list[bool]) -> tuple[DecideScheduling, Node, Node]:
    config = pytest.Config.__new__(pytest.Config)
    sched = DecideScheduling.__new__(DecideScheduling)
    sched.numnodes, sched.node2collection, sched.node2pending = 2, {}, {}
    sched.pending, sched.collection, sched.maxschedchunk = [], None, None
    sched.log, sched.config = (lambda *a: None), config
    sched.decided, sched.units, sched.node2unit = (lambda: decided[0]), [], {}
    a, b = Node("a"), Node("b")
    for node in (a, b):
        sched.add_node(node)
        sched.add_node_collection(node, nodeids)
    sched.schedule()
    return sched, a, b


def test_the_scheduler_hands_out_in_order_two_at_a_time_and_none_once_decided() -> None:
    ids = [f"t.py::test_libero_task[libero_90-{i:02d}]" for i in range(8)]
    decided = [False]
    sched, a, b = scheduler(ids, decided)
    assert (a.sent, b.sent) == ([0, 2], [1, 3])  # round robin: the first cases side by side
    sched.mark_test_complete(b, 1)
    assert b.sent == [1, 3, 4]
    decided[0] = True
    sched.mark_test_complete(a, 0)
    assert a.sent == [0, 2] and a.shutting_down
    assert sched.pending == [] and not sched.tests_finished  # b still holds two
    sched.mark_test_complete(b, 3)
    assert sched.tests_finished


def test_the_scheduler_keeps_a_tasks_consecutive_states_on_one_worker() -> None:
    ids = [f"t.py::test_libero_task[libero_10-00-s{s}]" for s in range(4)] + [
        f"t.py::test_libero_task[libero_10-01-s{s}]" for s in range(2)]
    assert units_of(ids) == [[0, 1, 2, 3], [4, 5]]
    drawn = [f"t.py::test_libero_task[{c}]" for c in (
        "libero_10-00-s6", "libero_10-00-s2", "libero_10-00-s2~camera1", "libero_10-00-s9",
        "libero_10-01-s9", "libero_10-01", "libero_10-01")]
    assert units_of(drawn) == [[0], [1, 2, 3], [4], [5], [6]]  # only what continues
    sched, a, b = scheduler(ids, [False])
    assert (a.sent, b.sent) == ([0, 1], [4, 5])
    sched.mark_test_complete(a, 0)
    assert a.sent == [0, 1, 2]
    crashed = sched.remove_node(a)  # a worker lost: what it held goes back first
    assert crashed == ids[1] and sched.units[0] == [2, 3]


SUCCEEDS = ",".join(str(task) for task in range(10))
FURTHER = ",".join(str(task) for task in range(10, 40))
"""Both runs succeed at tasks 0-9; the baseline's 30 failures each held one goal
predicate of two (score 0.5), this run's none (score 0)."""


@pytest.fixture(scope="module")
def further(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("further")
    run(where, "--libero-task-ids=0-39", success=SUCCEEDS, held=FURTHER)
    return run_folder(where / "libero-results")


def test_on_score_a_regression_success_cannot_see_is_decided(further: Path, tmp_path: Path) -> None:
    """On success the two runs are equal: McNemar's exact rule passes the gate once enough
    of the baseline's successes are kept. On score this one is worse, and the betting test
    fails it first."""
    args = ("--libero-task-ids=0-39", f"--libero-baseline={further}", "--libero-decide=anytime",
            "--libero-order-seed=11")
    (tmp_path / "success").mkdir()
    (tmp_path / "score").mkdir()
    on_success = run(tmp_path / "success", *args, success=SUCCEEDS, held="")
    on_score = run(tmp_path / "score", *args, "--libero-decide-score=progress", success=SUCCEEDS,
                   held="")
    assert read(further, "summary.json")["overall"]["score"]["mean"] == pytest.approx(0.625)
    plain = read(run_folder(tmp_path / "success" / "libero-results"), "summary.json")["decision"]
    assert plain["verdict"] == "pass" and plain["gates"][0]["by"] == "exact", on_success.stdout
    assert "baseline gate passed" in on_success.stdout, on_success.stdout
    assert "baseline gate FAILED" in on_score.stdout, on_score.stdout + on_score.stderr
    folder = run_folder(tmp_path / "score" / "libero-results")
    block = read(folder, "run.json")["decide"]
    assert block["score"] == "progress" and block["baseline_scores"]["libero_90-10"] == 0.5
    decision = read(folder, "summary.json")["decision"]
    assert (decision["verdict"], decision["gates"][0]["by"], decision["score"]) == (
        "fail", "anytime", "progress")
    assert decision["decided_after"] < plain["decided_after"], (decision, plain)
    assert len(run_records(folder)) == decision["decided_after"]
    assert "the baseline compared on partial-credit score" in on_score.stdout
    assert "worse than the baseline, wealth" in on_score.stdout
    found = check_decision(read(folder, "run.json"), run_records(folder), folder)  # type: ignore[arg-type]
    assert found is not None and found["agrees"] is True


def test_on_score_a_baseline_without_scores_is_refused_before_any_case(tmp_path: Path) -> None:
    (tmp_path / "old").mkdir()
    run(tmp_path / "old", "--libero-task-ids=0-2")  # recorded without goal progress
    baseline = run_folder(tmp_path / "old" / "libero-results")
    done = run(tmp_path, "--libero-task-ids=0-2", f"--libero-baseline={baseline}",
               "--libero-decide=anytime", "--libero-decide-score=progress", held="")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "the baseline run has no completed case of this selection with a score" in done.stderr
    assert not (tmp_path / "libero-results").exists()
