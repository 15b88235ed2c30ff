"""The placement rule (catalog/placement.py), on the cases a selection makes: full
mode's kept environment, the set-up ahead, and the adapter that is told the answer.

The rule's effect with the real simulator (the records' ``schedule``, verify) is in
tests/test_kept_environment.py; the host that applies it, in tests/test_host.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_libero.adapters import AdapterCache
from pytest_libero.adapters.base import takes_placement
from pytest_libero.catalog import placement
from pytest_libero.catalog.entries import Entry, load_catalog
from pytest_libero.catalog.placement import Place, Placement, Process, Turn, decide
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


# ------------------------------------------------------------ the whole answer, decide()

FAST = cases(scope="task_coverage", suite="libero_10", task_ids=(0, 1), perturbations=(("camera", 1),))
CASES = FULL | FAST
AHEAD, KEPT, FRESH = Process.AHEAD, Process.KEPT, Process.FRESH


def at(task: int, state: int) -> Place:
    return Place(f"libero_10-{task:02d}", state)


def turn(case: str, held: Place | None = None, *, alive: bool = True, ahead: str | None = None,
         then: str | None = None, prebuild: bool = True) -> Turn:
    """``case``'s turn, ``then`` the case after it; entries by case id."""
    return Turn(CASES[case], held=held, held_alive=alive, ahead=CASES[ahead] if ahead else None,
                next_entry=CASES[then] if then else None, prebuild=prebuild)


# (the turn, then the answer: process, end the held one, keep at, set the next one up)
TABLE: dict[str, tuple[Turn, tuple[Process, bool, Place | None, bool]]] = {
    # A task's states in order, in one kept process.
    "first state: fresh, kept for the next": (
        turn("libero_10-00-s0", then="libero_10-00-s1"), (FRESH, False, at(0, 0), False)),
    "later state continues": (
        turn("libero_10-00-s1", at(0, 0), then="libero_10-00-s3"), (KEPT, False, at(0, 1), False)),
    "a state skipped in between: continues": (
        turn("libero_10-00-s3", at(0, 1), then="libero_10-00-s3~camera1"),
        (KEPT, False, at(0, 3), True)),
    "earlier state: fresh, the held one ends": (
        turn("libero_10-00-s1", at(0, 3), then="libero_10-00-s3"), (FRESH, True, at(0, 1), False)),
    "the same state again: fresh": (
        turn("libero_10-00-s1", at(0, 1)), (FRESH, True, at(0, 1), False)),
    # Another task.
    "last state before another task: not kept, the next set up": (
        turn("libero_10-00-s3", at(0, 1), then="libero_10-01-s0"), (KEPT, False, None, True)),
    "another task: fresh, the held one ends": (
        turn("libero_10-01-s0", at(0, 3), then="libero_10-01-s1"), (FRESH, True, at(1, 0), False)),
    # Generated perturbations run beside their twin's environment, which waits.
    "state before its perturbed copy: kept for after it": (
        turn("libero_10-00-s1", at(0, 0), then="libero_10-00-s1~camera1"),
        (KEPT, False, at(0, 1), True)),
    "perturbed: fresh beside the held one, the next perturbed set up": (
        turn("libero_10-00-s1~camera1", at(0, 1), then="libero_10-00-s1~robot2"),
        (FRESH, False, None, True)),
    "perturbed: the next state continues in what waits": (
        turn("libero_10-00-s1~robot2", at(0, 1), then="libero_10-00-s3"), (FRESH, False, None, False)),
    "perturbed, of another task: the held one ends": (
        turn("libero_10-01-s0~camera1", at(0, 3), then="libero_10-01-s1"), (FRESH, True, None, True)),
    # After an errored case nothing was kept (Placement.kept_after): the chain starts over.
    "errored state before: fresh": (
        turn("libero_10-00-s3", then="libero_10-00-s3~camera1"), (FRESH, False, at(0, 3), True)),
    "perturbed after an errored twin: the next state set up": (
        turn("libero_10-00-s1~robot2", then="libero_10-00-s3"), (FRESH, False, None, True)),
    # Set up ahead.
    "set up ahead for it: runs there": (
        turn("libero_10-01-s0", at(0, 3), ahead="libero_10-01-s0", then="libero_10-01-s1"),
        (AHEAD, True, at(1, 0), False)),
    "perturbed, set up ahead: its twin's waits": (
        turn("libero_10-00-s1~camera1", at(0, 1), ahead="libero_10-00-s1~camera1",
             then="libero_10-00-s1~robot2"), (AHEAD, False, None, True)),
    "set up ahead for another case: continues": (
        turn("libero_10-00-s1", at(0, 0), ahead="libero_10-00-s0~camera1", then="libero_10-00-s3"),
        (KEPT, False, at(0, 1), False)),
    "set up ahead for another case, nothing held: fresh": (
        turn("libero_10-01-s0", ahead="libero_10-00-s3~camera1"), (FRESH, False, at(1, 0), False)),
    "set up ahead for it, though it could continue: ahead": (
        turn("libero_10-00-s1", at(0, 0), ahead="libero_10-00-s1"), (AHEAD, True, at(0, 1), False)),
    # The held process died while it waited.
    "held one dead: fresh, it is ended": (
        turn("libero_10-00-s1", at(0, 0), alive=False, then="libero_10-00-s3"),
        (FRESH, True, at(0, 1), False)),
    "held one dead beside a perturbed case: the next state set up": (
        turn("libero_10-00-s0~camera1", at(0, 0), alive=False, then="libero_10-00-s1"),
        (FRESH, True, None, True)),
    # No next case known (the session's last, or pytest cannot tell).
    "no next case: kept all the same": (
        turn("libero_10-00-s0"), (FRESH, False, at(0, 0), False)),
    "perturbed, no next case: nothing of its own kept": (
        turn("libero_10-00-s0~camera1", at(0, 0)), (FRESH, False, None, False)),
    "prebuild off: nothing set up": (
        turn("libero_10-00-s3", at(0, 1), then="libero_10-01-s0", prebuild=False),
        (KEPT, False, None, False)),
    # Fast mode: no state, no place; a process per case, the next one set up ahead.
    "fast: fresh, the next set up": (
        turn("libero_10-00", then="libero_10-00~camera1"), (FRESH, False, None, True)),
    "fast, set up ahead": (
        turn("libero_10-01", ahead="libero_10-01", then="libero_10-01~camera1"), (AHEAD, False, None, True)),
    "fast, last case": (turn("libero_10-01~camera1"), (FRESH, False, None, False)),
    "fast, prebuild off": (
        turn("libero_10-00", then="libero_10-01", prebuild=False), (FRESH, False, None, False)),
}


