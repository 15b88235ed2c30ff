"""Full-mode results over synthetic records: summary.json, the terminal, published figures.

No simulator: records are shaped like ``episode.case``'s, as the recorder, the merge
command and the terminal summary read them. Fast mode is checked to be exactly what
it was before full mode (same keys, same lines, no published figures).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from synthetic import synthetic_record

from pytest_libero.catalog.case_id import CaseId
from pytest_libero.catalog.selection import SelectionRequest
from pytest_libero.config.plan import Gates, make_plan
from pytest_libero.config.profiles import load_profile
from pytest_libero.episode.record import CaseRecord
from pytest_libero.report.allure import case_tree
from pytest_libero.report.terminal import PER_TASK_LINES, format_rate, summary_lines
from pytest_libero.results.folder import RunFolder
from pytest_libero.results.merge import merge_runs
from pytest_libero.results.published import NOTE, load_published
from pytest_libero.results.rates import success_rate, wilson_interval
from pytest_libero.results.recorder import Recorder
from pytest_libero.results.summary import summarize

ALL_STATES = list(range(50))
PARTIAL = ["init states 0,17 of 0-49", "budget mode decisions, not the reference horizons"]


record = synthetic_record


def full_cases(suite: str, tasks: range | list[int], states: list[int] = ALL_STATES) -> list[str]:
    return [f"{suite}-{t:02d}-s{s}" for t in tasks for s in states]


def outcome_of(case: str) -> str:
    """Deterministic mix: a failure when (task + state) is a multiple of 5."""
    case_id = CaseId.parse(case)
    return "failure" if (case_id.index + (case_id.state or 0)) % 5 == 0 else "success"


def full_summary(selected: list[str], records: dict[str, CaseRecord] | None = None,
                 partial: list[str] | None = None, states: list[int] = ALL_STATES,
                 state_fed: str | None = None) -> dict[str, Any]:
    if records is None:
        records = {c: record(c, outcome_of(c)) for c in selected}
    return summarize(selected, records, mode="full", partial=partial or [],
                     selection={"mode": "full", "init_states": states}, state_fed=state_fed,
                     run_id="r", profile="zero", evidence_class="infrastructure",
                     protocol_identity="libero-protocol-full-v1:x")


# --- fast mode stays as it was -----------------------------------------------------------


FAST_CASES = ["libero_10-00", "libero_10-01", "libero_10-02", "libero_goal-03"]
FAST_RECORDS: dict[str, CaseRecord] = {
    "libero_10-00": record("libero_10-00", "success"),
    "libero_10-01": record("libero_10-01", "failure"),
    "libero_goal-03": record("libero_goal-03", "errored"),
}


def test_fast_mode_summary_is_unchanged() -> None:
    plain = summarize(FAST_CASES, FAST_RECORDS, run_id="r", profile="zero")
    assert plain == {
        "run_id": "r", "profile": "zero",
        "counts": {"selected": 4, "completed": 2, "success": 1, "failure": 1, "errored": 1,
                   "unattempted": 1},
        "overall": {"successes": 1, "completed": 2, "rate": 0.5,
                    "wilson95": list(wilson_interval(1, 2))},
        "suites": {
            "libero_10": {"successes": 1, "completed": 2, "rate": 0.5,
                          "wilson95": list(wilson_interval(1, 2))},
            "libero_goal": {"successes": 0, "completed": 0, "rate": None, "wilson95": [0.0, 1.0]},
        },
        "errored": ["libero_goal-03"],
        "unattempted": ["libero_10-02"],
        "clipping": {"cases": 0, "chunks": 0, "values": 0, "max_excess": 0.0},
    }
    # What the recorder passes for a fast plan changes nothing: no new key.
    selection = SelectionRequest("development", None, (0, 1, 2)).as_dict()
    assert summarize(FAST_CASES, FAST_RECORDS, mode="fast", partial=[], selection=selection,
                     run_id="r", profile="zero") == plain


def test_fast_mode_terminal_lines_are_unchanged_and_show_no_published_figures() -> None:
    summary = summarize(FAST_CASES, FAST_RECORDS, profile="zero", evidence_class="infrastructure")
    assert summary_lines(summary) == [
        "profile zero (infrastructure evidence, not a capability claim)",
        "4 selected, 2 completed, 1 success, 1 failure, 1 errored, 1 unattempted",
        "libero_10: 1/2 = 50.0% (95% Wilson 9.5%-90.5%)",
        "libero_goal: no completed episode",
        "overall: 1/2 = 50.0% (95% Wilson 9.5%-90.5%)",
    ]
    assert not any("published" in line or "full mode" in line for line in summary_lines(summary))


# --- full mode: tasks, suites, overall -----------------------------------------------------


def test_full_mode_rates_per_task_suite_and_overall_with_wilson_intervals() -> None:
    selected = full_cases("libero_10", range(10))
    summary = full_summary(selected)
    assert summary["mode"] == "full" and summary["partial"] == []
    assert summary["init_states"] == ALL_STATES
    assert summary["counts"]["selected"] == 500 and summary["counts"]["completed"] == 500

    tasks = summary["tasks"]
    assert list(tasks) == [f"libero_10-{i:02d}" for i in range(10)]
    task = tasks["libero_10-03"]
    failures = sum(outcome_of(c) == "failure" for c in full_cases("libero_10", [3]))
    assert task["successes"] == 50 - failures and task["completed"] == 50
    assert task["rate"] == pytest.approx((50 - failures) / 50)
    assert task["wilson95"] == list(wilson_interval(50 - failures, 50))
    assert (task["suite"], task["index"], task["name"]) == ("libero_10", 3, "TASK_libero_10_3")
    assert task["states"] == {"selected": 50, "errored": 0, "unattempted": 0}

    suite = summary["suites"]["libero_10"]
    successes = sum(t["successes"] for t in tasks.values())
    assert (suite["successes"], suite["completed"]) == (successes, 500)
    assert suite["wilson95"] == list(wilson_interval(successes, 500))
    assert suite["tasks"] == {"selected": 10, "of": 10, "text": "10 of 10 tasks"}
    assert suite["states_per_task"] == 50
    assert suite["episodes"] == {"selected": 500, "errored": 0, "unattempted": 0}
    assert suite["comparable"] is True and suite["not_comparable_because"] == []
    assert summary["overall"] == success_rate(
        record(c, outcome_of(c)) for c in selected)


def test_full_summary_is_json_as_summary_json_writes_it(tmp_path: Path) -> None:
    summary = full_summary(full_cases("libero_goal", range(10)))
    folder = RunFolder(tmp_path / "run")
    folder.write_json("summary.json", summary)
    folder.close()
    assert json.loads((tmp_path / "run" / "summary.json").read_text()) == summary


@pytest.mark.parametrize(
    ("selected", "partial", "records_of", "reason"),
    [
        # The plan's reasons (a state subset, decision budgets) make every suite partial.
        (full_cases("libero_10", range(10), [0, 17]), PARTIAL, None, PARTIAL),
        # Only some tasks of the suite.
        (full_cases("libero_10", range(3)), [], None, ["3 of 10 tasks covered"]),
        # A shard's part: all 50 states selected, but this summary holds only some.
        (full_cases("libero_10", range(10))[:260], [], None,
         ["6 of 10 tasks covered",
          "1 of 6 tasks have fewer than 50 init states here (one shard's part? merge the shards)"]),
        # An errored and an unattempted episode: the rate is not over 500 episodes.
        (full_cases("libero_10", range(10)), [],
         lambda cs: {c: record(c, "errored" if c == cs[0] else "success") for c in cs[:-1]},
         ["1 errored and 1 unattempted episode(s): the rate is over 498 of 500 episodes"]),
    ],
    ids=["plan-partial", "some-tasks", "shard-part", "incomplete"],
)
def test_comparable_only_for_a_complete_full_suite(
    selected: list[str], partial: list[str], records_of: Any, reason: list[str]
) -> None:
    states = [0, 17] if partial else ALL_STATES
    records = records_of(selected) if records_of else None
    summary = full_summary(selected, records, partial, states)
    suite = summary["suites"]["libero_10"]
    assert suite["comparable"] is False
    assert suite["not_comparable_because"] == reason
    assert summary["partial"] == partial
    assert summary["four_suite_average"]["comparable"] is False


def test_suites_are_judged_apart() -> None:
    selected = full_cases("libero_spatial", range(10)) + full_cases("libero_object", [0, 1])
    summary = full_summary(selected)
    assert summary["suites"]["libero_spatial"]["comparable"] is True
    assert summary["suites"]["libero_object"]["comparable"] is False
    assert summary["suites"]["libero_object"]["tasks"]["text"] == "2 of 10 tasks"


def test_unattempted_tasks_are_listed_with_no_rate() -> None:
    selected = full_cases("libero_10", [0, 1])
    records = {c: record(c, "success") for c in full_cases("libero_10", [0])}
    summary = full_summary(selected, records)
    assert summary["tasks"]["libero_10-01"]["rate"] is None
    assert summary["tasks"]["libero_10-01"]["states"]["unattempted"] == 50
    assert summary["tasks"]["libero_10-01"]["name"]  # from the catalog, no record needed


def test_four_suite_average_against_the_published_averages() -> None:
    four = ["libero_spatial", "libero_object", "libero_goal", "libero_10"]
    selected = [c for suite in four for c in full_cases(suite, range(10))]
    summary = full_summary(selected)
    average = summary["four_suite_average"]
    rates = [summary["suites"][s]["rate"] for s in four]
    assert average["missing"] == [] and average["comparable"] is True
    assert average["mean_of_suite_rates"] == pytest.approx(sum(rates) / 4)
    assert average["pooled"]["completed"] == 2000
    published = {f["model"]: f["percent"] for f in average["published_figures"]["figures"]}
    assert published == {"pi05": 96.85, "pi0": 94.15, "pi0-FAST": 85.5, "OpenVLA": 76.5,
                         "OpenVLA-OFT": 97.1, "OpenVLA-OFT (combined)": 96.8}
    lines = summary_lines(summary)
    # Percentages as their sources write them: 98.0 stays 98.0, 96.85 keeps its digits.
    assert ("  published (not measured here): pi05 98.0%, pi0 95.8%, pi0-FAST 88.6%, "
            "OpenVLA 79.2%") in lines
    at = [i for i, line in enumerate(lines) if line.startswith("four-suite average (")]
    assert len(at) == 1 and not lines[at[0]].endswith("not comparable")
    assert lines[at[0] + 1] == (
        "  published (not measured here): pi05 96.85%, pi0 94.15%, pi0-FAST 85.5%, "
        "OpenVLA 76.5%, OpenVLA-OFT 97.1%, OpenVLA-OFT (combined) 96.8%")


# --- published figures ---------------------------------------------------------------------


def test_published_figures_are_the_confirmed_ones_with_pinned_sources() -> None:
    published = load_published()
    labels = [f.label for f in published.figures]
    assert labels == ["pi05", "pi0", "pi0-FAST", "OpenVLA", "OpenVLA-OFT", "OpenVLA-OFT (combined)"]
    for figure in published.figures:
        assert re.fullmatch(r"[0-9a-f]{40}", figure.commit)
        # The URL is the file at that commit, in that repository.
        assert figure.url.startswith(
            f"https://github.com/{figure.repo}/blob/{figure.commit}/{figure.path}"), figure.url
        assert figure.source_title and figure.protocol
        assert "lerobot" not in figure.url.lower()  # reproductions are not kept
    by_label = {f.label: dict(f.success_percent) for f in published.figures}
    assert by_label["pi05"] == {"libero_spatial": 98.8, "libero_object": 98.2,
                                "libero_goal": 98.0, "libero_10": 92.4, "average": 96.85}
    assert by_label["pi0"]["libero_10"] == 85.2 and by_label["pi0-FAST"]["libero_goal"] == 88.6
    assert by_label["OpenVLA"] == {"libero_spatial": 84.7, "libero_object": 88.4,
                                   "libero_goal": 79.2, "libero_10": 53.7, "average": 76.5}
    assert by_label["OpenVLA-OFT"] == {"average": 97.1}  # the per-suite values were not read
    assert published.for_suite("libero_90") == []


def test_full_mode_summary_carries_published_figures_marked_as_not_measured() -> None:
    summary = full_summary(full_cases("libero_spatial", range(10)) + full_cases("libero_90", [0]))
    block = summary["suites"]["libero_spatial"]["published_figures"]
    assert block["note"] == NOTE == "published by their authors; not measured by this run"
    assert [(f["model"], f["percent"]) for f in block["figures"]] == [
        ("pi05", 98.8), ("pi0", 96.8), ("pi0-FAST", 96.4), ("OpenVLA", 84.7)]
    assert all(f["source"].startswith("https://github.com/") and f["commit"] in f["source"]
               for f in block["figures"])
    assert "published" not in json.dumps(summary["tasks"])  # measured numbers stay apart
    none = summary["suites"]["libero_90"]["published_figures"]
    assert none["figures"] == [] and "libero_90" in none["none_because"]


def test_each_published_figure_says_what_state_its_loop_fed() -> None:
    fed = {f.label: f.state_fed for f in load_published().figures}
    assert fed == {"pi05": "eef_pose", "pi0": "eef_pose", "pi0-FAST": "eef_pose",
                   "OpenVLA": "none", "OpenVLA-OFT": "eef_pose",
                   "OpenVLA-OFT (combined)": "eef_pose"}


@pytest.mark.parametrize("state_fed", ["constant", "proprio", "none"])
def test_a_state_caveat_stands_beside_figures_whose_loop_fed_state_this_run_did_not(
    state_fed: str,
) -> None:
    summary = full_summary(full_cases("libero_spatial", range(10)), state_fed=state_fed)
    assert summary["state_fed"] == state_fed
    block = summary["suites"]["libero_spatial"]["published_figures"]
    assert [f["state_fed"] for f in block["figures"]] == ["eef_pose"] * 3 + ["none"]
    caveat = block["state_caveat"]
    assert caveat.startswith("state differs: pi05, pi0, pi0-FAST fed the 8-value end-effector")
    assert f"this run fed {state_fed} (" in caveat and "OpenVLA" not in caveat
    lines = summary_lines(summary)
    at = lines.index("  published (not measured here): pi05 98.8%, pi0 96.8%, pi0-FAST 96.4%, "
                     "OpenVLA 84.7%")
    assert lines[at + 1] == f"  {caveat}"
    assert sum("state differs" in line for line in lines) == 1  # one line, beside its figures


def test_no_state_caveat_without_the_runs_state_or_beside_stateless_figures() -> None:
    unknown = full_summary(full_cases("libero_spatial", range(10)))
    assert "state_caveat" not in unknown["suites"]["libero_spatial"]["published_figures"]
    assert "state_fed" not in unknown
    openvla = next(f for f in load_published().figures if f.label == "OpenVLA")
    assert not any(openvla.state_differs(s) for s in ("constant", "proprio", "none"))


def test_fast_mode_summary_says_what_state_was_fed_and_shows_no_figures() -> None:
    summary = summarize(FAST_CASES, FAST_RECORDS, state_fed="constant")
    assert summary["state_fed"] == "constant"
    assert "published" not in json.dumps(summary)


def test_what_a_served_policy_says_it_fed_wins_over_the_profile() -> None:
    from pytest_libero.episode.case import state_fed

    assert state_fed("proprio", {"pytest_libero/state_fed": "constant"}) == "constant"
    assert state_fed("proprio", {"pytest_libero/state_fed": "eef"}) == "proprio"  # not a value
    assert state_fed("none", {}) == "none"
    records = {c: {**r, "state_fed": "constant"} for c, r in FAST_RECORDS.items()}
    assert summarize(FAST_CASES, records, state_fed="proprio")["state_fed"] == "constant"
    records["libero_10-00"]["state_fed"] = "proprio"
    assert summarize(FAST_CASES, records, state_fed="proprio")["state_fed"] == "mixed"


def test_fast_mode_summary_has_no_published_figures() -> None:
    assert "published" not in json.dumps(summarize(FAST_CASES, FAST_RECORDS))


# --- the terminal ----------------------------------------------------------------------------


def test_full_mode_terminal_lines() -> None:
    selected = full_cases("libero_10", range(10))
    summary = full_summary(selected)
    lines = summary_lines(summary)
    assert lines[2] == "full mode: 500 cases (10 tasks x 50 states)"
    assert not any(line.startswith("PARTIAL") for line in lines)
    suite = summary["suites"]["libero_10"]
    assert lines[3] == f"{format_rate('libero_10', suite)}; 10 of 10 tasks x 50 states"
    assert lines[4].startswith("  comparable with published full-mode figures")
    assert lines[5] == ("  published (not measured here): pi05 92.4%, pi0 85.2%, "
                        "pi0-FAST 60.2%, OpenVLA 53.7%")
    # 10 tasks: one line each, right under their suite.
    assert lines[6:16] == [f"  {format_rate(t, r)}" for t, r in summary["tasks"].items()]
    assert lines[-1] == format_rate("overall", summary["overall"])


def test_partial_full_mode_run_says_so_first() -> None:
    selected = full_cases("libero_10", [0, 1], [0, 17])
    records = {c: record(c, "success") for c in selected[:-1]}
    lines = summary_lines(full_summary(selected, records, PARTIAL, [0, 17]))
    assert lines[2] == "full mode: 4 cases (2 tasks x 2 states)"
    assert lines[3] == ("PARTIAL full-mode run: init states 0,17 of 0-49; budget mode decisions, "
                        "not the reference horizons \u2014 not a full result; do not compare with "
                        "published figures")
    assert lines[5].startswith("  not comparable with published figures: init states 0,17")
    assert "2 of 10 tasks covered" in lines[5]
    assert lines[6].startswith("  published (not measured here): pi05 92.4%")
    assert lines[8].endswith("[1 unattempted]")  # libero_10-01 lost its last state


def test_many_tasks_are_summarised_not_listed() -> None:
    selected = full_cases("libero_90", range(20), [0, 1])
    assert len({CaseId.parse(c).task for c in selected}) > PER_TASK_LINES
    records = {c: record(c, "failure" if c.startswith("libero_90-07") else "success")
               for c in selected}
    lines = summary_lines(full_summary(selected, records, ["init states 0-1 of 0-49"], [0, 1]))
    assert lines[2] == "full mode: 40 cases (20 tasks x 2 states)"
    assert "  published (not measured here): none for libero_90 in the kept sources" in lines
    summary_line = [line for line in lines if "per-task rates in summary.json" in line]
    assert summary_line == ["  20 tasks: per-task rates in summary.json (tasks); lowest: "
                            "libero_90-07 0.0%, libero_90-00 100.0%, libero_90-01 100.0%"]
    assert not any(line.startswith("  libero_90-03:") for line in lines)


# --- the paths that write summary.json ---------------------------------------------------------


def test_merge_writes_the_full_mode_summary_from_the_run_json_plan(tmp_path: Path) -> None:
    selected = full_cases("libero_object", range(10))
    folder = tmp_path / "zero" / "run"
    folder.mkdir(parents=True)
    run = {
        "protocol_identity": "libero-protocol-full-v1:x",
        "plan": {
            "profile": {"name": "zero", "sha256": "abc"}, "evidence_class": "infrastructure",
            "selection": {"scope": "task_coverage", "suite": "libero_object",
                          "task_ids": list(range(10)), "mode": "full",
                          "init_states": ALL_STATES, "partial_states": False},
            "selection_cases": selected, "cases": selected, "shard": None,
            "budget_mode": "horizon", "max_policy_calls": None, "replan_interval": 5,
            "track": "rgb", "mode": "full", "partial": [],
        },
    }
    (folder / "run.json").write_text(json.dumps(run))
    lines = [json.dumps(record(c, outcome_of(c))) for c in selected[:-1]]
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
    merged = merge_runs([folder], tmp_path / "merged")
    summary = json.loads((merged / "summary.json").read_text())
    assert summary["mode"] == "full" and summary["partial"] == []
    suite = summary["suites"]["libero_object"]
    assert suite["comparable"] is False and suite["episodes"]["unattempted"] == 1
    assert summary["tasks"]["libero_object-09"]["states"]["unattempted"] == 1
    assert [f["model"] for f in suite["published_figures"]["figures"]][:1] == ["pi05"]


def test_recorder_passes_the_plans_mode_partial_and_selection(tmp_path: Path) -> None:
    fast = make_plan(load_profile("zero"), SelectionRequest("development", None, (0, 1)),
                     adapter="libero", render="consumed", video_stride=1)
    selection = SelectionRequest("development", None, (0, 1), mode="full", init_states=(0, 17))
    entries = tuple(e.at_state(s) for e in fast.selected for s in selection.states)
    # Full-mode plans are refused until a suite's schedule is validated: built by hand.
    plan = replace(fast, selection=selection, entries=entries, selected=entries, owned=entries,
                   budget_mode="decisions")
    recorder = Recorder(plan, RunFolder(tmp_path / "run"), Gates(None, None, 0.05))
    recorder.records = {c: record(c, "success") for c in ("libero_10-00-s0", "libero_10-01-s17")}
    summary = recorder.summary()
    recorder.folder.close()
    assert summary["mode"] == "full"
    assert summary["partial"] == plan.partial == [
        "init states 0,17 of 0-49", "budget mode decisions, not the reference horizons"]
    assert summary["init_states"] == [0, 17]
    assert summary["counts"]["selected"] == 4 and summary["counts"]["unattempted"] == 2
    assert summary["suites"]["libero_10"]["comparable"] is False
    assert "mode" not in Recorder(fast, RunFolder(tmp_path / "fast"), Gates(None, None, 0.05)).summary()


# --- Allure grouping, from the record (and run.json) ---------------------------------------


def test_allure_tree_fast_mode_is_unchanged() -> None:
    tree = case_tree(record("libero_10-03", "success"))
    assert (tree.parent_suite, tree.suite, tree.sub_suite) == ("LIBERO", "libero_10",
                                                               "TASK_libero_10_3")
    assert tree.labels["mode"] == "fast" and "init_state" not in tree.labels
    assert "partial" not in tree.tags and "mode:fast" in tree.tags


def test_allure_tree_full_mode_is_suite_task_state_with_partial_tag() -> None:
    rec = record("libero_10-03-s17", "failure")
    run = {"plan": {"mode": "full", "partial": PARTIAL}}
    tree = case_tree(rec, run)
    assert (tree.parent_suite, tree.suite, tree.sub_suite) == (
        "libero_10", "libero_10-03 TASK_libero_10_3", "state 17")
    assert tree.labels["mode"] == "full" and tree.labels["init_state"] == "17"
    assert tree.labels["partial"] == "; ".join(PARTIAL)
    assert {"mode:full", "partial", "INFRASTRUCTURE EVIDENCE"} <= set(tree.tags)
    complete = case_tree(rec, {"plan": {"mode": "full", "partial": []}})
    assert "partial" not in complete.tags and "partial" not in complete.labels
    # Without run.json the record alone says full mode (its entry has an init state).
    assert case_tree(rec).mode == "full" and case_tree(rec).partial == ()
