"""P1/P3: the frozen catalog and every selection scope, including each usage error."""

from __future__ import annotations

import json

import pytest

from pytest_libero.catalog.entries import load_catalog
from pytest_libero.catalog.selection import SelectionRequest, parse_task_ids, select
from pytest_libero.data import CATALOG_FILE, data_path
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.parameters import SUITES


def ids(request: SelectionRequest) -> list[str]:
    return [e.case_id for e in select(load_catalog(), request)]


def test_catalog_is_native_order_with_horizons() -> None:
    catalog = load_catalog()
    assert len(catalog.entries) == 130
    assert [s for s in dict.fromkeys(e.suite for e in catalog.entries)] == list(SUITES)
    for suite, n in zip(SUITES, (10, 10, 10, 90, 10)):
        assert [e.index for e in catalog.suite_entries(suite)] == list(range(n))
    horizons = {s: catalog.horizon(s)[0] for s in SUITES}
    assert horizons == {"libero_spatial": 220, "libero_object": 280, "libero_goal": 300,
                        "libero_90": 400, "libero_10": 520}
    # Reference horizons the caps are not taken from stay in the data, for the record.
    data = json.loads(data_path(CATALOG_FILE).read_bytes())
    assert data["reference_horizons"]["native_lifelong"]["value"] == 600
    assert data["reference_horizons"]["simulator_default"]["value"] == 1000


def test_smoke_is_the_default() -> None:
    assert ids(SelectionRequest()) == ["libero_10-00", "libero_10-01"]


def test_development_and_task_coverage() -> None:
    assert ids(SelectionRequest("development", task_ids=(4, 0))) == ["libero_10-00", "libero_10-04"]
    assert ids(SelectionRequest("task_coverage", "libero_90", (89, 3))) == ["libero_90-03", "libero_90-89"]


def test_all_is_130_once_in_native_order() -> None:
    selected = ids(SelectionRequest("all"))
    assert len(selected) == len(set(selected)) == 130
    assert selected[0] == "libero_spatial-00" and selected[-1] == "libero_10-09"
    assert selected == [e.case_id for e in load_catalog().entries]


@pytest.mark.parametrize(
    ("request_", "words"),
    [
        (SelectionRequest(init_states=(0,)), "--libero-init-states needs --libero-mode=full"),
        (SelectionRequest(mode="quick"), "allowed: fast, full"),
        (SelectionRequest("everything"), "allowed: smoke, development, task_coverage, all"),
        (SelectionRequest("task_coverage", "libero_100", (0,)), "not a LIBERO suite"),
        (SelectionRequest("task_coverage", "libero_10", (10,)), "task ids 0-9; got [10]"),
        (SelectionRequest("task_coverage", "libero_90", (90,)), "task ids 0-89"),
        (SelectionRequest("task_coverage", "libero_10"), "needs both --libero-suite and --libero-task-ids"),
        (SelectionRequest("task_coverage", task_ids=(0,)), "needs both"),
        (SelectionRequest("development", task_ids=(5,)), "ids 0-4; got [5]"),
        (SelectionRequest("development", "libero_goal", (0,)), "covers libero_10 only"),
        (SelectionRequest("smoke", task_ids=(0,)), "takes no --libero-suite"),
        (SelectionRequest("all", "libero_10"), "takes no --libero-suite"),
    ],
)
def test_bad_selections_say_what_is_allowed(request_: SelectionRequest, words: str) -> None:
    with pytest.raises(SetupError, match=words.replace("[", r"\[").replace("]", r"\]")):
        select(load_catalog(), request_)


def test_task_id_syntax() -> None:
    assert parse_task_ids("0-2,7, 7") == (0, 1, 2, 7)
    with pytest.raises(SetupError, match="0,1,4"):
        parse_task_ids("one")
