"""Paraphrase companions without the simulator: the robustness block, the terminal and the
picture show LIBERO-PRO's paraphrase with its placements apart from the paraphrase alone."""

from __future__ import annotations

from typing import Any

from synthetic import synthetic_record

from pytest_libero.catalog.entries import load_catalog
from pytest_libero.report.allure import case_tree
from pytest_libero.report.figures import figure_rows
from pytest_libero.report.terminal import robustness_lines
from pytest_libero.results.robustness import PARAPHRASE_ALONE, PARAPHRASE_PLACED, robustness_summary


def records(outcomes: dict[str, str]) -> dict[str, Any]:
    catalog = load_catalog()
    found = {}
    for index, (twin, lan, alone) in enumerate(zip(*(outcomes[k] for k in ("twin", "lan", "alone")))):
        entry = catalog.suite_entries("libero_10_lan")[index]
        pair = {"twin": (catalog.twin_of(entry), twin), "lan": (entry, lan),
                "alone": (catalog.paraphrase_of(entry), alone)}
        for case, outcome in pair.values():
            record = synthetic_record(case.case_id, "success" if outcome == "s" else "failure")
            record["entry"] = dict(case.as_dict())
            found[case.case_id] = record
    return found


def test_the_paraphrase_alone_and_with_placements_are_two_rows() -> None:
    found = records({"twin": "ssss", "lan": "sfff", "alone": "sssf"})
    block = robustness_summary(found)
    assert block is not None
    lan, alone = block["suites"]["libero_10_lan"], block["suites"]["libero_10~paraphrase"]
    assert (lan["shows"], alone["shows"]) == (PARAPHRASE_PLACED, PARAPHRASE_ALONE)
    assert lan["paired"]["drop_points"] == 75.0 and alone["paired"]["drop_points"] == 25.0
    assert set(block["kinds"]) == {"semantic", "paraphrase"}
    text = "\n".join(robustness_lines(block))
    assert f"libero_10_lan ({PARAPHRASE_PLACED})" in text
    assert f"libero_10~paraphrase ({PARAPHRASE_ALONE})" in text
    assert PARAPHRASE_ALONE in [label for label, _ in figure_rows(block)]
    tree = case_tree(found["libero_10-00~paraphrase"])
    assert (tree.suite, tree.sub_suite) == ("paraphrase", "libero_10")