@pytest.mark.parametrize(("given", "answer"), TABLE.values(), ids=TABLE.keys())
def test_decide_places_every_kind_of_turn(
    given: Turn, answer: tuple[Process, bool, Place | None, bool]
) -> None:
    process, end_held, keep, prepare_next = answer
    assert decide(given) == Placement(process, end_held=end_held, keep=keep,
                                      prepare_next=prepare_next)


def test_an_errored_case_leaves_nothing_kept() -> None:
    placed = decide(turn("libero_10-00-s1", at(0, 0), then="libero_10-00-s3"))
    assert placed.continues
    assert placed.kept_after("failure") == placed.kept_after("success") == at(0, 1)
    assert placed.kept_after("errored") is None


# ------------------------------------------------------------ the adapter is told it


class Env:
    closed = False

    def close(self) -> None:
        self.closed = True


def test_the_libero_adapter_continues_and_keeps_as_placed(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_libero.adapters import libero
    from pytest_libero.adapters.libero import KeptEnvironment

    opened: list[KeptEnvironment | None] = []

    def episode(entry: Entry, *, kept: KeptEnvironment | None, keep: Any, **options: Any) -> None:
        """Stands in for LiberoEpisode: an environment built or continued, then closed."""
        opened.append(kept)
        if keep is not None:
            keep(kept or KeptEnvironment(Env(), entry.bddl_file, 531, resets=1,
                                         first_state=entry.state or 0, episodes=1))

    monkeypatch.setattr(libero, "LiberoEpisode", episode)
    adapter = libero.LiberoBenchmarkAdapter()
    s0, s1, s3 = (FULL[f"libero_10-00-s{state}"] for state in (0, 1, 3))
    options: dict[str, Any] = {"track": "rgb", "control_cap": 10}
    adapter.open(s0, placement=decide(Turn(s0, next_entry=s1)), **options)
    adapter.open(s1, placement=decide(Turn(s1, held=at(0, 0), next_entry=s3)), **options)
    built, continued = opened
    assert built is None and continued is not None  # s1 continued in what s0 left
    adapter.open(s3, **options)  # no placement (a replay, verify): built fresh
    assert opened[2] is None and continued.env.closed


class Strict:
    """An adapter written before ``placement`` existed."""

    def open(self, entry: Entry, *, track: str, control_cap: int, render: str,
             video_stride: int) -> Opened:
        self.given: dict[str, Any] = {}
        return Opened()


class Named(Strict):
    def open(self, entry: Entry, *, track: str, control_cap: int, render: str,
             video_stride: int, placement: Placement | None = None) -> Opened:
        self.given = {"placement": placement}
        return Opened()


class PassesOn(Named):
    def open(self, entry: Entry, **options: Any) -> Opened:
        return super().open(entry, **options)


class Opened:
    identity: dict[str, Any] = {}
    init_controls = 0

    def observe(self, policy_calls: int, executed_controls: int) -> None: ...
    def step(self, action: Any, observe_next: bool = True) -> None: ...
    def frame(self) -> None: ...
    def renders(self) -> None: ...
    def close(self) -> None: ...


@pytest.mark.parametrize(("adapter", "told"), [(Strict(), False), (Named(), True), (PassesOn(), True)],
                         ids=["strict", "named", "passes-on"])
def test_placement_goes_only_to_an_adapter_that_takes_it(adapter: Strict, told: bool) -> None:
    from pytest_libero.config.plan import make_plan
    from pytest_libero.config.profiles import load_profile
    from pytest_libero.episode.setup import open_episode

    assert takes_placement(adapter) is told  # type: ignore[arg-type]
    plan = make_plan(load_profile("zero"), SelectionRequest("task_coverage", "libero_10", (0,),
                                                            mode="full", init_states=(0, 1)),
                     adapter="users:adapter", render="consumed", video_stride=1)
    cache = AdapterCache()
    cache.built[plan.adapter] = adapter  # type: ignore[assignment]
    s0, s1 = plan.entries
    placed = decide(Turn(s1, held=placement.place_of(s0)))
    setup = open_episode(plan, s1, cache, placed)
    assert setup.error is None and setup.episode is not None
    assert adapter.given == ({"placement": placed} if told else {})
