"""Full mode's cases: one per (entry, released init state), in native order, with its
own protocol identity, a partial label for subsets and a refusal for unvalidated suites."""

from __future__ import annotations

import pytest

from pytest_libero.catalog import validation
from pytest_libero.catalog.entries import load_catalog
from pytest_libero.catalog.selection import SelectionRequest, parse_init_states, select
from pytest_libero.catalog.validation import refuse_unvalidated, validated_suites
from pytest_libero.config.plan import make_plan
from pytest_libero.config.profiles import load_profile
from pytest_libero.protocol.errors import SetupError

ALL_PASSED = {"suites": {s: {"passed": True} for s in
                         ("libero_spatial", "libero_object", "libero_goal", "libero_90", "libero_10")}}


@pytest.fixture
def validated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every suite validated, whatever the committed report says (selection logic only)."""
    monkeypatch.setattr(validation, "load_validation", lambda: ALL_PASSED)


def ids(request: SelectionRequest) -> list[str]:
    return [e.case_id for e in select(load_catalog(), request)]


def test_full_mode_is_every_state_task_then_state(validated: None) -> None:
    cases = ids(SelectionRequest(mode="full"))
    assert len(cases) == 100
    assert cases[:3] == ["libero_10-00-s0", "libero_10-00-s1", "libero_10-00-s2"]
    assert cases[49:52] == ["libero_10-00-s49", "libero_10-01-s0", "libero_10-01-s1"]
    assert len(ids(SelectionRequest("all", mode="full"))) == 6500
    per_suite = SelectionRequest("task_coverage", "libero_90", tuple(range(90)), mode="full")
    assert len(ids(per_suite)) == 4500


def test_a_case_knows_its_task_and_state(validated: None) -> None:
    case = select(load_catalog(), SelectionRequest("development", task_ids=(3,), mode="full",
                                                   init_states=(17,)))[0]
    assert (case.case_id, case.task_id, case.state) == ("libero_10-03-s17", "libero_10-03", 17)
    assert case.as_dict()["init_state"] == 17
    fast = load_catalog().suite_entries("libero_10")[3]
    assert fast.case_id == "libero_10-03" and "init_state" not in fast.as_dict()


def test_init_states_subset_and_its_errors(validated: None) -> None:
    assert parse_init_states("0,17,49") == (0, 17, 49)
    assert parse_init_states("0-2, 9") == (0, 1, 2, 9)
    request = SelectionRequest(mode="full", init_states=(0, 17, 49))
    assert ids(request) == [f"libero_10-0{t}-s{s}" for t in (0, 1) for s in (0, 17, 49)]
    assert request.partial_states and not SelectionRequest(mode="full").partial_states
    assert SelectionRequest(mode="full", init_states=tuple(range(50))).partial_states is False
    for bad, words in (("50", "0-49; got [50]"), ("x", "cannot read 'x'"), ("", "got none")):
        with pytest.raises(SetupError, match=words.replace("[", r"\[").replace("]", r"\]")):
            parse_init_states(bad)


def test_plan_says_why_a_full_run_is_partial(validated: None) -> None:
    profile = load_profile("zero")

    def plan(**kw: object) -> list[str]:
        selection = SelectionRequest(mode="full", **kw)  # type: ignore[arg-type]
        return make_plan(profile, selection, budget_mode="horizon", adapter="libero",
                         render="consumed", video_stride=1).partial

    assert plan() == []
    assert plan(init_states=(0, 1, 2, 5)) == ["init states 0-2,5 of 0-49"]
    decisions = make_plan(profile, SelectionRequest(mode="full"), budget_mode="decisions",
                          adapter="libero", render="consumed", video_stride=1)
    assert decisions.partial == ["budget mode decisions, not the reference horizons"]
    assert decisions.evidence == "replayable"  # full mode's default evidence level
    fast = make_plan(profile, SelectionRequest(), adapter="libero", render="consumed", video_stride=1)
    assert fast.partial == [] and fast.evidence == "full"


def test_unvalidated_suites_are_refused_with_the_command_that_validates_them() -> None:
    report = {"suites": {"libero_10": {"passed": True}, "libero_goal": {"passed": False}}}
    assert validated_suites(report) == {"libero_10"}
    refuse_unvalidated(["libero_10"], report)
    with pytest.raises(SetupError) as refused:
        refuse_unvalidated(["libero_10", "libero_goal", "libero_90"], report)
    message = str(refused.value)
    assert "full mode is refused for libero_goal, libero_90" in message
    assert "release/validate_schedule.py" in message and "--libero-mode=fast" in message


def test_selection_refuses_a_suite_without_a_passing_validation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(validation, "load_validation", lambda: {"suites": {}})
    with pytest.raises(SetupError, match="full mode is refused for libero_10"):
        select(load_catalog(), SelectionRequest(mode="full"))
    assert ids(SelectionRequest()) == ["libero_10-00", "libero_10-01"]  # fast mode unaffected
