"""The one rule of full mode's kept environment: does the next case continue in it?

openpi's loop runs a task's released init states in order in one environment, seeded
once. A full-mode case process that ran a task's state keeps that environment, and the
task's later state continues in it with only the resets in between
(docs/full-mode.md); a fresh build reaches the same bytes with more resets. Which case
continues where is decided here and nowhere else: the case host picks the process by
it and tells the case process (hence the adapter) what the rule said, and the xdist
scheduler keeps each chain (:func:`chain_of`) on one worker. It lives with the catalog
because it is a rule about entries alone, which every layer above may ask.

A generated perturbation never shares the environment: it is built fresh, its twin's
environment plus the perturbation, and the twin's kept environment waits beside it
for the task's next state, so a perturbed run keeps the same chain of environments as
the run without perturbations.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_libero.catalog.case_id import CaseId
from pytest_libero.catalog.entries import Entry


@dataclass(frozen=True)
class Place:
    """Where a case stands in its task's chain of episodes: the task (``suite-NN``) and
    the released init state it starts from."""

    task: str
    state: int


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
