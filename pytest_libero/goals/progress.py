"""Each goal predicate's course through an episode, from LIBERO's own evaluation of it.

LIBERO's success is the conjunction of the BDDL goal's predicates, each evaluated by
LIBERO (``_eval_predicate`` on the parsed goal) at every control. The adapter asks the
same evaluation for each predicate after each control and feeds the answers here; this
module keeps what the record holds of them and knows nothing of the simulator.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict, TypeGuard


class ProgressRecord(TypedDict):
    """The record's ``progress`` (docs/records.md)."""

    predicates: list[str]
    """The goal's predicates as the BDDL writes them, in its order."""
    held_at_start: list[bool]
    """Whether each held on the settled scene, before the first control."""
    held_at_end: list[bool]
    first_held: list[int | None]
    """The first control after which each held (null: never)."""
    most_held: int
    """The most predicates that held at once, after any control."""
    controls: NotRequired[int]
    """The controls evaluated: the episode's executed controls."""


@dataclass
class GoalTracker:
    """Fed each control's answers, keeps the record's summary of them."""

    predicates: tuple[str, ...]
    held_at_start: tuple[bool, ...]

    def __post_init__(self) -> None:
        count = len(self.predicates)
        if len(self.held_at_start) != count:
            raise ValueError(f"{len(self.held_at_start)} answers for {count} goal predicates")
        self.held: tuple[bool, ...] = self.held_at_start
        self.first_held: list[int | None] = [None] * count
        self.most_held = 0
        self.controls = 0

    def sample(self, control: int, held: Sequence[bool]) -> None:
        """The answers after ``control`` (1, 2, ...), one per predicate."""
        if len(held) != len(self.predicates):
            raise ValueError(f"{len(held)} answers for {len(self.predicates)} goal predicates")
        self.held = tuple(bool(h) for h in held)
        self.controls = control
        for index, now in enumerate(self.held):
            if now and self.first_held[index] is None:
                self.first_held[index] = control
        self.most_held = max(self.most_held, sum(self.held))

    @property
    def all_held(self) -> bool:
        """Whether every predicate holds now: LIBERO's success after the last control."""
        return all(self.held)

    def as_record(self) -> ProgressRecord:
        return {"predicates": list(self.predicates), "held_at_start": list(self.held_at_start),
                "held_at_end": list(self.held), "first_held": list(self.first_held),
                "most_held": self.most_held, "controls": self.controls}


def progress_problem(value: Any) -> str | None:
    """Why ``value`` is not a progress record every reader can use, or None: one entry
    per predicate in each list, controls counted from 1, at most all held at once."""
    if not isinstance(value, dict):
        return f"is a {type(value).__name__}, not a progress record"
    predicates = value.get("predicates")
    if not isinstance(predicates, list) or not all(isinstance(p, str) for p in predicates):
        return "has no list of predicates"
    count = len(predicates)
    for name in ("held_at_end", "held_at_start"):
        held = value.get(name)
        if not isinstance(held, list) or len(held) != count or not all(isinstance(h, bool) for h in held):
            return f"has no {name} answer (true or false) for each of its {count} predicates"
    first = value.get("first_held")
    if (not isinstance(first, list) or len(first) != count
            or not all(f is None or (_counted(f) and f >= 1) for f in first)):
        return f"has no first_held control (1 or more, or null) for each of its {count} predicates"
    most = value.get("most_held")
    if not _counted(most) or most > count:
        return f"has most_held {str(most)[:20]!r}, not a count from 0 to {count}"
    if "controls" in value and not _counted(value["controls"]):
        return "has controls that are not a count"
    return None


def _counted(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


ATOM = re.compile(r"\(\s*([A-Za-z][\w-]*)((?:\s+[\w-]+)*)\s*\)")


def written_predicates(bddl_text: str, parsed: Sequence[Sequence[str]]) -> tuple[str, ...]:
    """The goal's predicates as the BDDL text writes them (LIBERO's parser lowercases);
    the parsed form, in the BDDL's notation, where the text's goal cannot be matched."""
    spelled = tuple(f"({' '.join(str(token) for token in state)})" for state in parsed)
    start = bddl_text.find("(:goal")
    if start < 0:
        return spelled
    atoms = [f"({name}{''.join(' ' + arg for arg in args.split())})"
             for name, args in ATOM.findall(bddl_text[start + len("(:goal"):])]
    written = tuple(atoms[:len(spelled)])
    if tuple(atom.lower() for atom in written) != tuple(s.lower() for s in spelled):
        return spelled
    return written
