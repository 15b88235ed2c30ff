"""The position kind on a built scene: move the task's objects, then judge the settled scene.

The adapter installs the init state, calls :func:`displace` (each moved object's free
joint shifted by the level's offset in its drawn direction), runs the settling controls
and asks :func:`rejections` whether the draw stands: a moved object that touches
anything but its support (beyond what touched already), fell, still moves, or a goal
that already holds rejects it, and the next attempt is drawn (perturb/levels.py's
SCENE_REDRAWS). Nothing here imports the simulator.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from pytest_libero.perturb.contacts import at_rest_problems, forbidden_contacts, free_joint, touching
from pytest_libero.perturb.draw import Perturbation


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
