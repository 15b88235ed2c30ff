"""Whether a generated perturbation can apply to a task, told at collection.

A case its kind cannot apply to is skipped with the reason (never run unperturbed):
``position`` when the goal names no movable object standing on the table (read from the
BDDL, perturb/tasks.py), ``environment`` when the task's table has no room for the
level's distractors (the frozen table perturb/room.py reads). Every other kind applies
to every task.
"""

from __future__ import annotations

from functools import cache

from pytest_libero.catalog.inventory import installed_files
from pytest_libero.perturb.room import BUILDER, no_room
from pytest_libero.perturb.tasks import position_subjects_of


@cache
def not_applicable(task: str, bddl_file: str, states_file: str, kind: str, level: int) -> str | None:
    """Why ``kind`` at ``level`` cannot perturb ``task`` (its fast-mode case id, with its
    catalog files); None when it can. One answer per task, kind and level (a full-mode
    selection asks once per state)."""
    if kind == "position":
        bddl, _ = installed_files(bddl_file, states_file)
        moved, kept = position_subjects_of(bddl)
        if moved:
            return None
        named = ", ".join(f"{name} ({why})" for name, why in kept.items()) or "only regions"
        return ("position cannot apply: the goal names no movable object standing on the "
                f"table (it names {named})")
    if kind == "environment":
        reason = no_room(task, level)
        if reason is None:
            return None
        return (f"environment cannot apply at level {level}: the table has no room ({reason}; "
                f"measured on the task's fast-mode init state by {BUILDER})")
    return None
