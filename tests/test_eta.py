"""How long a running run has left (issue 53, part 4): the plan's cost model fed the
run's own finished cases, by hand; the finished lines and the live line carrying it. A
real run's finished lines are tests/test_progress.py's."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from synthetic import synthetic_record

from pytest_libero.planning.model import CaseShape
from pytest_libero.report.eta import Remaining, duration_text, eta_text
from pytest_libero.report.progress import LiveLine, Status
from pytest_libero.results.feed import case_of


def shapes(count: int) -> list[CaseShape]:
    return [CaseShape(f"libero_10-{n:02d}", f"libero_10-{n:02d}", None, 100, 10, 1.0)
            for n in range(count)]


def record(case: str, outcome: str = "failure", *, setup_s: float = 2.0,
           episode_s: float = 10.0, controls: int = 100) -> dict[str, Any]:
    """What a Tally reads of a case's record: one render per control, no waiting."""
    return {"case": case, "outcome": outcome, "timings": {"setup_s": setup_s, "episode_s": episode_s},
            "counters": {"executed_controls": controls, "policy_calls": controls // 10,
                         "first_success_control": controls if outcome == "success" else None},
            "renders": {"agentview": controls}, "budget": {"control_cap": 100}, "chunks": []}


def test_nothing_is_estimated_before_a_case_completes() -> None:
    remaining = Remaining(shapes(3), workers=1, prebuild=False)
    assert remaining.seconds_left(0.0) is None
    remaining.finish("libero_10-00", {**record("libero_10-00"), "outcome": "errored"})
    assert remaining.seconds_left(0.0) is None and remaining.counts == (1, 3)
    assert eta_text(remaining, 0.0) == "1 of 3 done"


def two_started_one_done(count: int, *, prebuild: bool = False) -> Remaining:
    """``count`` cases on two workers: 00 and 01 started at 0, 00 finished (12 s a case:
    2 s set-up, 10 s episode)."""
    remaining = Remaining(shapes(count), workers=2, prebuild=prebuild)
    for case in ("libero_10-00", "libero_10-01"):
        remaining.start(case, 0.0)
    remaining.finish("libero_10-00", record("libero_10-00"))
    return remaining


def test_the_unfinished_cases_over_the_workers_less_what_the_running_ones_ran() -> None:
    remaining = two_started_one_done(4)
    # At 5 s the running case holds its worker 7 s more, the other worker is free: 02 on it
    # ends at 12, 03 after the running one at 19.
    assert remaining.seconds_left(5.0) == pytest.approx(19.0)
    assert eta_text(remaining, 5.0) == "1 of 4 done, about 19s left"
    assert eta_text(remaining, 5.0, short=True) == "1/4, ~19s left"
    remaining.start("libero_10-02", 12.0)
    remaining.start("libero_10-03", 12.0)
    assert remaining.seconds_left(30.0) == 0.0  # overdue: never negative
    # A start told after "now" (the controller's clock behind a worker's) holds no more
    # than a whole case.
    assert remaining.seconds_left(6.0) == pytest.approx(12.0)


def test_an_unstarted_case_waits_for_a_worker_though_the_others_run_late() -> None:
    # -n 2 over three cases: 00 and 01 started together; 00 ended at 12 s, 01 is about to
    # end, and 02 has not started. A mean over the running cases said "0s left"; 02 is 12 s.
    remaining = two_started_one_done(3)
    assert remaining.seconds_left(12.0) == pytest.approx(12.0)
    assert eta_text(remaining, 12.0) == "1 of 3 done, about 12s left"
    remaining.start("libero_10-02", 12.0)  # now two run at once: the later one sets the end
    assert remaining.seconds_left(15.0) == pytest.approx(9.0)


