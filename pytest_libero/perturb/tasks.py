"""What a task's BDDL says about its objects: which the goal names, where each starts.

The position kind moves the task's movable objects that stand on the table; an object
inside or on a fixture (a drawer, a cabinet, a rack), on another object, or with another
object on it stays where it is. The same rule answers at collection (from the BDDL
text, no simulator) and on the built scene (from LIBERO's parsed problem), both in
perturb/kinds/position.py, so a case that has nothing to move is skipped before it runs, with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Sexp = str | list["Sexp"]


def _parse(text: str) -> list[Sexp]:
    """The BDDL's s-expressions, comments dropped, atoms lowercased as LIBERO reads them."""
    joined = " ".join(line.split(";")[0] for line in text.splitlines())
    tokens = joined.replace("(", " ( ").replace(")", " ) ").split()
    stack: list[list[Sexp]] = [[]]
    for token in tokens:
        if token == "(":
            stack.append([])
        elif token == ")":
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(token.lower())
    return stack[0]


def _section(problem: Sequence[Sexp], name: str) -> list[Sexp]:
    for part in problem:
        if isinstance(part, list) and part and part[0] == name:
            return part[1:]
    return []


def _typed(names: Sequence[Sexp]) -> dict[str, str]:
    """``a b - bowl c - plate`` -> {a: bowl, b: bowl, c: plate}."""
    out: dict[str, str] = {}
    pending: list[str] = []
    items = [n for n in names if isinstance(n, str)]
    i = 0
    while i < len(items):
        if items[i] == "-" and i + 1 < len(items):
            out.update({n: items[i + 1] for n in pending})
            pending = []
            i += 2
            continue
        pending.append(items[i])
        i += 1
    return out


@dataclass(frozen=True)
class TaskScene:
    """The BDDL's objects and placements, as the position kind needs them."""

    of_interest: tuple[str, ...]
    objects: Mapping[str, str]
    """Movable objects: name -> category."""
    fixtures: Mapping[str, str]
    """Fixtures (the table among them, where the BDDL lists it): name -> category."""
    region_targets: Mapping[str, str]
    """Region (LIBERO's full name, ``<target>_<region>``) -> what it lies on or in."""
    initial: tuple[tuple[str, ...], ...]
    """The init predicates, e.g. ("on", "bowl_1", "main_table_bowl_region")."""

    def task_objects(self) -> tuple[str, ...]:
        """The objects and fixtures the goal involves, sorted (see :func:`owners_of`)."""
        return owners_of(self.of_interest, [*self.objects, *self.fixtures])

    def is_support(self, target: str) -> bool:
        """The table or floor: a region target that is no movable object and no fixture
        other than a table."""
        if target in self.objects:
            return False
        category = self.fixtures.get(target)
        return category is None or category.endswith("table") or category == "floor"

    def position_subjects(self) -> tuple[tuple[str, ...], dict[str, str]]:
        """(the task objects the position kind moves, sorted; {task object kept: why})."""
        stacked = {p[2] for p in self.initial if len(p) == 3 and p[0] == "on" and p[2] in self.objects}
        moved: list[str] = []
        kept: dict[str, str] = {}
        for name in self.of_interest:
            if name not in self.objects:
                if name in self.fixtures:
                    kept[name] = "a fixture"
                continue
            where = [p for p in self.initial if len(p) == 3 and p[1] == name and p[0] in ("on", "in")]
            if not where:
                kept[name] = "no init placement in the BDDL"
                continue
            predicate, _, place = where[0]
            target = self.region_targets.get(place, place)
            if predicate == "in" or not self.is_support(target):
                kept[name] = f"{predicate} {target} (inside or on a fixture or object)"
            elif name in stacked:
                kept[name] = "another object stands on it"
            else:
                moved.append(name)
        return tuple(sorted(moved)), kept


def owners_of(of_interest: Iterable[str], names: Iterable[str]) -> tuple[str, ...]:
    """The named objects and fixtures the BDDL's objects of interest stand for, sorted: an
    item is itself or, for a region (``wooden_cabinet_1_top_region``), the longest name
    it starts with. The object kind recolours these, and the semantic kind describes
    them, so both mean the same objects."""
    names = list(names)
    found = set()
    for item in of_interest:
        owner = max((n for n in names if item == n or item.startswith(n + "_")), key=len, default=None)
        if owner is not None:
            found.add(owner)
    return tuple(sorted(found))


def scene_from_bddl(text: str) -> TaskScene:
    """A TaskScene from a BDDL file's text."""
    parsed = _parse(text)
    # A whole file is one (define ...); a fragment of sections is read as they stand.
    whole = len(parsed) == 1 and isinstance(parsed[0], list) and parsed[0][:1] == ["define"]
    problem = parsed[0] if whole else parsed
    regions: dict[str, str] = {}
    for region in _section(problem, ":regions"):
        if isinstance(region, list) and region and isinstance(region[0], str):
            target = _section(region[1:], ":target")
            if target and isinstance(target[0], str):
                regions[f"{target[0]}_{region[0]}"] = target[0]
    initial = tuple(tuple(p for p in pred if isinstance(p, str))
                    for pred in _section(problem, ":init") if isinstance(pred, list))
    of_interest = tuple(n for n in _section(problem, ":obj_of_interest") if isinstance(n, str))
    return TaskScene(of_interest, _typed(_section(problem, ":objects")),
                     _typed(_section(problem, ":fixtures")), regions, initial)


def scene_from_problem(parsed: Mapping[str, Any]) -> TaskScene:
    """A TaskScene from LIBERO's parsed problem (``env.parsed_problem``)."""

    def flat(groups: Mapping[str, Iterable[str]]) -> dict[str, str]:
        return {name: category for category, names in groups.items() for name in names}

    return TaskScene(
        tuple(parsed.get("obj_of_interest", ())), flat(parsed.get("objects", {})),
        flat(parsed.get("fixtures", {})),
        {name: str(r.get("target")) for name, r in parsed.get("regions", {}).items()},
        tuple(tuple(str(p) for p in pred) for pred in parsed.get("initial_state", ())))


def position_subjects_of(bddl: Path) -> tuple[tuple[str, ...], dict[str, str]]:
    """The position kind's subjects for an installed BDDL file."""
    return scene_from_bddl(bddl.read_text(encoding="utf-8")).position_subjects()
