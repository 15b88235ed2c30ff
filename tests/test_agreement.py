"""verify's checks before re-execution, without a simulator: every entry a run can select
agrees with the installed catalog as its record writes it, and an edit of any part of
an entry, or a difference between a record's two accounts, is named by its field."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_libero.audit.agreement import (
    Difference,
    catalog_difference,
    first_difference,
    folder_difference,
)
from pytest_libero.catalog.entries import load_catalog
from pytest_libero.catalog.selection import SelectionRequest, select
from pytest_libero.episode.record import CaseRecord
from pytest_libero.perturb.levels import LEVELS
from pytest_libero.perturb.registry import names, perturbed, worded

REQUESTS = [SelectionRequest(scope="all"), SelectionRequest(scope="ood"),
            SelectionRequest(scope="all", mode="full", init_states=(0, 7)),
            SelectionRequest(scope="development",
                             perturbations=tuple((k, v) for k in names() for v in LEVELS))]


def record_of(entry: Any) -> CaseRecord:
    return {"case": entry.case_id, "entry": entry.as_dict(identity="x")}  # type: ignore[typeddict-item]


def test_every_selectable_entry_agrees_with_the_catalog() -> None:
    entries = [e for request in REQUESTS for e in map(worded, select(load_catalog(), request))]
    assert len(entries) > 700
    assert [e.case_id for e in entries if catalog_difference(record_of(e)) is not None] == []


@pytest.mark.parametrize(("field", "value"), [
    ("level", 3), ("kind", "object"), ("twin", "libero_10-05"), ("language", "do something else"),
    ("bddl_file", "libero_10/other.bddl"), ("level", "1"),
])
def test_an_edited_ood_entry_is_named_by_its_field(field: str, value: object) -> None:
    ood = next(e for e in load_catalog().ood_entries if e.ood is not None and e.ood.kind == "semantic")
    record: Any = record_of(ood)
    record["entry"] = {**record["entry"], field: value}
    found = catalog_difference(record)
    assert isinstance(found, Difference) and found.field == f"entry.{field}", found


def test_an_entry_the_catalog_lacks_is_not_verifiable() -> None:
    record = record_of(load_catalog().entries[0])
    record["entry"] = {**record["entry"], "index": 99}
    suite = record["entry"]["suite"]
    assert f"holds no entry {suite!r} index 99" in str(catalog_difference(record))


def test_the_two_accounts_differ_only_in_what_the_controller_adds() -> None:
    episode = {"case": "a", "outcome": "failure", "perturbation": {"parameters": {"yaw": 1.0}}}
    line: Any = {**episode, "nodeid": "test_libero.py::x"}
    assert folder_difference(line, episode) is None
    line["perturbation"] = {"parameters": {"yaw": 1.5}}
    assert folder_difference(line, episode) == Difference("perturbation.parameters.yaw", 1.5, 1.0)
    assert first_difference([1, 2], [1, 2, 3]) == Difference(" length", 2, 3)
    assert first_difference({"a": 1}, {"a": 1.0}) == Difference("a", 1, 1.0)
    assert first_difference({"a": True}, {"a": 1}) == Difference("a", True, 1)


@pytest.mark.parametrize("perturbation", [{"kind": "semantic", "level": 5},
                                          {"kind": "camera", "level": 9},
                                          {"kind": "bogus", "level": 1}])
def test_a_perturbation_the_table_lacks_is_named_not_a_traceback(perturbation: dict[str, Any]) -> None:
    native = load_catalog().entries[0]
    record: Any = record_of(perturbed(native, "semantic", 1))
    record["entry"] = {**record["entry"], "perturbation": perturbation}
    found = catalog_difference(record)
    assert isinstance(found, Difference) and found.field == "entry.perturbation", found
