"""Goal progress and the partial-credit score without a simulator (issue 52): the
tracker's summary of each control's answers, the BDDL's spelling of the predicates, the
score's rule, the record check, the bounded-score interval, and the score where success
is reported (summary.json, the terminal, the robustness pairs, the trackers, Allure's
page). The real episodes are tests/test_goal_progress.py's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from synthetic import synthetic_record

from pytest_libero.episode.record import record_from_json
from pytest_libero.export.tracked import run_metrics
from pytest_libero.goals.progress import GoalTracker, written_predicates
from pytest_libero.goals.score import LADDER, case_score
from pytest_libero.report.allure import _description
from pytest_libero.report.figures import robustness_svg
from pytest_libero.report.terminal import summary_lines
from pytest_libero.results.betting import bounded_mean_interval
from pytest_libero.results.summary import summarize
from pytest_libero.safety.verdict import ENGAGEMENT

BDDL = """(define (problem LIBERO_Living_Room_Tabletop_Manipulation)
  (:goal
    (And (In alphabet_soup_1 basket_1_contain_region) (In tomato_sauce_1 basket_1_contain_region))
  )
)"""
PARSED = [["in", "alphabet_soup_1", "basket_1_contain_region"],
          ["in", "tomato_sauce_1", "basket_1_contain_region"]]


def progress(most: int, count: int = 2, **extra: Any) -> dict[str, Any]:
    return {"predicates": [f"(In thing_{i} basket)" for i in range(count)],
            "held_at_start": [False] * count, "held_at_end": [False] * count,
            "first_held": [None] * count, "most_held": most, "controls": 9, **extra}


def test_the_tracker_keeps_first_control_most_at_once_and_the_end() -> None:
    tracker = GoalTracker(("(A)", "(B)", "(C)"), (False, False, True))
    for control, held in enumerate([(True, False, False), (True, True, False), (False, True, False),
                                    (False, False, False)], start=1):
        tracker.sample(control, held)
    assert tracker.as_record() == {
        "predicates": ["(A)", "(B)", "(C)"], "held_at_start": [False, False, True],
        "held_at_end": [False, False, False], "first_held": [1, 2, None], "most_held": 2,
        "controls": 4}
    assert not tracker.all_held
    with pytest.raises(ValueError, match="2 answers for 3 goal predicates"):
        tracker.sample(5, (True, True))


def test_predicates_are_spelled_as_the_bddl_writes_them() -> None:
    assert written_predicates(BDDL, PARSED) == ("(In alphabet_soup_1 basket_1_contain_region)",
                                                "(In tomato_sauce_1 basket_1_contain_region)")
    # A goal the text does not match (another file, a rewritten goal): the parsed form.
    assert written_predicates(BDDL.replace("tomato", "milk"), PARSED) == (
        "(in alphabet_soup_1 basket_1_contain_region)", "(in tomato_sauce_1 basket_1_contain_region)")
    assert written_predicates("(define)", [["open", "drawer_1"]]) == ("(open drawer_1)",)


@pytest.mark.parametrize(("outcome", "record", "engagement", "expected"), [
    ("success", progress(2), "success", 1.0),
    ("failure", progress(1), "manipulated", 0.5),  # two predicates: the fraction, not the ladder
    ("failure", progress(1, count=3), None, 1 / 3),
    ("failure", progress(0), "reached", 0.0),
    ("failure", progress(0, count=1), "idle", 0.0),
    ("failure", progress(0, count=1), "reached", 0.25),
    ("failure", progress(0, count=1), "manipulated", 0.5),
    ("failure", progress(0, count=1), None, 0.0),  # no monitor: no ladder to climb
    ("errored", progress(1), "manipulated", None),
    ("failure", None, "manipulated", None),  # an older record: no score
])
def test_the_score_rule(outcome: str, record: dict[str, Any] | None, engagement: str | None,
                        expected: float | None) -> None:
    assert case_score(outcome, record, engagement) == expected


def test_the_ladder_has_the_engagement_rungs_in_order() -> None:
    assert tuple(LADDER) == ENGAGEMENT and list(LADDER.values()) == sorted(LADDER.values())


@pytest.mark.parametrize(("change", "said"), [
    ({"most_held": 3}, "most_held '3', not a count from 0 to 2"),
    ({"first_held": [0, None]}, "no first_held control"),
    ({"held_at_end": [True]}, "no held_at_end answer"),
    ({"held_at_start": [1, 0]}, "no held_at_start answer"),
    ({"predicates": "(In a b)"}, "no list of predicates"),
])
def test_a_damaged_progress_record_is_refused_naming_it(change: dict[str, Any], said: str) -> None:
    record = synthetic_record("libero_10-00", "failure", progress={**progress(1), **change}, score=0.5)
    with pytest.raises(ValueError, match="'progress'") as raised:
        record_from_json(record)
    assert said in str(raised.value)
    with pytest.raises(ValueError, match="not a score from 0 to 1"):
        record_from_json(synthetic_record("libero_10-00", "failure", progress=progress(1), score=1.5))
    assert record_from_json(synthetic_record("libero_10-00", "errored", progress=progress(1), score=None,
                                             error={"kind": "policy", "cause": "x", "message": "m"}))


def test_the_bounded_interval_covers_the_mean_and_is_valid_in_any_order() -> None:
    rng = np.random.default_rng(7)
    misses = 0
    for _ in range(200):
        draws = rng.choice([0.0, 0.25, 0.5, 1.0], p=[0.4, 0.2, 0.2, 0.2], size=40)
        low, high = bounded_mean_interval(sorted(draws.tolist()), 0.05)  # sorted: the worst order
        misses += not low <= 0.35 <= high
    assert misses <= 10, misses  # 5% allowed: the interval is conservative
    assert bounded_mean_interval([], 0.05) == (0.0, 1.0)
    low, high = bounded_mean_interval([0.5] * 200, 0.05)
    assert 0.4 < low < 0.5 < high < 0.6


def scored_records() -> dict[str, Any]:
    records = {
        "libero_10-00": synthetic_record("libero_10-00", "success", progress=progress(2), score=1.0),
        "libero_10-01": synthetic_record("libero_10-01", "failure", progress=progress(1), score=0.5),
        "libero_10-02": synthetic_record("libero_10-02", "failure"),  # an older record
        "libero_10-00~position1": synthetic_record("libero_10-00~position1", "failure",
                                                   progress=progress(1), score=0.5),
    }
    records["libero_10-00~position1"]["entry"].update(perturbation={"kind": "position", "level": 1},
                                                      twin="libero_10-00")
    return records


def test_the_summary_terminal_and_trackers_report_the_score() -> None:
    records = scored_records()
    summary = summarize(list(records), records, profile="zero")
    native = summary["suites"]["libero_10"]["score"]
    assert native["scored"] == 2 and native["unscored"] == 1 and native["mean"] == 0.75
    assert native["interval95"][0] <= 0.75 <= native["interval95"][1]
    overall = summary["overall"]["score"]
    assert overall["scored"] == 3 and overall["mean"] == pytest.approx(2 / 3)
    pairs = summary["robustness"]["kinds"]["generated:position"]["paired"]
    assert pairs["score"] == {"pairs": 1, "twin_mean": 1.0, "perturbed_mean": 0.5, "drop_points": 50.0}
    lines = summary_lines(summary)
    low, high = native["interval95"]
    assert any(line.startswith("libero_10: 1/3") and line.endswith(
        f"; score 0.75 (95% {low:.2f}-{high:.2f}, 1 unscored)") for line in lines), lines
    assert any("drop +100.0 pts" in line and line.endswith("; score drop +50.0 pts") for line in lines), lines
    assert "; score drop +50.0 pts" in robustness_svg(summary)
    metrics = run_metrics(summary)
    assert metrics["suites/libero_10/score"] == 0.75 and metrics["score"] == pytest.approx(2 / 3)
    assert metrics["robustness/generated-position/score_drop_points"] == 50.0


def test_without_scores_the_summary_is_as_it_was() -> None:
    records = {"libero_10-00": synthetic_record("libero_10-00", "success")}
    summary = summarize(list(records), records, profile="zero")
    assert "score" not in summary["overall"] and "score" not in summary["suites"]["libero_10"]
    assert not any("score" in line for line in summary_lines(summary))


def test_allure_s_page_says_which_predicates_held_and_when() -> None:
    record = synthetic_record("libero_10-01", "failure", score=0.5, progress={
        **progress(1), "held_at_end": [True, False], "first_held": [40, None]})
    text = _description(record)
    assert "at most 1 of 2 held at once; score 0.5" in text
    assert "| `(In thing_0 basket)` | no | yes | 40 |" in text
    assert "| `(In thing_1 basket)` | no | no | never |" in text


def test_the_decide_block_keeps_the_baseline_s_scores_and_reads_them_strictly() -> None:
    from pytest_libero.results.decision import DecideSpec, draw

    spec = DecideSpec(mode="anytime", order=("libero_10-00",), alpha=0.05, order_seed=1,
                      baseline_alpha=0.05, baseline={"libero_10-00": "failure"}, score="progress",
                      baseline_scores={"libero_10-00": 0.5})
    block = spec.as_dict()
    assert (block["score"], block["baseline_scores"]) == ("progress", {"libero_10-00": 0.5})
    assert DecideSpec.from_dict(block) == spec
    plain = DecideSpec(mode="anytime", order=("libero_10-00",), alpha=0.05, order_seed=1)
    assert "score" not in plain.as_dict() and DecideSpec.from_dict(plain.as_dict()).score == "success"
    for damage, said in (({"score": "partial"}, "score is 'partial'"),
                         ({"baseline_scores": {"libero_10-00": 1.5}}, "outside [0, 1]"),
                         ({"baseline_scores": ["libero_10-00"]}, "not a table of case ids to scores")):
        with pytest.raises(ValueError, match="decide block does not read") as raised:
            DecideSpec.from_dict({**block, **damage})
        assert said in str(raised.value)
    record = synthetic_record("libero_10-00", "failure", progress=progress(0), score=0.0)
    assert draw("baseline", record, "failure", 0.5) == 0.25  # (0 - 0.5 + 1) / 2
    assert draw("baseline", record, "failure") == 0.5  # on success: the same outcome
    older = synthetic_record("libero_10-00", "failure")
    assert draw("baseline", older, "failure", 0.5) == "libero_10-00 has no score"


def test_a_case_errored_after_it_ended_keeps_its_course_and_loses_its_score() -> None:
    from pytest_libero.audit.agreement import score_difference
    from pytest_libero.episode.case import mark_errored

    record = synthetic_record("libero_10-00", "success", progress=progress(2), score=1.0,
                              engagement="success")
    mark_errored(record, OSError("no space left on device"), kind="evidence")
    assert (record["outcome"], record["native_outcome"], record["score"]) == ("errored", "success", None)
    assert record["progress"]["most_held"] == 2 and score_difference(record) is None
    record["score"] = 1.0
    difference = score_difference(record)
    assert difference is not None and (difference.recorded, difference.other) == (1.0, None)
