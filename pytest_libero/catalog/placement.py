"""Where a case runs: full mode's kept environment and the set-up ahead, as one rule.

openpi's loop runs a task's released init states in order in one environment, seeded
once. A full-mode case process that ran a task's state keeps that environment, and the
task's later state continues in it with only the resets in between
(docs/full-mode.md); a fresh build reaches the same bytes with more resets. A worker's
next case may also be set up ahead, in a process of its own, while the case before it
runs (docs/performance.md j).

:func:`decide` answers, for one case at its turn, everything the case host does with
processes: which one runs the case, whether the environment held so far ends, whether
this case's environment is kept after it, and whether the next case is set up ahead.
The host applies the answer and hands it to the adapter (``open(..., placement=)``);
the xdist scheduler keeps each chain (:func:`chain_of`) on one worker. It lives with
the catalog because it is a rule about entries alone, which every layer above may ask.

A generated perturbation never shares the environment: it is built fresh, its twin's
environment plus the perturbation, and the twin's kept environment waits beside it
for the task's next state, so a perturbed run keeps the same chain of environments as
the run without perturbations.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from pytest_libero.catalog.case_id import CaseId
from pytest_libero.catalog.entries import Entry


@dataclass(frozen=True)
class Place:
    """Where a case stands in its task's chain of episodes: the task (``suite-NN``) and
    the released init state it starts from."""

    task: str
    state: int


class Process(Enum):
    """The process a case runs in."""

    AHEAD = "ahead"
    """The one set up ahead for this very case while the case before it ran."""
    KEPT = "kept"
    """The one holding the task's environment, which the case continues."""
    FRESH = "fresh"
    """A new one, started at the case's turn."""


@dataclass(frozen=True)
class Turn:
    """What the case host knows when a case's turn comes. Fast mode is an entry without
    a state: it never takes a place, so nothing is kept for it or continued in."""

    entry: Entry
    held: Place | None = None
    """Where the environment a kept process holds ran its last episode (None: none)."""
    held_alive: bool = True
    """Whether that process is still alive (it may die while it waits)."""
    ahead: Entry | None = None
    """The case a process was set up ahead for, under this run's plan (None: none)."""
    next_entry: Entry | None = None
    """The case this worker runs after this one, if pytest knows it."""
    prebuild: bool = True
    """Whether this worker sets cases up ahead at all (``--libero-prebuild``)."""


@dataclass(frozen=True)
class Placement:
    """The rule's answer for one case (:func:`decide`)."""

    process: Process
    end_held: bool
    """The held process ends now: the case neither continues in its environment nor
    runs beside it, or that process died."""
    keep: Place | None
    """Where this case's environment stays after it, if it ends well
    (:meth:`kept_after`); None: it ends with the case."""
    prepare_next: bool
    """Set the next case up ahead, in a process of its own, while this one runs."""

    @property
    def continues(self) -> bool:
        """Whether the case opens in the environment its process holds."""
        return self.process is Process.KEPT

    def kept_after(self, outcome: str) -> Place | None:
        """Where this case's environment is kept once it ended with ``outcome``: never
        after an error, since a simulator that raised or a case lost midway is not
        reused. The one part of the answer that waits for the case to end."""
        return None if outcome == "errored" else self.keep


def decide(turn: Turn) -> Placement:
    """Place ``turn.entry``: in the process set up ahead for it, else in the kept one
    whose environment it continues, else in a fresh one. The held environment stays
    only while the case continues in it or runs beside it; the case's own is kept for
    a next case that continues in it or waits beside it, or for one nobody knows yet;
    the next case is set up ahead unless it continues in what this case leaves."""
    entry, following = turn.entry, turn.next_entry
    here = place_of(entry)
    held = turn.held if turn.held_alive else None
    if turn.ahead == entry:
        process = Process.AHEAD
    elif continues(held, here):
        process = Process.KEPT
    else:
        process = Process.FRESH
    stays = process is Process.KEPT or (held is not None and waits_beside(held, entry))
    return Placement(
        process=process,
        end_held=turn.held is not None and not stays,
        keep=here if here is not None and worth_keeping(here, following) else None,
        prepare_next=(turn.prebuild and following is not None
                      and not continues(held_after(entry, held), place_of(following))),
    )


def generated_variant(entry: Entry) -> bool:
    """Whether ``entry`` is a generated perturbation of a native case (its variant)."""
    return entry.perturbation is not None


def place_of(entry: Entry) -> Place | None:
    """The case's place in its task's kept environment: a full-mode case (one with an
    init state) that is not a generated perturbation. None: it never shares one."""
    if entry.state is None or generated_variant(entry):
        return None
    return Place(entry.task_id, entry.state)


def chain_of(case: CaseId) -> str:
    """The chain of episodes a case belongs to, for a scheduler: its task. A task's
    states continue one another, and its perturbed cases run beside that chain (their
    twin's environment waits for them), so all go to one worker."""
    return str(case.task)


def continues(held: Place | None, after: Place | None) -> bool:
    """Whether a case at ``after`` continues in the environment whose last episode was
    at ``held``: the same task at a later state (the loop's resets in between are made
    there). A lower or equal state would need resets undone, another task another
    environment."""
    return (held is not None and after is not None and after.task == held.task
            and after.state > held.state)


def waits_beside(held: Place, entry: Entry) -> bool:
    """Whether the environment kept at ``held`` stays while ``entry`` runs in a process
    of its own: a generated perturbation of the same task, after which the task's next
    state may still continue in it."""
    return generated_variant(entry) and entry.state is not None and entry.task_id == held.task


def held_after(running: Entry, kept: Place | None) -> Place | None:
    """The environment this process's host holds once ``running`` ends well: the case's
    own (kept for its task's next state), else the one waiting beside it."""
    here = place_of(running)
    if here is not None:
        return here
    return kept if kept is not None and waits_beside(kept, running) else None


def worth_keeping(here: Place, next_entry: Entry | None) -> bool:
    """Whether the environment a case ran at ``here`` is kept after it: the next case
    continues in it, or waits beside it, or nobody knows the next case yet."""
    return (next_entry is None or continues(here, place_of(next_entry))
            or waits_beside(here, next_entry))
