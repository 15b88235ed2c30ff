"""Case ids: one type writes and reads every form, and every reader goes through it.

The xdist scheduler keeps a task's states and their variants on one worker; the
summaries file a variant apart from its twin; a kind nobody has written yet is read
like the ones that exist.
"""

from __future__ import annotations

import pytest

from pytest_libero.catalog.case_id import CaseId, VariantTag
from pytest_libero.catalog.entries import load_catalog
from pytest_libero.catalog.selection import SelectionRequest, select
from pytest_libero.config.task_scheduling import task_scope

FORMS = {
    "libero_10-03": CaseId("libero_10", 3),
    "libero_10-03-s17": CaseId("libero_10", 3, 17),
    "libero_object_temp_x0.1-00": CaseId("libero_object_temp_x0.1", 0),
    "libero_object_temp_x0.1-00-s49": CaseId("libero_object_temp_x0.1", 0, 49),
    "libero_10-03~camera2": CaseId("libero_10", 3, None, VariantTag("camera", 2)),
    "libero_10-00-s17~camera2": CaseId("libero_10", 0, 17, VariantTag("camera", 2)),
    "libero_90-89-s0~noise4": CaseId("libero_90", 89, 0, VariantTag("noise", 4)),
}


@pytest.mark.parametrize("text", FORMS)
def test_every_form_reads_and_writes_back_unchanged(text: str) -> None:
    assert CaseId.parse(text) == FORMS[text]
    assert str(FORMS[text]) == text


def test_kinds_not_yet_written_and_tags_without_a_level_need_no_new_code() -> None:
    for kind in ("position", "environment", "object", "semantic", "companion", "lan_companion"):
        for level in (None, 1, 4):
            case = CaseId("libero_goal", 7, 3, VariantTag(kind, level))
            assert CaseId.parse(str(case)) == case
            assert case.base == CaseId("libero_goal", 7, 3) and case.task == CaseId("libero_goal", 7)
    assert str(CaseId("libero_10", 0, variant=VariantTag("companion"))) == "libero_10-00~companion"


@pytest.mark.parametrize("text", [
    "", "libero_10", "libero_10-", "libero_10-xx", "libero_10-03-s", "libero_10-03-17",
    "libero_10-03~", "libero_10-03~2", "libero_10-03~Camera2", "libero_10-03~camera2~noise1",
    "libero_10-03~camera2-s17", "libero_10-03 ", "lib ero-03",
])
def test_what_is_not_a_case_id_is_refused_with_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match="not a LIBERO case id.*forms: libero_10-03, libero_10-03-s17"):
        CaseId.parse(text)


def test_parts_that_cannot_be_written_are_refused() -> None:
    for bad in (dict(suite="libero-10", index=0), dict(suite="libero_10~x", index=0),
                dict(suite="libero_10", index=-1), dict(suite="libero_10", index=0, state=-2)):
        with pytest.raises(ValueError, match="cannot make a case id"):
            CaseId(**bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a variant tag"):
        VariantTag("camera2")


def test_every_catalog_case_and_its_twin_read_back_as_their_entry_says() -> None:
    catalog = load_catalog()
    cases = select(catalog, SelectionRequest(scope="all", perturbations=(("robot", 2),)))
    cases += select(catalog, SelectionRequest(scope="ood"))
    for entry in cases:
        case = CaseId.parse(entry.case_id)
        assert case == entry.id and str(case.task) == entry.task_id
        assert (case.suite, case.index, case.state) == (entry.suite, entry.index, entry.state)
        if entry.twin is not None:
            assert CaseId.parse(str(entry.twin)) == entry.twin
            assert entry.twin.state == entry.state


def test_the_parts_a_report_keys_history_on_tell_every_case_apart() -> None:
    ids = [CaseId.parse(text) for text in FORMS]
    keys = [tuple(case.parameters().items()) for case in ids]
    assert len(set(keys)) == len(ids)
    assert CaseId("libero_10", 3).parameters() == {"suite": "libero_10", "index": 3}
    assert CaseId.parse("libero_10-00-s17~camera2").parameters() == {
        "suite": "libero_10", "index": 0, "init state": 17, "variant": "camera2"}


def test_xdist_keeps_a_tasks_states_and_their_variants_on_one_worker() -> None:
    base = "test_libero.py::test_libero_task"
    task = f"{base}[libero_10-00]"
    for case in ("libero_10-00", "libero_10-00-s0", "libero_10-00-s17", "libero_10-00-s17~camera2",
                 "libero_10-00~robot2", "libero_10-00-s49~noise1"):
        assert task_scope(f"{base}[{case}]") == task, case
    assert task_scope(f"{base}[libero_10-01-s17~camera2]") == f"{base}[libero_10-01]"
    assert task_scope(f"{base}[libero_object_swap-00-s3]") == f"{base}[libero_object_swap-00]"
    # Anything else is a scope of its own, as before.
    for other in ("test_x.py::test_plain", "test_x.py::test_p[a-b]", "test_x.py::test_p[x]extra"):
        assert task_scope(other) == other


def test_the_scheduler_splits_scopes_by_task() -> None:
    from pytest_libero.config.task_scheduling import TaskScheduling

    split = TaskScheduling._split_scope
    base = "test_libero.py::test_libero_task"
    assert split(None, f"{base}[libero_10-03-s17~camera2]") == split(None, f"{base}[libero_10-03-s0]")
    assert split(None, f"{base}[libero_10-03-s0]") != split(None, f"{base}[libero_10-04-s0]")
