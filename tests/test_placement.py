"""The placement rule (catalog/placement.py), on the cases a selection makes: full
mode's kept environment, the set-up ahead, and the adapter that is told the answer.

The rule's effect with the real simulator (the records' ``schedule``, verify) is in
tests/test_kept_environment.py; the host that applies it, in tests/test_host.py.
"""

from __future__ import annotations

import pytest

from pytest_libero.catalog import placement
from pytest_libero.catalog.entries import Entry, load_catalog
from pytest_libero.catalog.placement import Place
from pytest_libero.catalog.selection import SelectionRequest, select


def cases(**request: object) -> dict[str, Entry]:
    selected = select(load_catalog(), SelectionRequest(**request))  # type: ignore[arg-type]
    return {entry.case_id: entry for entry in selected}


FULL = cases(scope="task_coverage", suite="libero_10", task_ids=(0, 1), mode="full",
             init_states=(0, 1, 3), perturbations=(("camera", 1), ("robot", 2)))


def test_only_unperturbed_full_mode_cases_take_a_place() -> None:
    assert placement.place_of(FULL["libero_10-00-s3"]) == Place("libero_10-00", 3)
    assert placement.place_of(FULL["libero_10-00-s3~camera1"]) is None
    fast = cases(scope="development", task_ids=(0,), perturbations=(("camera", 1),))
    assert [placement.place_of(e) for e in fast.values()] == [None, None]
    # A LIBERO-PRO entry (full mode would need its suite validated first) has a task of its own.
    ood = load_catalog().ood_entries[0].at_state(2)
    assert placement.place_of(ood) == Place(ood.task_id, 2) != Place(str(ood.twin.task), 2)


@pytest.mark.parametrize(("held", "after", "continues"), [
    (Place("libero_10-00", 0), Place("libero_10-00", 1), True),
    (Place("libero_10-00", 0), Place("libero_10-00", 3), True),   # the skipped resets there
    (Place("libero_10-00", 1), Place("libero_10-00", 1), False),  # its reset is spent
    (Place("libero_10-00", 3), Place("libero_10-00", 1), False),
    (Place("libero_10-00", 0), Place("libero_10-01", 1), False),
    (None, Place("libero_10-00", 1), False),
    (Place("libero_10-00", 0), None, False),
])
def test_a_case_continues_at_a_later_state_of_the_same_task(
    held: Place | None, after: Place | None, continues: bool
) -> None:
    assert placement.continues(held, after) is continues


def test_a_perturbed_case_waits_beside_its_tasks_environment_only() -> None:
    held = Place("libero_10-00", 1)
    assert placement.waits_beside(held, FULL["libero_10-00-s1~camera1"])
    assert placement.waits_beside(held, FULL["libero_10-00-s0~robot2"])  # whatever its state
    assert not placement.waits_beside(held, FULL["libero_10-01-s1~camera1"])  # another task
    assert not placement.waits_beside(held, FULL["libero_10-00-s3"])


def test_a_case_keeps_its_environment_for_a_continuing_or_waiting_next_case() -> None:
    here = Place("libero_10-00", 0)
    assert placement.worth_keeping(here, FULL["libero_10-00-s1"])
    assert placement.worth_keeping(here, FULL["libero_10-00-s0~camera1"])  # s1 may still come
    assert placement.worth_keeping(here, None)  # the worker does not know its next case yet
    assert not placement.worth_keeping(here, FULL["libero_10-01-s0"])
    # While a perturbed case runs beside it, the kept environment is what remains after.
    assert placement.held_after(FULL["libero_10-00-s0~camera1"], here) == here
    assert placement.held_after(FULL["libero_10-01-s0~camera1"], here) is None
    assert placement.held_after(FULL["libero_10-00-s1"], here) == Place("libero_10-00", 1)


def test_the_adapter_refuses_to_continue_where_the_rule_never_would() -> None:
    from pytest_libero.adapters.libero import KeptEnvironment
    from pytest_libero.protocol.errors import EnvironmentFault

    s1 = FULL["libero_10-00-s1"]
    held = KeptEnvironment(env=None, bddl_file=s1.bddl_file, horizon=531, resets=2,
                           first_state=0, episodes=2)  # after s0 and s1
    held.check(FULL["libero_10-00-s3"], 531)  # a later state: it serves
    for case, horizon in (("libero_10-00-s1", 531), ("libero_10-00-s0", 531),
                          ("libero_10-01-s3", 531), ("libero_10-00-s3", 600)):
        with pytest.raises(EnvironmentFault, match="cannot serve it"):
            held.check(FULL[case], horizon)
