"""Asks LIBERO, after each control, whether each goal predicate holds.

The evaluation is LIBERO's own: ``_eval_predicate`` on each state of the parsed goal,
the call its ``_check_success`` makes for every predicate (it evaluates them all and
takes their conjunction). It reads simulator state only, so it changes no observation,
action or outcome; ``goals.progress`` keeps what the record holds of the answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_libero.goals.progress import GoalTracker, ProgressRecord, written_predicates


class GoalProbe:
    """Built on the settled scene (its answers then are ``held_at_start``)."""

    def __init__(self, robosuite_env: Any, bddl_file: Path) -> None:
        self.env = robosuite_env
        self.states = [list(state) for state in robosuite_env.parsed_problem.get("goal_state", [])]
        text = bddl_file.read_text(encoding="utf-8", errors="replace")
        self.tracker = GoalTracker(written_predicates(text, self.states), self.held())
        self.history: list[tuple[bool, ...]] = []
        """Each control's answers, in order (what the agreement tests compare)."""

    def held(self) -> tuple[bool, ...]:
        return tuple(bool(self.env._eval_predicate(state)) for state in self.states)

    def sample(self, control: int) -> None:
        held = self.held()
        self.history.append(held)
        self.tracker.sample(control, held)

    def record(self) -> ProgressRecord:
        return self.tracker.as_record()
