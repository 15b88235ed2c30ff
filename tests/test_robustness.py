"""The robustness numbers, checked against values computed by hand on synthetic records;
the terminal table, the picture and the Allure grouping drawn from them."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from synthetic import synthetic_record

from pytest_libero.episode.record import CaseRecord
from pytest_libero.report.allure import case_tree, write_figure_result
from pytest_libero.report.figures import robustness_svg, write_figure
from pytest_libero.report.terminal import summary_lines
from pytest_libero.results.mcnemar import mcnemar_two_sided_p
from pytest_libero.results.rates import wilson_interval
from pytest_libero.results.summary import summarize


def ood(case: str, outcome: str, twin: str, kind: str, level: int = 1) -> CaseRecord:
    record = synthetic_record(case, outcome)
    record["entry"].update(family="libero_pro", kind=kind, level=level, twin=twin,
                           language_source="bddl" if kind == "semantic" else "twin")
    return record


def native(case: str, outcome: str) -> CaseRecord:
    record = synthetic_record(case, outcome)
    record["entry"].update(family="libero", language_source="task_name")
    return record


# Ten libero_goal tasks and their libero_goal_swap twins, cells chosen by hand:
# both 3 (tasks 0-2), only the twin 5 (3-7), only the OOD case 1 (8), neither 1 (9).
TWIN = ["success"] * 8 + ["failure"] * 2
SWAP = ["success"] * 3 + ["failure"] * 5 + ["success"] + ["failure"]


def swap_run() -> dict[str, CaseRecord]:
    records = [native(f"libero_goal-{i:02d}", TWIN[i]) for i in range(10)]
    records += [ood(f"libero_goal_swap-{i:02d}", SWAP[i], f"libero_goal-{i:02d}", "position")
                for i in range(10)]
    return {r["case"]: r for r in records}


def test_exact_two_sided_mcnemar_by_hand() -> None:
    # n = 6 discordant, split 5/1: P(X <= 1) = (1 + 6) / 64; two-sided doubles it.
    assert mcnemar_two_sided_p(5, 1) == pytest.approx(2 * 7 / 64)
    assert mcnemar_two_sided_p(1, 5) == pytest.approx(2 * 7 / 64)
    assert mcnemar_two_sided_p(0, 0) == 1.0
    assert mcnemar_two_sided_p(3, 3) == 1.0  # capped at 1
    assert mcnemar_two_sided_p(10, 0) == pytest.approx(2 / 1024)


def test_pairs_drop_and_p_value_match_hand_computed_values() -> None:
    records = swap_run()
    summary = summarize(list(records), records)
    block = summary["robustness"]
    position = block["kinds"]["position"]
    assert (position["cases"], position["successes"], position["completed"]) == (10, 4, 10)
    assert position["wilson95"] == pytest.approx(list(wilson_interval(4, 10)))
    paired = position["paired"]
    assert (paired["pairs"], paired["both"], paired["only_twin"], paired["only_perturbed"],
            paired["neither"]) == (10, 3, 5, 1, 1)
    assert paired["twin"]["rate"] == 0.8 and paired["perturbed"]["rate"] == 0.4
    assert paired["drop_points"] == pytest.approx(40.0)
    assert paired["mcnemar_p"] == pytest.approx(0.21875)
    assert block["in_distribution"]["rate"] == 0.8 and block["in_distribution_cases"] == 10
    assert block["suites"]["libero_goal_swap"]["base"] == "libero_goal"
    assert block["levels"]["position"]["1"]["paired"] == paired


def test_errored_and_twinless_cases_are_unpaired_never_failures() -> None:
    records = swap_run()
    records["libero_goal_swap-00"]["outcome"] = "errored"  # was a "both" pair
    del records["libero_goal-01"]  # twin missing: task 1 was a "both" pair too
    extra = ood("libero_goal_task-04", "failure", "libero_goal-04", "semantic")
    records[extra["case"]] = extra
    block = summarize(list(records), records)["robustness"]
    position = block["kinds"]["position"]
    assert position["errored"] == 1 and position["unpaired"] == 2
    assert position["completed"] == 9 and position["successes"] == 3
    assert (position["paired"]["pairs"], position["paired"]["both"]) == (8, 1)
    semantic = block["kinds"]["semantic"]
    assert semantic["paired"]["only_twin"] == 1 and semantic["paired"]["drop_points"] == 100.0
    assert list(block["kinds"]) == ["position", "semantic"]  # the catalog's kind order


def test_levels_are_apart_and_full_mode_pairs_by_state() -> None:
    records = [native("libero_object-00-s0", "success"), native("libero_object-00-s1", "success")]
    for level, outcome in ((1, "success"), (5, "failure")):
        for state in (0, 1):
            suite = f"libero_object_temp_x0.{level}"
            records.append(ood(f"{suite}-00-s{state}", outcome if state else "success",
                               f"libero_object-00-s{state}", "position", level))
    by_case = {r["case"]: r for r in records}
    levels = summarize(list(by_case), by_case, mode="full")["robustness"]["levels"]["position"]
    assert list(levels) == ["1", "5"]
    assert levels["1"]["paired"]["both"] == 2 and levels["1"]["paired"]["drop_points"] == 0.0
    assert levels["5"]["paired"]["both"] == 1 and levels["5"]["paired"]["only_twin"] == 1


def test_a_run_without_ood_cases_has_no_robustness_block() -> None:
    records = {r["case"]: r for r in (native("libero_10-00", "success"),)}
    assert "robustness" not in summarize(list(records), records)


def test_terminal_table_prints_the_pairs() -> None:
    records = swap_run()
    lines = summary_lines(summarize(list(records), records, profile="zero"))
    text = "\n".join(lines)
    assert "overall (native and OOD cases together): 12/20" in text
    assert "libero_goal_swap: " not in text  # OOD suites sit in the table, not the suite list
    assert ("position: 4/10 = 40.0%" in text and "10 pairs: both 3, only twin 5, only perturbed 1, "
            "neither 1; drop +40.0 pts, McNemar p = 0.219" in text), text
    assert "in-distribution (the twins): 8/10 = 80.0%" in text


def _rows(svg: str) -> dict[str, dict[str, Any]]:
    tree = ET.fromstring(svg)
    ns = {"s": "http://www.w3.org/2000/svg"}
    rows = {}
    for group in tree.iterfind("s:g", ns):
        bar = group.find("s:rect[@class='bar']", ns)
        twin = group.find("s:line[@class='twin']", ns)
        rows[group.get("data-label", "")] = {
            "width": float(bar.get("width", "nan")) if bar is not None else None,
            "rate": float(bar.get("data-rate", "nan")) if bar is not None else None,
            "twin_x": float(twin.get("x1", "nan")) if twin is not None else None,
        }
    return rows


def test_the_picture_shows_each_kind_and_level_beside_in_distribution(tmp_path: Path) -> None:
    records = swap_run()
    for level, outcome in ((1, "success"), (3, "failure")):
        extra = ood(f"libero_object_temp_y0.{level}-00", outcome, "libero_goal-00", "position",
                    level)
        records[extra["case"]] = extra
    summary = summarize(list(records), records, profile="zero")
    rows = _rows(robustness_svg(summary))
    assert list(rows) == ["in-distribution (twins)", "position", "position level 1",
                          "position level 3"]
    full = rows["in-distribution (twins)"]["width"] / 0.8  # the bar scale, from the first row
    position = summary["robustness"]["kinds"]["position"]
    assert rows["position"]["rate"] == pytest.approx(position["rate"])
    assert rows["position"]["width"] == pytest.approx(full * position["rate"], abs=0.2)
    assert rows["position level 3"]["width"] == pytest.approx(0.0)
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r1"}))
    figure = write_figure(tmp_path)
    assert figure is not None and figure.read_text().startswith("<svg")
    result = json.loads(write_figure_result(tmp_path / "allure", figure, {"run_id": "r1"})
                        .read_text())
    [attachment] = result["attachments"]
    assert attachment["type"] == "image/svg+xml"
    assert (tmp_path / "allure" / attachment["source"]).read_bytes() == figure.read_bytes()
    assert {"name": "parentSuite", "value": "LIBERO-PRO"} in result["labels"]


def test_allure_files_ood_cases_under_libero_pro_kind_suite() -> None:
    record = ood("libero_goal_task-03", "failure", "libero_goal-03", "semantic")
    tree = case_tree(record)
    assert (tree.parent_suite, tree.suite, tree.sub_suite) == ("LIBERO-PRO", "semantic",
                                                               "libero_goal_task")
    assert tree.labels["kind"] == "semantic" and tree.labels["level"] == "1"
    assert tree.labels["twin"] == "libero_goal-03" and tree.labels["family"] == "libero_pro"
    assert case_tree(native("libero_goal-03", "success")).parent_suite == "LIBERO"