def test_prebuild_hides_a_set_up_behind_the_episode_before_it() -> None:
    remaining = Remaining(shapes(3), workers=1, prebuild=True)
    remaining.finish("libero_10-00", record("libero_10-00"))
    # Two left on one worker: the first set-up (2 s), two episodes, the second set-up hidden.
    assert remaining.seconds_left(0.0) == pytest.approx(22.0)
    remaining.start("libero_10-01", 0.0)  # behind a running episode, the next set-up hides too
    assert remaining.seconds_left(4.0) == pytest.approx(8.0 + 10.0)


def test_successes_end_early_as_the_run_s_own_did() -> None:
    remaining = Remaining(shapes(3), workers=1, prebuild=False)
    remaining.finish("libero_10-00", record("libero_10-00", "success", controls=50, episode_s=5.0))
    remaining.finish("libero_10-01", record("libero_10-01", controls=100))
    # Half of the cases succeeded, at half their cap: the last is expected at 75 controls,
    # 0.1 s each, after a 2 s set-up.
    assert remaining.seconds_left(0.0) == pytest.approx(2.0 + 7.5)


def test_cases_outside_the_plan_are_not_counted() -> None:
    remaining = Remaining(shapes(2), workers=1, prebuild=False)
    remaining.start("", 0.0)
    remaining.finish("test_something_else", None)
    assert remaining.counts == (0, 2) and not remaining.running


@pytest.mark.parametrize(("seconds", "text"), [
    (0.4, "0s"), (45.2, "45s"), (59.6, "1m00s"), (200, "3m20s"), (3600, "1h00m"), (3900, "1h05m"),
])
def test_durations_read_as_a_person_says_them(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


def test_a_case_s_id_is_read_off_its_node_id() -> None:
    assert case_of("test_libero.py::test_case[libero_10-00]") == "libero_10-00"
    assert case_of("suite/test_x.py::test_y") == ""


def test_the_live_line_leads_with_what_is_left_while_cases_run() -> None:
    status = Status("libero_10-01", 100, started=0.0, executed_controls=40)
    board = [("gw1", status)]
    line = LiveLine.__new__(LiveLine)
    line.board, line.eta = (lambda: board), (lambda: "1/4, ~19s left")
    assert re.fullmatch(r"1/4, ~19s left \| gw1 libero_10-01 40/100 ctl, 0 calls, \d+s", line._text())
    line.eta = lambda: ""
    assert line._text().startswith("gw1 libero_10-01 ")
    line.board = lambda: []
    line.eta = lambda: "1/4, ~19s left"
    assert line._text() == ""  # nothing running, nothing drawn


ETA_CONFTEST = """
import time
from pytest_libero.report.eta import Remaining
from pytest_libero.planning.model import CaseShape
from pytest_libero.report.progress import FinishedLines, RunClock
from pytest_libero.results.feed import CaseFeed

def pytest_configure(config):
    shapes = [CaseShape(c, c, None, 100, 10, 1.0) for c in ("a", "b", "c")]
    clock = RunClock(Remaining(shapes, workers=1, prebuild=False), long=True)
    config.pluginmanager.register(clock, "clock")
    config.pluginmanager.register(FinishedLines(config, left_open=False, eta=clock.text), "finished")
    config.pluginmanager.register(CaseFeed(config.hook, ("a", "b", "c")), "feed")
"""
ETA_TESTS = """
import json
import pytest

RECORD = json.loads({record!r})

@pytest.mark.parametrize("case", ["a", "b", "c"])
def test_case(case, record_property):
    record_property("libero_record", json.dumps(RECORD | {"case": case, "summary": f"{case} ok"}))
"""


def test_each_finished_line_says_what_is_left(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(ETA_CONFTEST)
    whole = dict(synthetic_record("libero_10-00", "failure")) | record("x")  # a record the feed reads
    pytester.makepyfile(test_estimated=ETA_TESTS.replace("{record!r}", repr(json.dumps(whole))))
    result = pytester.runpytest("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=3)
    result.stdout.re_match_lines([r"a finished in .*: a ok \(1 of 3 done, about 24s left\)",
                                  r"b finished in .*: b ok \(2 of 3 done, about 12s left\)",
                                  r"c finished in .*: c ok \(3 of 3 done\)"])
