"""The ``position`` kind: the task's movable objects start elsewhere on the table.

Each object the goal names that stands on the table (perturb/tasks.py: not inside or on
a fixture or another object, nothing stacked on it) has its free joint shifted by the
level's offset in its own drawn direction, after the init state is installed. After
settling, a draw is rejected when a moved object touches anything but its support
(beyond what touched already), fell, still moves, or the goal already holds
(perturb/settling.py draws again). A task whose goal names no such object is skipped at
collection with the reason. LIBERO-PRO's position sweep steps 0.07 m.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from pytest_libero.catalog.inventory import installed_files
from pytest_libero.perturb import settling
from pytest_libero.perturb.contacts import (
    at_rest_problems,
    forbidden_contacts,
    free_joint,
    owners,
    touching,
)
from pytest_libero.perturb.kind import Context, Kind, Magnitudes, Perturbation, Stage
from pytest_libero.perturb.settling import SettledApplied
from pytest_libero.perturb.tasks import position_subjects_of, scene_from_problem

if TYPE_CHECKING:
    from pytest_libero.catalog.entries import Entry


def offsets(perturbation: Perturbation) -> dict[str, list[float]]:
    """Each moved object's intended horizontal offset (m), from the drawn directions."""
    p = perturbation.parameters
    return {name: [round(p["offset_m"] * math.cos(math.radians(a)), 6),
                   round(p["offset_m"] * math.sin(math.radians(a)), 6)]
            for name, a in p["direction_deg"].items()}


def placements(sim: Any, joints: Mapping[str, str]) -> dict[str, list[float]]:
    """Each object's position (its free joint's x, y, z) now."""
    out = {}
    for name, joint in joints.items():
        qpos, _ = free_joint(sim, joint)
        out[name] = [float(v) for v in sim.data.qpos[qpos:qpos + 3]]
    return out


def displace(sim: Any, joints: Mapping[str, str], perturbation: Perturbation) -> dict[str, list[float]]:
    """Shift each moved object's free joint by its offset; return the offsets."""
    intended = offsets(perturbation)
    for name, (dx, dy) in intended.items():
        qpos, qvel = free_joint(sim, joints[name])
        sim.data.qpos[qpos] += dx
        sim.data.qpos[qpos + 1] += dy
        sim.data.qvel[qvel:qvel + 6] = 0.0
    sim.forward()
    return intended


def rejections(sim: Any, joints: Mapping[str, str], owner: list[str],
               allowed: set[tuple[str, str]], rest: Mapping[str, list[float]],
               goal_holds: bool) -> list[str]:
    """Why the settled scene does not stand (empty: it does). ``allowed``: the pairs that
    touch in the scene settled unperturbed; ``rest``: where each object rests there."""
    problems = [f"{name} touches {', '.join(others)}" for name, others in
                forbidden_contacts(joints, touching(sim, owner), allowed).items()]
    for name, joint in joints.items():
        problems += [f"{name} {p}" for p in at_rest_problems(sim, joint, rest[name][2])]
    if goal_holds:
        problems.append("the goal already holds")
    return problems


def displacement(before: Mapping[str, list[float]], after: Mapping[str, list[float]]) -> dict[str, Any]:
    """Each moved object's displacement after settling: x, y, z and the horizontal size."""
    out: dict[str, Any] = {}
    for name, start in before.items():
        d = np.asarray(after[name]) - np.asarray(start)
        out[name] = {"xyz": [round(float(v), 6) for v in d],
                     "horizontal_m": round(float(np.hypot(d[0], d[1])), 6)}
    return out


class PositionApplied(SettledApplied):
    """The task's movable objects on the table, moved by the level's offset."""

    def __init__(self, kind: Kind, level: int, stage: Stage) -> None:
        super().__init__(kind, level, stage)
        self.moved: tuple[str, ...] = ()
        self.kept: dict[str, str] = {}
        self.joints: dict[str, str] = {}
        self.owner: list[str] = []
        self.allowed: set[tuple[str, str]] = set()
        self.rest: dict[str, list[float]] = {}
        self.intended: dict[str, list[float]] = {}

    def context(self) -> Context:
        return {"objects": self.moved}

    def reference(self) -> None:
        env = self.stage.env
        inner = env.env
        self.moved, self.kept = scene_from_problem(inner.parsed_problem).position_subjects()
        if not self.moved:
            raise ValueError("no movable task object stands on the table; the position kind "
                             f"has nothing to move ({self.kept or 'the goal names no object'})")
        self.joints = {name: inner.objects_dict[name].joints[-1] for name in self.moved}
        self.owner = owners(env.sim, {n: o.root_body for n, o in inner.objects_dict.items()},
                            {n: o.root_body for n, o in inner.fixtures_dict.items()})
        self.allowed = touching(env.sim, self.owner)
        self.rest = placements(env.sim, self.joints)

    def apply(self, drawn: Perturbation) -> list[str]:
        self.intended = displace(self.stage.env.sim, self.joints, drawn)
        return []

    def judge(self, goal_holds: bool) -> list[str]:
        return rejections(self.stage.env.sim, self.joints, self.owner, self.allowed, self.rest,
                          goal_holds)

    def placed(self) -> dict[str, Any]:
        return {"kept": self.kept, "intended_offset_m": self.intended,
                "displacement": displacement(self.rest, placements(self.stage.env.sim, self.joints))}


class Position(Kind):
    name = "position"
    levels: ClassVar[dict[int, dict[str, float]]] = {
        1: {"offset_m": 0.03},
        2: {"offset_m": 0.06},
        3: {"offset_m": 0.09},
        4: {"offset_m": 0.12},
    }
    applied = PositionApplied

    def parameters(self, rng: np.random.Generator, first: np.random.Generator,
                   magnitudes: Magnitudes, context: Context) -> dict[str, Any]:
        """One direction per moved object, in the order of their sorted names."""
        objects = sorted(context.get("objects", ()))
        angles = rng.uniform(0.0, 360.0, len(objects))
        return {"offset_m": magnitudes["offset_m"],
                "direction_deg": {name: round(float(a), 6) for name, a in zip(objects, angles)}}

    def identity_terms(self) -> dict[str, Any]:
        return settling.identity_terms()

    def not_applicable(self, entry: Entry, level: int) -> str | None:
        bddl, _ = installed_files(entry.bddl_file, entry.init_states_file)
        moved, kept = position_subjects_of(bddl)
        if moved:
            return None
        named = ", ".join(f"{name} ({why})" for name, why in kept.items()) or "only regions"
        return ("position cannot apply: the goal names no movable object standing on the "
                f"table (it names {named})")
